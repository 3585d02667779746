package agents

import (
	"context"
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
