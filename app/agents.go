package app

import (
	"context"
	"path/filepath"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Agents resolves agent ids to the command that runs them.
//
// Resolution order, first match wins:
//  1. a launcher file <InstallDir>/agent_processes/<id>-acp, for any id
//     (the reference behaves so, and the official SDK's tests replace the
//     mock this way);
//  2. an operator-defined agent (--agents-file);
//  3. the built-in mock, run as "<SelfExe> mock-agent-process";
//  4. a known agent that is not installed: agent_not_installed;
//  5. anything else: unsupported_agent.
type Agents struct {
	// Fs is where launchers are looked up (the host filesystem in the
	// daemon; a memory filesystem in tests).
	Fs afero.Fs
	// InstallDir is $XDG_DATA_HOME/sandbox-agent/bin.
	InstallDir string
	// SelfExe is the daemon's own executable, which also is the mock agent.
	SelfExe string
	// Operator lists operator-defined agents in the order they were given.
	Operator []domain.OperatorAgent
}

var _ Launcher = (*Agents)(nil)

// LauncherPath is where the launcher of agent lives.
func (a *Agents) LauncherPath(agent string) string {
	return filepath.Join(a.InstallDir, "agent_processes", agent+"-acp")
}

// Launch implements Launcher.
func (a *Agents) Launch(ctx context.Context, agent string) (domain.LaunchSpec, error) {
	if !domain.ValidAgentID(agent) {
		return domain.LaunchSpec{}, unsupportedAgent(agent)
	}
	if p := a.LauncherPath(agent); a.isFile(p) {
		return domain.LaunchSpec{Agent: agent, Command: p, Source: "launcher"}, nil
	}
	if op, ok := a.operator(agent); ok {
		return domain.LaunchSpec{Agent: agent, Command: op.Command, Args: op.Args, Env: op.Env, Source: "operator"}, nil
	}
	if agent == domain.MockAgent {
		return domain.LaunchSpec{Agent: agent, Command: a.SelfExe, Args: []string{"mock-agent-process"}, Source: "builtin"}, nil
	}
	if domain.IsKnownAgent(agent) {
		return domain.LaunchSpec{}, &domain.Error{Kind: domain.KindAgentNotInstalled, Msg: agent, Agent: agent}
	}
	return domain.LaunchSpec{}, unsupportedAgent(agent)
}

func (a *Agents) operator(agent string) (domain.OperatorAgent, bool) {
	for _, op := range a.Operator {
		if op.ID == agent {
			return op, true
		}
	}
	return domain.OperatorAgent{}, false
}

func (a *Agents) isFile(p string) bool {
	if a.Fs == nil {
		return false
	}
	fi, err := a.Fs.Stat(p)
	return err == nil && !fi.IsDir()
}
