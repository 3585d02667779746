package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// TestMain builds sandbox-agent and e2e/testagent once for the whole
// package (harness.Binary, harness.TestAgent) and removes them afterwards.
func TestMain(m *testing.M) {
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
