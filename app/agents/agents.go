package agents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Agents resolves agent ids to the command that runs them, installing
// agents on first use. Launch, Installed, Install and the catalogue
// (Catalog) all read one Resolution (resolve), so they cannot disagree.
//
// Resolution order, first match wins:
//  1. a launcher file <InstallDir>/agent_processes/<id>-acp, for any id
//     (the reference behaves so, and the official SDK's tests replace the
//     mock this way), unless the program it execs no longer exists: such a
//     launcher is reported (Resolution.Broken, GET /v1/agents configError,
//     a log warning) and skipped;
//  2. an operator-defined agent (--agents-file);
//  3. the built-in mock, run as "<SelfExe> mock-agent-process": always
//     installed, its install a no-op, so nothing on disk ever records the
//     path of this executable (which may be a temporary `go run` build);
//  4. a known agent's adapter already on PATH (claude-agent-acp, ...), or
//     its native binary when that speaks ACP itself (opencode);
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
	// Logger hears about broken launchers (once per launcher and target).
	Logger *slog.Logger

	warned sync.Map // launcher path + "\x00" + target → struct{}
}

// Launch sources of a Resolution's Spec.
const (
	sourceLauncher  = "launcher"
	sourceOperator  = "operator"
	sourceBuiltin   = "builtin"
	sourceLocalPath = "local_path"
)

// Resolution is what an agent id resolves to on this host now, without
// installing anything.
type Resolution struct {
	Agent string
	// Spec runs the agent when Runnable; Spec.Source says which step of the
	// order found it.
	Spec     domain.LaunchSpec
	Runnable bool
	// Launcher is where the agent's launcher file lives (or would).
	Launcher string
	// Broken, when set, says why a launcher file there was skipped.
	Broken string
	// Builtin marks the agent that is part of the daemon (the mock): never
	// installed, always runnable.
	Builtin bool
	// Known is true for the agents this daemon has a recipe for.
	Known bool
}

// LauncherPath is where the launcher of agent lives.
func (a *Agents) LauncherPath(agent string) string { return launcherPath(a.InstallDir, agent) }

// launcherPath and launcherIDs are the one place the launcher layout is
// spelled: <dir>/agent_processes/<agent>-acp.
func launcherPath(dir, agent string) string {
	return filepath.Join(launcherDir(dir), agent+"-acp")
}

func launcherDir(dir string) string { return filepath.Join(dir, "agent_processes") }

// launcherIDs lists the agents with a launcher file, sorted by id.
func (a *Agents) launcherIDs() []string {
	entries, err := afero.ReadDir(a.Fs, launcherDir(a.InstallDir)) // sorted by name
	if err != nil {
		return nil
	}
	var ids []string
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), "-acp"); ok && !e.IsDir() && domain.ValidAgentID(id) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// resolve walks steps 1-4 of the order. It is the only place that knows
// the mock is built in.
func (a *Agents) resolve(agent string) Resolution {
	r := Resolution{Agent: agent, Launcher: a.LauncherPath(agent), Builtin: agent == domain.MockAgent}
	_, r.Known = domain.RecipeFor(agent)
	run := func(spec domain.LaunchSpec) Resolution {
		spec.Agent = agent
		r.Spec, r.Runnable = spec, true
		return r
	}
	switch ok, broken := checkLauncher(a.Fs, r.Launcher); {
	case ok:
		return run(domain.LaunchSpec{Command: r.Launcher, Source: sourceLauncher})
	case broken != "":
		r.Broken = broken
		a.warnBroken(r.Launcher, broken)
	}
	if op, ok := a.operator(agent); ok {
		return run(domain.LaunchSpec{Command: op.Command, Args: op.Args, Env: op.Env, Source: sourceOperator})
	}
	if r.Builtin {
		return run(domain.LaunchSpec{Command: a.SelfExe, Args: []string{"mock-agent-process"}, Source: sourceBuiltin})
	}
	if p, args, ok := a.onPath(agent); ok {
		return run(domain.LaunchSpec{Command: p, Args: args, Source: sourceLocalPath})
	}
	return r
}

// CheckLaunchers resolves every agent that has a launcher file, so that a
// broken one is logged when the daemon starts rather than on first use.
// It returns the ids of the broken ones.
func (a *Agents) CheckLaunchers() []string {
	var broken []string
	for _, id := range a.launcherIDs() {
		if a.resolve(id).Broken != "" {
			broken = append(broken, id)
		}
	}
	return broken
}

func (a *Agents) warnBroken(launcher, why string) {
	if a.Logger == nil {
		return
	}
	if _, seen := a.warned.LoadOrStore(launcher+"\x00"+why, struct{}{}); !seen {
		a.Logger.Warn("launcher not used", "launcher", launcher, "reason", why,
			"fix", "reinstall the agent (install-agent <agent> --reinstall) or delete the launcher")
	}
}

