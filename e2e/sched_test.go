package e2e

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// The daemon runs its scheduler on half the CPUs (at least one), leaving the
// rest to its agents, unless GOMAXPROCS says otherwise.
func TestSchedulerSize(t *testing.T) {
	t.Parallel()
	// The line is logged just after the listener opens, so it may trail
	// the first health check by a moment.
	listening := func(d *harness.Daemon) string {
		var found string
		if !harness.WaitUntil(5*time.Second, func() bool {
			for _, line := range strings.Split(d.Logs(), "\n") {
				if strings.Contains(line, "sandbox-agent listening") {
					found = line
					return true
				}
			}
			return false
		}) {
			t.Fatalf("no listening line in:\n%s", d.Logs())
		}
		return found
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		want := "gomaxprocs=" + strconv.Itoa(max(1, runtime.GOMAXPROCS(0)/2))
		if line := listening(harness.Start(t, harness.Options{})); !strings.Contains(line, want) {
			t.Errorf("want %s in %q", want, line)
		}
	}
	if line := listening(harness.Start(t, harness.Options{Env: []string{"GOMAXPROCS=3"}})); !strings.Contains(line, "gomaxprocs=3") {
		t.Errorf("GOMAXPROCS=3 not honoured: %q", line)
	}
}
