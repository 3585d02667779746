package e2e

import (
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// TestCompatSDKProcesses runs every process method of the official
// TypeScript SDK against the daemon: run, create, list, get, input, logs,
// follow (resumed after a reconnect), stop, kill, delete, config, and a
// shell on a terminal over the WebSocket (typing, resizing, exiting).
func TestCompatSDKProcesses(t *testing.T) {
	t.Parallel()
	// Node 20 has WebSocket only behind a flag; Node 22 accepts it too.
	ws := "NODE_OPTIONS=--experimental-websocket"
	t.Run("no token", func(t *testing.T) {
		d := harness.Start(t, harness.Options{})
		runNode(t, "sdk-processes.mjs", 120*time.Second, "BASE_URL="+d.URL, ws)
	})
	t.Run("token", func(t *testing.T) {
		d := harness.Start(t, harness.Options{Args: []string{"--token", "s3cret"}})
		runNode(t, "sdk-processes.mjs", 120*time.Second, "BASE_URL="+d.URL, "TOKEN=s3cret", ws)
	})
}
