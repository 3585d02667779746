package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// The official TypeScript SDK (sandbox-agent@0.4.2) used as teams use it,
// past what its own test suite covers, on this daemon and, where the
// reference 0.4.2 gets it right too, on the reference beside it: the
// reference runs this daemon's mock agent (its launcher replaced, as the
// SDK's own tests replace it), so the two differ only in the server.

// referenceWithMock runs the reference server with this daemon's mock
// agent as its "mock", and returns its URL and home.
func referenceWithMock(t *testing.T, env ...string) (url, home string) {
	t.Helper()
	home = t.TempDir()
	launchers := filepath.Join(home, ".local", "share", "sandbox-agent", "bin", "agent_processes")
	if err := os.MkdirAll(launchers, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nexec '" + harness.Binary + "' mock-agent-process \"$@\"\n"
	if err := os.WriteFile(filepath.Join(launchers, "mock-acp"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return referenceDaemonIn(t, home, env...), home
}

// Scenarios of e2e/js/sdk-sessions.mjs the reference passes too.
var sessionScenariosBoth = []string{"many", "shared", "cancel", "permission-late", "permission-never", "resume"}

// TestCompatSDKSessions: twelve SDK clients at once on one daemon, each
// its own server id, prompts interleaved (streams, late permissions,
// thoughts), every update delivered to its own client in order; ten
// sessions of one client on its one connection, prompting at once; ten
// clients whose event streams are cut mid-turn again and again, resumed
// with Last-Event-ID without a loss or a duplicate; a stream failing with
// a network error mid-turn, whose turn completes, whole, once the client
// posts again; cancel during a
// prompt and a prompt replacing a running one; a permission answered late
// or never; a client restarting and resuming its session; an agent
// exiting mid-turn (the prompt fails at once with -32603); the instance
// deleted while a prompt runs (the prompt settles, the DELETE returns).
// The reference passes the first six; it loses events on reconnect, its
// prompts wait its request timeout when the agent exits, and its DELETE
// leaves the turn running, so those run here only.
func TestCompatSDKSessions(t *testing.T) {
	t.Parallel()
	t.Run("ours", func(t *testing.T) {
		t.Parallel()
		d := harness.Start(t, harness.Options{})
		sessionScenarios(t, d.URL, append(append([]string{}, sessionScenariosBoth...), "reconnect", "stream-error", "agent-exit", "delete"))
		if n := len(d.Servers()); n != 0 {
			t.Errorf("%d instances left after every client disposed", n)
		}
	})
	t.Run("reference", func(t *testing.T) {
		t.Parallel()
		url, _ := referenceWithMock(t)
		sessionScenarios(t, url, sessionScenariosBoth)
	})
}

// sessionScenarios runs each scenario of e2e/js/sdk-sessions.mjs in a node
// process of its own, all at once against the daemon at url, and returns
// when all are done.
func sessionScenarios(t *testing.T, url string, scenarios []string) {
	t.Helper()
	t.Run("scenarios", func(t *testing.T) {
		for _, sc := range scenarios {
			t.Run(sc, func(t *testing.T) {
				t.Parallel()
				runNode(t, "sdk-sessions.mjs", 60*time.Second, "BASE_URL="+url, "SCENARIOS="+sc)
			})
		}
	})
}

// TestCompatSDKPermissionPastRequestTimeout: a permission answered after
// the request timeout has passed still ends the turn, since a prompt is
// answered on the stream and no timeout cuts it (the reference answers
// the prompt's POST 504 at its timeout, and the SDK's connection dies).
func TestCompatSDKPermissionPastRequestTimeout(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Env: []string{"SANDBOX_AGENT_ACP_REQUEST_TIMEOUT_MS=300"}})
	runNode(t, "sdk-sessions.mjs", 60*time.Second, "BASE_URL="+d.URL, "SCENARIOS=permission-late", "PERMISSION_DELAY_MS=1200")
}

// TestCompatSDKFilesEdge: the filesystem through the SDK at its edges:
// every byte value, empty files, a Blob body, odd and unicode names
// (spaces, newlines, #, ?, %, CR), mkdir -p, moves and deletes, a tar as
// `tar -C dir .` writes it (long names, links, an executable), 3000
// entries in one directory; on this daemon also 128 MiB both ways, hard
// links in a tar, and the refusals where the reference fails or harms
// (an empty path, a move onto itself, a link out of the target).
func TestCompatSDKFilesEdge(t *testing.T) {
	t.Parallel()
	t.Run("ours", func(t *testing.T) {
		t.Parallel()
		d := harness.Start(t, harness.Options{})
		runNode(t, "sdk-fs-edge.mjs", 120*time.Second, "BASE_URL="+d.URL, "HOME_DIR="+d.Home, "TARGET=ours")
	})
	t.Run("reference", func(t *testing.T) {
		t.Parallel()
		url, home := referenceWithMock(t)
		runNode(t, "sdk-fs-edge.mjs", 120*time.Second, "BASE_URL="+url, "HOME_DIR="+home, "TARGET=reference")
	})
}

// TestCompatSDKProcessesEdge: processes through the SDK where this daemon
// once differed from the reference: exitCode null for a run a signal
// ended, logs?tail=0, a terminal sized 0×0, unknown processes' problem
// details; and a process killed while a terminal is attached, a terminal
// opened after the exit; on this daemon also a followed log ending when
// its process is killed, and follow with tail=0.
func TestCompatSDKProcessesEdge(t *testing.T) {
	t.Parallel()
	ws := "NODE_OPTIONS=--experimental-websocket" // Node 20 has WebSocket only behind a flag
	t.Run("ours", func(t *testing.T) {
		t.Parallel()
		d := harness.Start(t, harness.Options{})
		runNode(t, "sdk-processes-edge.mjs", 60*time.Second, "BASE_URL="+d.URL, "TARGET=ours", ws)
	})
	t.Run("reference", func(t *testing.T) {
		t.Parallel()
		url, _ := referenceWithMock(t)
		runNode(t, "sdk-processes-edge.mjs", 60*time.Second, "BASE_URL="+url, "TARGET=reference", ws)
	})
}

// TestCompatSDKErrors: the SandboxAgentError the SDK raises for the
// server's errors has the reference's status, and its problem (and so
// its message, the problem's title) where the reference sends one: an
// unknown route, an unknown agent, parameters that do not parse (400),
// bodies of the wrong shape (422), values refused (400), missing config
// entries (404).
func TestCompatSDKErrors(t *testing.T) {
	t.Parallel()
	t.Run("ours", func(t *testing.T) {
		t.Parallel()
		d := harness.Start(t, harness.Options{})
		runNode(t, "sdk-errors.mjs", 60*time.Second, "BASE_URL="+d.URL, "HOME_DIR="+d.Home, "TARGET=ours")
	})
	t.Run("reference", func(t *testing.T) {
		t.Parallel()
		url, home := referenceWithMock(t)
		runNode(t, "sdk-errors.mjs", 60*time.Second, "BASE_URL="+url, "HOME_DIR="+home, "TARGET=reference")
	})
}
