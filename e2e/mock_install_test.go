package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// readmeFirstCurl is the README's first example: initialize a mock session.
const readmeFirstCurl = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`

// copyBinary copies the daemon to dir/name, so a test can delete "the"
// binary the way a `go run` build disappears.
func copyBinary(t *testing.T, dir string) string {
	t.Helper()
	// Copied by cp, not written from this process: a test running in
	// parallel that forks while this process holds the new file open for
	// writing gives its child a copy of that descriptor until the child
	// execs, and executing the file meanwhile fails with "text file busy"
	// (ETXTBSY; golang/go#22315). cp's descriptor is cp's alone.
	p := filepath.Join(dir, "sandbox-agent")
	if out, err := exec.Command("cp", harness.Binary, p).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	return p
}

type mockListing struct {
	Installed   bool
	Version     string
	Path        *string
	ConfigError string
}

func getMock(t *testing.T, d *harness.Daemon) mockListing {
	t.Helper()
	st, _, b := d.Do("GET", "/v1/agents/mock?config=true&no_cache=true", nil)
	var m mockListing
	if err := json.Unmarshal(b, &m); st != 200 || err != nil {
		t.Fatalf("GET /v1/agents/mock: %d %s", st, b)
	}
	return m
}

// TestMockInstall: the mock is built in: listed as installed with no
// install path, and installing it (from the API, as the inspector's button
// did) is a no-op that writes nothing, so it keeps working after the binary
// that served the install is gone. Reproduces issue 13: install mock from
// one binary path, delete that binary, start the daemon from another path,
// and the README's first curl answers 200.
func TestMockInstall(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	first := copyBinary(t, t.TempDir())
	d := harness.Start(t, harness.Options{Home: home, Binary: first})
	if m := getMock(t, d); !m.Installed || m.Version != "builtin" || m.Path != nil || m.ConfigError != "" {
		t.Fatalf("mock listed as %+v, want installed builtin without path", m)
	}
	for _, body := range []string{`{}`, `{"reinstall":true}`} {
		st, _, b := d.Do("POST", "/v1/agents/mock/install", []byte(body), "Content-Type", "application/json")
		if st != 200 || strings.TrimSpace(string(b)) != `{"already_installed":true,"artifacts":[]}` {
			t.Fatalf("install mock %s: %d %s", body, st, b)
		}
	}
	launcher := filepath.Join(home, ".local/share/sandbox-agent/bin/agent_processes/mock-acp")
	if _, err := os.Stat(launcher); !os.IsNotExist(err) {
		t.Fatalf("installing the mock left %s (%v)", launcher, err)
	}
	d.Stop()
	if err := os.Remove(first); err != nil {
		t.Fatal(err)
	}

	second := harness.Start(t, harness.Options{Home: home, Binary: copyBinary(t, t.TempDir())})
	if st, b := second.Post("/v1/acp/demo?agent=mock", readmeFirstCurl); st != 200 {
		t.Fatalf("README's first curl after the first binary is gone: %d %s", st, b)
	}
	if src := second.Server("demo"); src.State != "running" {
		t.Fatalf("%+v", src)
	}
}

// TestMockStaleLauncher: a mock launcher as earlier versions wrote it,
// pointing at a binary that is gone, is reported (listing and log) and not
// run; the built-in mock answers instead. A launcher the user wrote (the
// SDK's tests replace the mock so) is still used.
func TestMockStaleLauncher(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	dir := filepath.Join(home, ".local/share/sandbox-agent/bin/agent_processes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(t.TempDir(), "go-build123", "exe", "sandbox-agent")
	stale := "#!/bin/sh\n# ACP launcher for mock (builtin builtin), written by sandbox-agent.\nexec '" + gone + "' 'mock-agent-process' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "mock-acp"), []byte(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	d := harness.Start(t, harness.Options{Home: home})
	if st, b := d.Post("/v1/acp/demo?agent=mock", readmeFirstCurl); st != 200 {
		t.Fatalf("README's first curl with a stale mock launcher: %d %s", st, b)
	}
	m := getMock(t, d)
	if !m.Installed || !strings.Contains(m.ConfigError, gone+", which no longer exists") {
		t.Fatalf("mock listed as %+v, want installed with the stale launcher reported", m)
	}
	if !strings.Contains(d.Logs(), "launcher not used") || !strings.Contains(d.Logs(), gone) {
		t.Fatalf("no warning about the stale launcher in the log")
	}

	// A launcher of the user's own is used.
	script := "#!/bin/sh\nexec " + harness.Binary + " mock-agent-process \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "mock-acp"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if st, b := d.Post("/v1/acp/own?agent=mock", readmeFirstCurl); st != 200 {
		t.Fatalf("user launcher: %d %s", st, b)
	}
	if m := getMock(t, d); !m.Installed || m.ConfigError != "" || m.Path == nil || *m.Path != filepath.Join(dir, "mock-acp") {
		t.Fatalf("mock with a user launcher listed as %+v", m)
	}
}
