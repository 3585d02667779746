package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Binary is the sandbox-agent every daemon runs by default and TestAgent
// e2e/testagent, a stdio peer with failure modes the mock lacks. Build sets
// both once per test binary (from TestMain), so no test pays for a build.
var Binary, TestAgent string

const module = "github.com/sandbox-agent-go/sandbox-agent"

// Build compiles sandbox-agent and e2e/testagent into dir and points Binary
// and TestAgent at them. It names the packages by import path, so it works
// from any directory of the module (the e2e tests, the soak run); the
// compiler's output goes to stderr.
func Build(ctx context.Context, dir string) error {
	build := exec.CommandContext(ctx, "go", "build", "-o", dir, module+"/cmd/sandbox-agent", module+"/e2e/testagent")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building sandbox-agent: %w", err)
	}
	Binary = filepath.Join(dir, "sandbox-agent")
	TestAgent = filepath.Join(dir, "testagent")
	return nil
}
