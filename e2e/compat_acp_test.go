package e2e

import (
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// TestCompatACPHTTPClient runs the official acp-http-client@0.4.2 against the
// daemon: initialize, new session, prompts with streamed updates, a
// permission request answered, cancel, an extension request, disconnect.
func TestCompatACPHTTPClient(t *testing.T) {
	t.Parallel()
	t.Run("no token", func(t *testing.T) {
		d := harness.Start(t, harness.Options{})
		runNode(t, "acp-http-client.mjs", 60*time.Second, "BASE_URL="+d.URL)
	})
	t.Run("token", func(t *testing.T) {
		d := harness.Start(t, harness.Options{Args: []string{"--token", "s3cret"}})
		runNode(t, "acp-http-client.mjs", 60*time.Second, "BASE_URL="+d.URL, "TOKEN=s3cret")
	})
}
