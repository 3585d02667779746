package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// TestUI drives the inspector at /ui/ in headless Chromium against the
// built daemon and its mock agent (e2e/js/ui.mjs); screenshots go to
// e2e/artifacts/ui-*.png.
func TestUI(t *testing.T) {
	t.Parallel()
	browser := requireChromium(t)
	artifacts := artifactsDir(t)
	run := func(t *testing.T, scenario string, args ...string) {
		d := harness.Start(t, harness.Options{Args: args})
		env := []string{"BASE_URL=" + d.URL, "SCENARIO=" + scenario, "CHROMIUM=" + browser, "ARTIFACTS=" + artifacts, "WORK=" + t.TempDir()}
		for i, a := range args {
			if a == "--token" && i+1 < len(args) {
				env = append(env, "TOKEN="+args[i+1])
			}
		}
		runNode(t, "ui.mjs", 120*time.Second, env...)
	}
	// Sessions run against a daemon with a token: the page itself loads
	// without one, and every request, the SSE stream included, carries it.
	t.Run("sessions", func(t *testing.T) { run(t, "sessions", "--token", "ui-s3cret") })
	// The agents scenario passes the token in the URL, as the TypeScript
	// SDK's buildInspectorUrl does (/ui/?token=...).
	t.Run("agents", func(t *testing.T) { run(t, "agents", "--token", "ui-t0ken") })
	t.Run("files", func(t *testing.T) { run(t, "files") })
	t.Run("config", func(t *testing.T) { run(t, "config") })
	// Processes run with a token: the terminal WebSocket carries it as the
	// access_token query parameter, as browsers cannot set headers on one.
	t.Run("processes", func(t *testing.T) { run(t, "processes", "--token", "ui-pr0c") })
	// A hostile agent (e2e/testagent -acp, prompted "emit FILE"), hostile
	// file names and contents, hostile process output and error details:
	// all shown as text, nothing run, no CSP violation, the page still
	// works. Without a token, the worst case: a browser can fetch the fs
	// API's files by URL.
	t.Run("hostile", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "agents.json")
		doc := `{"agents":[{"id":"test","command":"` + harness.TestAgent + `","args":["-acp"]}]}`
		if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, "hostile", "--agents-file", f)
	})
}

// TestDocsOffline opens /docs with every non-loopback request blocked and
// finds the ACP operations on the page (e2e/js/docs.mjs): the docs are
// served by the daemon itself, under its Content-Security-Policy, and the
// inspector links to them. Screenshot: e2e/artifacts/docs.png.
func TestDocsOffline(t *testing.T) {
	t.Parallel()
	browser := requireChromium(t)
	artifacts := artifactsDir(t)
	d := harness.Start(t, harness.Options{})
	runNode(t, "docs.mjs", 120*time.Second, "BASE_URL="+d.URL, "CHROMIUM="+browser, "ARTIFACTS="+artifacts)
}

// artifactsDir is e2e/artifacts, where browser tests leave screenshots.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("artifacts")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
