// Command benchcmp runs the same workloads, in one run, against this
// daemon, the reference server (Sandbox Agent 0.4.2, npm
// @sandbox-agent/cli-linux-x64) and the agent spoken to over direct stdio,
// and prints a Markdown table with ratios. Both daemons run the same agent:
// this repository's mock (`sandbox-agent mock-agent-process`), installed as
// the launcher file both of them honour.
//
//	go run ./e2e/cmd/benchcmp            (or: just bench-compare)
//
// Workloads: request round trip (p50, p99); a 100 000-update burst
// (throughput, events lost); first request of a new instance, spawn
// included; idle RSS and RSS per live instance; 200 instances started
// concurrently; a 1 GiB file PUT and GET against a plain file copy.
//
// The run is bounded (-timeout) and cleans up after itself: both daemons
// run in their own process groups with a parent-death signal; the
// reference, whose DELETE and SIGINT hang while an agent lives, is stopped
// with SIGKILL to its group; at the end every process still running a
// binary of the run's scratch directory is killed, and the directory is
// removed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/proc"
)

const refPackage = "@sandbox-agent/cli-linux-x64@0.4.2"

type config struct {
	timeout     time.Duration
	cache       string
	ref         string
	roundTrips  int
	burst       int
	burstRuns   int
	firsts      int
	perInstance int
	concurrent  int
	fileBytes   int64
	out         string
}

func main() {
	var c config
	flag.DurationVar(&c.timeout, "timeout", 20*time.Minute, "bound on the whole run")
	flag.StringVar(&c.cache, "cache", defaultCache(), "where the reference server is installed with npm")
	flag.StringVar(&c.ref, "ref", "", "reference server binary (default: e2e/node_modules, else installed into -cache)")
	flag.IntVar(&c.roundTrips, "round-trips", 2000, "requests for the round-trip figures")
	flag.IntVar(&c.burst, "burst", 100000, "updates in one streaming burst")
	flag.IntVar(&c.burstRuns, "burst-runs", 3, "bursts per target (median throughput, worst loss)")
	flag.IntVar(&c.firsts, "first-requests", 20, "fresh instances for the first-request latency")
	flag.IntVar(&c.perInstance, "rss-instances", 50, "live instances for the RSS-per-instance figure")
	flag.IntVar(&c.concurrent, "concurrent", 200, "instances started at once")
	flag.Int64Var(&c.fileBytes, "file-bytes", 1<<30, "size of the file PUT and GET")
	flag.StringVar(&c.out, "out", "", "also write the table to this file")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "benchcmp:", err)
		os.Exit(1)
	}
}

func defaultCache() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "sandbox-agent-benchcmp")
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func run(ctx context.Context, c config) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "benchcmp-")
	if err != nil {
		return err
	}
	defer func() {
		proc.KillUnder(work)
		os.RemoveAll(work)
	}()

	bin := filepath.Join(work, "bin", "sandbox-agent")
	logf("building sandbox-agent")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/sandbox-agent")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	ref := c.ref
	if ref == "" {
		if ref, err = referenceBinary(ctx, root, c.cache); err != nil {
			return err
		}
	}
	version, _ := exec.CommandContext(ctx, ref, "--version").Output()
	logf("reference: %s (%s)", ref, strings.TrimSpace(string(version)))

	src := filepath.Join(work, "src.bin")
	if err := writePattern(src, c.fileBytes); err != nil {
		return err
	}

	results := map[string]*figures{}
	direct, err := benchDirect(ctx, c, bin)
	if err != nil {
		return fmt.Errorf("direct stdio: %w", err)
	}
	results["direct"] = direct
	for _, kind := range []string{"ours", "reference"} {
		t, err := startTarget(ctx, kind, work, bin, ref)
		if err != nil {
			return fmt.Errorf("start %s: %w", kind, err)
		}
		f, err := benchDaemon(ctx, c, t, src, work)
		t.stop()
		if err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		results[kind] = f
	}
	copyRate, err := plainCopy(src, filepath.Join(work, "copy.bin"), false)
	if err != nil {
		return err
	}
	table := render(c, results, copyRate, strings.TrimSpace(string(version)))
	fmt.Print(table)
	if c.out != "" {
		return os.WriteFile(c.out, []byte(table), 0o644)
	}
	return nil
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("run benchcmp from inside the sandbox-agent module")
	}
	return filepath.Dir(mod), nil
}

// referenceBinary finds the reference server: the copy the e2e npm
// install may already hold, else one installed into cache with npm.
func referenceBinary(ctx context.Context, root, cache string) (string, error) {
	const rel = "node_modules/@sandbox-agent/cli-linux-x64/bin/sandbox-agent"
	for _, p := range []string{filepath.Join(root, "e2e", rel), filepath.Join(cache, rel)} {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	logf("installing %s into %s", refPackage, cache)
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	ictx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ictx, "npm", "install", "--no-save", "--no-audit", "--no-fund", "--prefix", cache, refPackage)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("npm install %s: %w", refPackage, err)
	}
	p := filepath.Join(cache, rel)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("npm install %s left no binary: %w", refPackage, err)
	}
	return p, nil
}
