package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// TestMain builds sandbox-agent and e2e/testagent once for the whole
// package (harness.Binary, harness.TestAgent) and removes them afterwards.
//
// Each test runs daemons of its own, so nearly all of them run in
// parallel (t.Parallel; the few that assert wall-clock bounds on a daemon
// run alone first). They wait on daemons, agents, node and browsers far
// more than they compute, so more of them run at once than -parallel's
// default of one per CPU: twice the CPUs, at least 4, unless -parallel is
// given.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(max(4, 2*runtime.GOMAXPROCS(0))))
	}
	dir, err := os.MkdirTemp("", "sandbox-agent-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := harness.Build(context.Background(), dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
