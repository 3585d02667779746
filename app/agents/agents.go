package agents

import (
	"context"
	"path/filepath"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Agents resolves agent ids to the command that runs them, installing
// agents on first use.
//
// Resolution order, first match wins:
//  1. a launcher file <InstallDir>/agent_processes/<id>-acp, for any id
//     (the reference behaves so, and the official SDK's tests replace the
//     mock this way);
//  2. an operator-defined agent (--agents-file);
//  3. the built-in mock, run as "<SelfExe> mock-agent-process";
//  4. a known agent's adapter already on PATH (claude-agent-acp, ...), or
//     opencode's native binary, which speaks ACP itself;
//  5. a known agent, or one the ACP registry lists: installed now (lazy
//     install), unless RequirePreinstall is set (agent_not_installed);
//  6. anything else: unsupported_agent.
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
	// Installer installs missing agents; nil disables installing.
	Installer *Installer
	// RequirePreinstall turns lazy installs off
	// (SANDBOX_AGENT_REQUIRE_PREINSTALL).
	RequirePreinstall bool
	// LookPath finds an executable on PATH; nil finds nothing.
	LookPath func(name string) (string, bool)
}

// LauncherPath is where the launcher of agent lives.
func (a *Agents) LauncherPath(agent string) string {
	return filepath.Join(a.InstallDir, "agent_processes", agent+"-acp")
}

// Launch implements acp.Launcher.
func (a *Agents) Launch(ctx context.Context, agent string) (domain.LaunchSpec, error) {
	if !domain.ValidAgentID(agent) {
		return domain.LaunchSpec{}, domain.UnsupportedAgent(agent)
	}
	if spec, ok := a.present(agent); ok {
		return spec, nil
	}
	_, known := domain.RecipeFor(agent)
	if a.Installer == nil {
		if known {
			return domain.LaunchSpec{}, notInstalled(agent)
		}
		return domain.LaunchSpec{}, domain.UnsupportedAgent(agent)
	}
	if !known {
		listed, err := a.Installer.Listed(ctx, agent)
		if err != nil || !listed {
			e := domain.UnsupportedAgent(agent)
			if err != nil {
				e.Details = map[string]any{"message": "not a known agent, and the ACP registry could not be read: " + err.Error()}
				e.Err = err
			}
			return domain.LaunchSpec{}, e
		}
	}
	if a.RequirePreinstall {
		return domain.LaunchSpec{}, notInstalled(agent)
	}
	if _, err := a.Installer.Install(ctx, agent, domain.InstallOptions{}); err != nil {
		return domain.LaunchSpec{}, err
	}
	if spec, ok := a.present(agent); ok {
		return spec, nil
	}
	return domain.LaunchSpec{}, &domain.Error{Kind: domain.KindInstallFailed, Msg: agent, Agent: agent,
		Details: map[string]any{"stderr": "the install ended without a launcher at " + a.LauncherPath(agent)}}
}

// present resolves steps 1-4: an agent that can run without installing.
func (a *Agents) present(agent string) (domain.LaunchSpec, bool) {
	if p := a.LauncherPath(agent); isFile(a.Fs, p) {
		return domain.LaunchSpec{Agent: agent, Command: p, Source: "launcher"}, true
	}
	if op, ok := a.operator(agent); ok {
		return domain.LaunchSpec{Agent: agent, Command: op.Command, Args: op.Args, Env: op.Env, Source: "operator"}, true
	}
	if agent == domain.MockAgent {
		return domain.LaunchSpec{Agent: agent, Command: a.SelfExe, Args: []string{"mock-agent-process"}, Source: "builtin"}, true
	}
	if p, args, ok := a.onPath(agent); ok {
		return domain.LaunchSpec{Agent: agent, Command: p, Args: args, Source: "local_path"}, true
	}
	return domain.LaunchSpec{}, false
}

// onPath finds a known agent's adapter on the host: one of its PATH hints,
// or the native binary when that is the ACP agent itself.
func (a *Agents) onPath(agent string) (string, []string, bool) {
	recipe, known := domain.RecipeFor(agent)
	if !known {
		return "", nil, false
	}
	if a.LookPath != nil {
		for _, h := range recipe.PathHints {
			if p, ok := a.LookPath(h); ok {
				return p, nil, true
			}
		}
	}
	if recipe.NativeACPArgs != nil && recipe.Native != nil {
		if p := filepath.Join(a.InstallDir, recipe.Native.Binary); isFile(a.Fs, p) {
			return p, recipe.NativeACPArgs, true
		}
		if a.LookPath != nil {
			if p, ok := a.LookPath(recipe.Native.Binary); ok {
				return p, recipe.NativeACPArgs, true
			}
		}
	}
	return "", nil, false
}

// Installed reports whether agent can run without an install step. The
// mock counts as installed only with a launcher, as in the reference.
func (a *Agents) Installed(agent string) bool {
	if agent == domain.MockAgent {
		return isFile(a.Fs, a.LauncherPath(agent))
	}
	_, ok := a.present(agent)
	return ok
}

// Install installs agent explicitly (POST /v1/agents/{agent}/install).
// Operator-defined agents need no install.
func (a *Agents) Install(ctx context.Context, agent string, opts domain.InstallOptions) (domain.InstallResult, error) {
	if !domain.ValidAgentID(agent) {
		return domain.InstallResult{}, domain.UnsupportedAgent(agent)
	}
	if _, ok := a.operator(agent); ok && !isFile(a.Fs, a.LauncherPath(agent)) {
		return domain.InstallResult{AlreadyInstalled: true, Artifacts: []domain.Artifact{}}, nil
	}
	if a.Installer == nil {
		return domain.InstallResult{}, &domain.Error{Kind: domain.KindInstallFailed, Msg: agent, Agent: agent,
			Details: map[string]any{"stderr": "installing agents is not configured"}}
	}
	return a.Installer.Install(ctx, agent, opts)
}

func notInstalled(agent string) error {
	return &domain.Error{Kind: domain.KindAgentNotInstalled, Msg: agent, Agent: agent}
}

func (a *Agents) operator(agent string) (domain.OperatorAgent, bool) {
	for _, op := range a.Operator {
		if op.ID == agent {
			return op, true
		}
	}
	return domain.OperatorAgent{}, false
}
