package harness

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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
	if out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}").Output(); err == nil {
		moduleRoot = strings.TrimSpace(string(out))
	}
	return nil
}

// moduleRoot is the module's directory, found by Build.
var moduleRoot string

var watchOnce sync.Once

// watchSources lists every directory of the module once, from within a
// test. go test caches a package's result keyed on its test binary and on
// the files and directories the tests opened; the daemon these tests run
// is built from sources the test binary does not contain, so without this
// a change to the daemon alone left "go test ./..." answering "(cached)"
// for e2e. A directory the tests opened counts by the names, sizes and
// modification times of its entries, so any edit below the module's root
// runs them again. It must happen inside a test (Start), not in TestMain:
// go test records what a test opens only once the tests run.
func watchSources() {
	watchOnce.Do(func() {
		if moduleRoot == "" {
			return
		}
		_ = filepath.WalkDir(moduleRoot, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git") {
				return filepath.SkipDir
			}
			return nil
		})
	})
}