// Launch implements acp.Launcher.
func (a *Agents) Launch(ctx context.Context, agent string) (domain.LaunchSpec, error) {
	if !domain.ValidAgentID(agent) {
		return domain.LaunchSpec{}, domain.UnsupportedAgent(agent)
	}
	r := a.resolve(agent)
	if r.Runnable {
		return r.Spec, nil
	}
	if a.Installer == nil {
		if r.Known {
			return domain.LaunchSpec{}, notInstalled(agent)
		}
		return domain.LaunchSpec{}, domain.UnsupportedAgent(agent)
	}
	if !r.Known {
		listed, err := a.Installer.Listed(ctx, agent)
		if err != nil {
			return domain.LaunchSpec{}, domain.UnlistedAgent(agent, err)
		}
		if !listed {
			return domain.LaunchSpec{}, domain.UnsupportedAgent(agent)
		}
	}
	if a.RequirePreinstall {
		return domain.LaunchSpec{}, notInstalled(agent)
	}
	if _, err := a.Installer.Install(ctx, agent, domain.InstallOptions{}); err != nil {
		return domain.LaunchSpec{}, err
	}
	if r = a.resolve(agent); r.Runnable {
		return r.Spec, nil
	}
	return domain.LaunchSpec{}, domain.InstallFailed(agent, "the install ended without a launcher at "+r.Launcher)
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
	if recipe.NativeACPArgs != nil {
		if p, _, ok := nativeBinary(a.Fs, a.InstallDir, a.LookPath, agent); ok {
			return p, recipe.NativeACPArgs, true
		}
	}
	return "", nil, false
}

// nativeBinary finds the native binary of a known agent: the installed
// one (<dir>/<binary>), else one on PATH.
func nativeBinary(fs afero.Fs, dir string, lookPath func(string) (string, bool), agent string) (string, domain.InstallSource, bool) {
	recipe, _ := domain.RecipeFor(agent)
	if recipe.Native == nil {
		return "", "", false
	}
	if p := filepath.Join(dir, recipe.Native.Binary); isFile(fs, p) {
		return p, domain.SourceFallback, true
	}
	if lookPath != nil {
		if p, ok := lookPath(recipe.Native.Binary); ok {
			return p, domain.SourceLocalPath, true
		}
	}
	return "", "", false
}

// Installed reports whether agent can run without an install step: the
// built-in mock always can.
func (a *Agents) Installed(agent string) bool {
	return a.resolve(agent).Runnable
}

// Install installs agent explicitly (POST /v1/agents/{agent}/install).
// The built-in mock and operator-defined agents need no install: for them
// it changes nothing and answers already_installed.
func (a *Agents) Install(ctx context.Context, agent string, opts domain.InstallOptions) (domain.InstallResult, error) {
	if !domain.ValidAgentID(agent) {
		return domain.InstallResult{}, domain.UnsupportedAgent(agent)
	}
	if err := opts.Validate(); err != nil {
		return domain.InstallResult{}, err
	}
	if r := a.resolve(agent); r.Builtin || r.Spec.Source == sourceOperator {
		return domain.InstallResult{AlreadyInstalled: true, Artifacts: []domain.Artifact{}}, nil
	}
	if a.Installer == nil {
		return domain.InstallResult{}, domain.InstallFailed(agent, "installing agents is not configured")
	}
	return a.Installer.Install(ctx, agent, opts)
}

func notInstalled(agent string) error {
	return domain.AgentNotInstalled(agent)
}

func (a *Agents) operator(agent string) (domain.OperatorAgent, bool) {
	for _, op := range a.Operator {
		if op.ID == agent {
			return op, true
		}
	}
	return domain.OperatorAgent{}, false
}

// maxLauncher bounds how much of a launcher file is read to find the
// program it execs; ours are a few hundred bytes.
const maxLauncher = 64 << 10

// checkLauncher reports whether a usable launcher file is at p. A file
// whose exec line names an absolute program that no longer exists (a
// launcher of a deleted install, or of a `go run` build long gone) is not
// usable: broken says why. Launchers written by hand that exec something
// on PATH, or a script without an exec line, are used as they are.
func checkLauncher(fsys afero.Fs, p string) (ok bool, broken string) {
	if !isFile(fsys, p) {
		return false, ""
	}
	f, err := fsys.Open(p)
	if err != nil {
		return true, "" // let the exec report what is wrong
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxLauncher))
	if err != nil {
		return true, ""
	}
	target := execTarget(string(b))
	if !filepath.IsAbs(target) {
		return true, ""
	}
	if _, err := fsys.Stat(target); errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Sprintf("%s execs %s, which no longer exists", p, target)
	}
	return true, ""
}

// execTarget is the program named by the last "exec" line of a shell
// script: a single-quoted word as launcherScript writes it, or a plain
// word; "" when there is none.
func execTarget(script string) string {
	target := ""
	for _, line := range strings.Split(script, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "exec ")
		if !ok {
			continue
		}
		rest = strings.TrimSpace(rest)
		if !strings.HasPrefix(rest, "'") {
			target, _, _ = strings.Cut(rest, " ")
			continue
		}
		// Single quotes, with ' written as '\'' (shellQuote).
		var b strings.Builder
		for s := rest[1:]; ; {
			i := strings.IndexByte(s, '\'')
			if i < 0 {
				b.Reset() // unterminated: not a word we understand
				break
			}
			b.WriteString(s[:i])
			if !strings.HasPrefix(s[i:], `'\''`) {
				break
			}
			b.WriteByte('\'')
			s = s[i+4:]
		}
		target = b.String()
	}
	return target
}
