package e2e

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// TestCompatSDKLocalLauncher: the official SDK spawns our binary with the
// exact flags its local launcher passes, runs a mock session through it,
// and stops it with SIGTERM; nothing of the daemon's agents is left.
func TestCompatSDKLocalLauncher(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	out := runNode(t, "sdk-local.mjs", 60*time.Second, "BINARY="+harness.Binary, "HOME="+home, "XDG_DATA_HOME="+home+"/.local/share",
		"SANDBOX_AGENT_ACP_REGISTRY_URL=http://127.0.0.1:9/registry.json")
	m := regexp.MustCompile(`agent pid (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no agent pid in output")
	}
	pid, _ := strconv.Atoi(m[1])
	waitGone(t, 5*time.Second, pid)
	if got := liveGroupMembers(pid); len(got) != 0 {
		t.Fatalf("agent group %d still has %v", pid, got)
	}
}
