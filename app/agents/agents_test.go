package agents

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

func rigAgents(r *installRig) *Agents {
	return &Agents{Fs: r.fs, InstallDir: testDir, SelfExe: "/usr/bin/sandbox-agent", Installer: r.in,
		Operator: []domain.OperatorAgent{{ID: "ops", Command: "/opt/ops-agent", Args: []string{"--stdio"}}}}
}

func TestLaunchResolutionOrder(t *testing.T) {
	r := newRig(t, npxRegistry)
	a := rigAgents(r)
	ctx := context.Background()

	spec, err := a.Launch(ctx, "mock")
	if err != nil || spec.Command != "/usr/bin/sandbox-agent" || spec.Args[0] != "mock-agent-process" || spec.Source != "builtin" {
		t.Fatalf("mock = %+v, %v", spec, err)
	}
	spec, err = a.Launch(ctx, "ops")
	if err != nil || spec.Command != "/opt/ops-agent" || spec.Source != "operator" {
		t.Fatalf("operator = %+v, %v", spec, err)
	}
	// A launcher file wins over everything, the mock included.
	if err := afero.WriteFile(r.fs, a.LauncherPath("mock"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec, err = a.Launch(ctx, "mock")
	if err != nil || spec.Command != a.LauncherPath("mock") || spec.Source != "launcher" {
		t.Fatalf("mock with launcher = %+v, %v", spec, err)
	}
	// An adapter on PATH is used as it is.
	a.LookPath = func(name string) (string, bool) { return "/usr/local/bin/" + name, name == "claude-agent-acp" }
	spec, err = a.Launch(ctx, "claude")
	if err != nil || spec.Command != "/usr/local/bin/claude-agent-acp" || r.npmCount.Load() != 0 {
		t.Fatalf("claude on PATH = %+v, %v (npm runs %d)", spec, err, r.npmCount.Load())
	}
	if _, err := a.Launch(ctx, "bad/id"); !domain.IsKind(err, domain.KindUnsupportedAgent) {
		t.Fatalf("bad id: %v", err)
	}
	if _, err := a.Launch(ctx, "nobody"); !domain.IsKind(err, domain.KindUnsupportedAgent) {
		t.Fatalf("unknown id: %v", err)
	}
}

func TestLaunchInstallsLazily(t *testing.T) {
	r := newRig(t, npxRegistry)
	a := rigAgents(r)
	spec, err := a.Launch(context.Background(), "claude")
	if err != nil {
		t.Fatal(err)
	}
	if spec.Command != a.LauncherPath("claude") || r.npmCount.Load() != 1 {
		t.Fatalf("spec = %+v, npm runs %d", spec, r.npmCount.Load())
	}
	// Beyond the reference: any registry agent runs.
	spec, err = a.Launch(context.Background(), "new-agent")
	if err != nil || spec.Command != a.LauncherPath("new-agent") {
		t.Fatalf("registry agent = %+v, %v", spec, err)
	}
}

// Concurrent first uses of one agent install it once.
func TestLaunchConcurrentBootstrapsInstallOnce(t *testing.T) {
	r := newRig(t, npxRegistry)
	a := rigAgents(r)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			spec, err := a.Launch(context.Background(), "claude")
			if err == nil && spec.Command != a.LauncherPath("claude") {
				err = domain.InvalidRequest("wrong command %s", spec.Command)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := r.npmCount.Load(); n != 1 {
		t.Errorf("npm install ran %d times, want 1", n)
	}
}

func TestLaunchRequirePreinstall(t *testing.T) {
	r := newRig(t, npxRegistry)
	a := rigAgents(r)
	a.RequirePreinstall = true
	for _, id := range []string{"claude", "new-agent"} {
		_, err := a.Launch(context.Background(), id)
		if e, ok := domain.AsError(err); !ok || e.Kind != domain.KindAgentNotInstalled || e.Agent != id {
			t.Errorf("%s: err = %v, want agent_not_installed", id, err)
		}
	}
	if _, err := a.Launch(context.Background(), "nobody"); !domain.IsKind(err, domain.KindUnsupportedAgent) {
		t.Errorf("nobody: %v", err)
	}
	if r.npmCount.Load() != 0 {
		t.Error("installed although preinstall is required")
	}
}

func TestLaunchInstallFailure(t *testing.T) {
	r := newRig(t, npxRegistry)
	r.failVerify = true
	_, err := rigAgents(r).Launch(context.Background(), "claude")
	wantInstallFailed(t, err, "verify", "cannot find module")
}

func TestAgentsInstallOperator(t *testing.T) {
	r := newRig(t, npxRegistry)
	res, err := rigAgents(r).Install(context.Background(), "ops", domain.InstallOptions{})
	if err != nil || !res.AlreadyInstalled {
		t.Fatalf("operator install = %+v, %v", res, err)
	}
}

// TestMockBuiltIn: the mock is installed from the start, installing it
// (or reinstalling it) changes nothing on disk, and it runs as this
// executable, never through a launcher recording the executable's path.
func TestMockBuiltIn(t *testing.T) {
	r := newRig(t, npxRegistry)
	a := rigAgents(r)
	ctx := context.Background()
	if !a.Installed("mock") {
		t.Fatal("mock not installed")
	}
	for _, opts := range []domain.InstallOptions{{}, {Reinstall: true}, {AgentProcessVersion: "9"}} {
		res, err := a.Install(ctx, "mock", opts)
		if err != nil || !res.AlreadyInstalled || res.Artifacts == nil || len(res.Artifacts) != 0 {
			t.Fatalf("install mock %+v = %+v, %v", opts, res, err)
		}
	}
	if ok, _ := afero.Exists(r.fs, a.LauncherPath("mock")); ok {
		t.Fatal("installing the mock wrote a launcher")
	}
	if r.fetches.Load() != 0 || r.npmCount.Load() != 0 {
		t.Errorf("installing the mock asked the registry (%d) or npm (%d)", r.fetches.Load(), r.npmCount.Load())
	}
	spec, err := a.Launch(ctx, "mock")
	if err != nil || spec.Command != "/usr/bin/sandbox-agent" || spec.Source != "builtin" {
		t.Fatalf("mock = %+v, %v", spec, err)
	}
}

// TestBrokenLauncher: a launcher whose program is gone (here: one an
// older version wrote for the mock, pointing at a deleted `go run` build)
// is reported and skipped; the next step of the order runs instead, and a
// lazy install replaces a broken launcher of an installable agent.
func TestBrokenLauncher(t *testing.T) {
	r := newRig(t, npxRegistry)
	a := rigAgents(r)
	var logs strings.Builder
	a.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	ctx := context.Background()
	stale := "#!/bin/sh\nexec '/tmp/go-build1/b001/exe/sandbox-agent' 'mock-agent-process' \"$@\"\n"
	for _, id := range []string{"mock", "claude"} {
		if err := afero.WriteFile(r.fs, a.LauncherPath(id), []byte(stale), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.CheckLaunchers(); len(got) != 2 || got[0] != "claude" || got[1] != "mock" {
		t.Errorf("CheckLaunchers = %v", got)
	}
	res := a.resolve("mock")
	if !res.Runnable || res.Spec.Source != "builtin" || !strings.Contains(res.Broken, "/tmp/go-build1/b001/exe/sandbox-agent, which no longer exists") {
		t.Fatalf("mock with a stale launcher = %+v", res)
	}
	if a.Installed("claude") {
		t.Error("claude with a broken launcher counts as installed")
	}
	c := &Catalog{Agents: a}
	info, err := c.Get(ctx, "claude", CatalogQuery{Config: true})
	if err != nil || info.Installed || !strings.Contains(info.ConfigError, "no longer exists") || info.Path != a.LauncherPath("claude") {
		t.Errorf("claude listed as %+v, %v", info, err)
	}
	if n := strings.Count(logs.String(), "launcher not used"); n != 2 {
		t.Errorf("%d warnings (want one per launcher, however often resolved):\n%s", n, logs.String())
	}
	// Launching claude installs it again, over the broken launcher.
	spec, err := a.Launch(ctx, "claude")
	if err != nil || spec.Command != a.LauncherPath("claude") || r.npmCount.Load() != 1 {
		t.Fatalf("claude = %+v, %v (npm runs %d)", spec, err, r.npmCount.Load())
	}
	if info, _ := c.Get(ctx, "claude", CatalogQuery{}); !info.Installed || info.ConfigError != "" {
		t.Errorf("claude after reinstall = %+v", info)
	}
	// A launcher the user wrote that execs something on PATH is used as is.
	if err := afero.WriteFile(r.fs, a.LauncherPath("mock"), []byte("#!/bin/sh\nexec node /srv/fake-mock.js \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if res := a.resolve("mock"); res.Spec.Source != "launcher" || res.Broken != "" {
		t.Errorf("hand-written mock launcher = %+v", res)
	}
}

func TestExecTarget(t *testing.T) {
	for script, want := range map[string]string{
		"#!/bin/sh\nexec '/a b/c' 'x' \"$@\"\n":               "/a b/c",
		"#!/bin/sh\nexec '/it'\\''s/bin' \"$@\"\n":            "/it's/bin",
		"#!/bin/sh\nexport A='1'\nexec /usr/bin/env node x\n": "/usr/bin/env",
		"#!/bin/sh\n  exec   node x.js\n":                     "node",
		"#!/bin/sh\necho hi\n":                                "",
		"exec '/unterminated":                                 "",
		"exec '/first'\nexec '/second'\n":                     "/second",
	} {
		if got := execTarget(script); got != want {
			t.Errorf("execTarget(%q) = %q, want %q", script, got, want)
		}
	}
}
