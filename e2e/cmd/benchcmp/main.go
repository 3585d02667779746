// Command benchcmp runs the same workloads, in one run, against this
// daemon, the reference server (Sandbox Agent 0.4.2, npm
// @sandbox-agent/cli-linux-x64), a minimal HTTP-to-stdio proxy process
// (e2e/testagent -proxy) and the agent spoken to over direct stdio, and
// prints Markdown tables with the paired ratios. Both daemons run the same
// agent: this repository's mock (`sandbox-agent mock-agent-process`),
// installed as the launcher file both of them honour.
//
//	go run ./e2e/cmd/benchcmp            (or: just bench)
//
// The comparisons run in interleaved rounds (-rounds, 5 by default): each
// round starts both daemons afresh and runs every workload on each leg in
// turn (ours, reference, then the baselines), so that a change in the
// machine's load falls on both legs of a pair; the closing figures are the
// ratios within each round. A round's workloads: one instance streams
// updates to a connected reader, in bursts the legs take in turn
// (throughput, events lost, then
// the daemon's settled RSS with that instance's replay full); request round
// trips (p50, p99); first requests of new instances, spawn included.
//
// Once, after the rounds (-extras): idle RSS and RSS per live instance;
// 200 instances started concurrently; a 1 GiB file PUT and GET against a
// plain file copy.
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
	rounds      int
	roundTrips  int
	warmup      int
	block       int
	stream      int
	bursts      int
	firsts      int
	extras      bool
	perInstance int
	concurrent  int
	fileBytes   int64
	out         string
}

func main() {
	var c config
	flag.DurationVar(&c.timeout, "timeout", 30*time.Minute, "bound on the whole run")
	flag.StringVar(&c.cache, "cache", defaultCache(), "where the reference server is installed with npm")
	flag.StringVar(&c.ref, "ref", "", "reference server binary (default: e2e/node_modules, else installed into -cache)")
	flag.IntVar(&c.rounds, "rounds", 5, "interleaved rounds (each starts both daemons afresh)")
	flag.IntVar(&c.roundTrips, "round-trips", 2000, "timed requests per leg and round for the round-trip figures")
	flag.IntVar(&c.warmup, "warmup", 200, "untimed requests per leg and round before the timed ones")
	flag.IntVar(&c.block, "block", 50, "the round trips' legs take turns in blocks of this many requests")
	flag.IntVar(&c.stream, "stream", 150000, "updates in each round's streaming run (the RSS row is taken after it)")
	flag.IntVar(&c.bursts, "stream-bursts", 5, "the streaming run's legs take turns in this many bursts")
	flag.IntVar(&c.firsts, "first-requests", 10, "fresh instances per leg and round for the first-request latency")
	flag.BoolVar(&c.extras, "extras", true, "after the rounds, run the once-only rows (RSS per instance, concurrent instances, 1 GiB file)")
	flag.IntVar(&c.perInstance, "rss-instances", 50, "live instances for the RSS-per-instance figure")
	flag.IntVar(&c.concurrent, "concurrent", 200, "instances started at once")
	flag.Int64Var(&c.fileBytes, "file-bytes", 1<<30, "size of the file PUT and GET")
	flag.StringVar(&c.out, "out", "", "also write the tables to this file")
	flag.Parse()
	if c.rounds < 1 || c.roundTrips < 100 || c.block < 1 || c.stream < 1 || c.bursts < 1 || c.firsts < 1 {
		fmt.Fprintln(os.Stderr, "benchcmp: -rounds, -stream, -stream-bursts and -first-requests must be at least 1, -round-trips at least 100")
		os.Exit(2)
	}

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

// env is what every round uses: the binaries and the baselines that live
// for the whole run.
type env struct {
	work, bin, ref string
	direct         *stdio // the mock over its pipes, initialised, with a session
	directSession  string
	proxyURL       string // e2e/testagent -proxy in front of another mock
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

	e := &env{work: work, bin: filepath.Join(work, "bin", "sandbox-agent")}
	testagent := filepath.Join(work, "bin", "testagent")
	logf("building sandbox-agent and e2e/testagent")
	for _, b := range [][2]string{{e.bin, "./cmd/sandbox-agent"}, {testagent, "./e2e/testagent"}} {
		// Built as deployed (README, Running in a sandbox): static, without
		// cgo, so a spawn does not pay for the dynamic loader (about 1 ms
		// of every mock start on a 2-core machine).
		build := exec.CommandContext(ctx, "go", "build", "-o", b[0], b[1])
		build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if err := build.Run(); err != nil {
			return fmt.Errorf("build %s: %w", b[1], err)
		}
	}
	if e.ref = c.ref; e.ref == "" {
		if e.ref, err = referenceBinary(ctx, root, c.cache); err != nil {
			return err
		}
	}
	version, _ := exec.CommandContext(ctx, e.ref, "--version").Output()
	refVersion := strings.TrimSpace(string(version))
	logf("reference: %s (%s)", e.ref, refVersion)

	if e.direct, e.directSession, err = startDirect(e.bin); err != nil {
		return fmt.Errorf("direct stdio: %w", err)
	}
	defer e.direct.close()
	if e.proxyURL, err = startProxy(ctx, testagent, e.bin); err != nil {
		return fmt.Errorf("minimal proxy: %w", err)
	}

	var rounds []*round
	for i := range c.rounds {
		logf("round %d of %d (load %s)", i+1, c.rounds, loadavg())
		r, err := runRound(ctx, c, e, i)
		if err != nil {
			return fmt.Errorf("round %d: %w", i+1, err)
		}
		rounds = append(rounds, r)
	}
	out := renderRounds(c, rounds, refVersion)
	if c.extras {
		src := filepath.Join(work, "src.bin")
		if err := writePattern(src, c.fileBytes); err != nil {
			return err
		}
		results := map[string]*figures{}
		for _, kind := range []string{"ours", "reference"} {
			t, err := startTarget(ctx, kind, work, e.bin, e.ref)
			if err != nil {
				return fmt.Errorf("start %s: %w", kind, err)
			}
			f, err := benchExtras(ctx, c, t, src, work)
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
		out += "\n" + renderExtras(c, results, copyRate, refVersion)
	}
	fmt.Print(out)
	if c.out != "" {
		return os.WriteFile(c.out, []byte(out), 0o644)
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
