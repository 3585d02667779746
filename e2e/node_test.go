package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

var (
	npmOnce sync.Once
	npmErr  error
)

// requireNodeModules installs the pinned npm packages (npm ci, from the
// committed package-lock.json) once per test binary. Compatibility tests are
// part of the test suite: without node and npm they fail, saying so.
func requireNodeModules(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("compatibility tests need node and npm on PATH (Debian: apt-get install nodejs npm)")
	}
	npmOnce.Do(func() {
		lock, err := os.Stat("package-lock.json")
		if err != nil {
			npmErr = err
			return
		}
		if mod, err := os.Stat(filepath.Join("node_modules", ".package-lock.json")); err == nil && mod.ModTime().After(lock.ModTime()) {
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		out, err := cmd.CombinedOutput()
		if err != nil {
			npmErr = &npmError{err: err, out: string(out)}
		}
	})
	if npmErr != nil {
		t.Fatalf("npm ci in e2e/: %v", npmErr)
	}
}

type npmError struct {
	err error
	out string
}

func (e *npmError) Error() string { return e.err.Error() + "\n" + e.out }

// runNode runs e2e/js/<script> with node, with env added, and fails the
// test if it exits non-zero. Its output is logged.
func runNode(t *testing.T, script string, timeout time.Duration, env ...string) string {
	t.Helper()
	requireNodeModules(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join("js", script))
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("node %s:\n%s", script, out)
	if err != nil {
		t.Fatalf("node %s: %v", script, err)
	}
	return string(out)
}
