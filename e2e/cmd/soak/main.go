// Command soak runs the daemon under a mixed load for minutes and reports
// its resident memory, goroutines and open descriptors over time, so a
// leak shows as a trend rather than a number. It is not part of the test
// command.
//
//	go run ./e2e/cmd/soak -duration 5m      (or: just soak 5m)
//
// The load, all at once: instances spawned, used and deleted in a loop;
// long-lived mock sessions streaming prompts to subscribers that reconnect
// with Last-Event-ID; streams opened and dropped mid-burst; readers that
// never read (cut by the stream write timeout); agents that exit mid-turn,
// stop reading stdin, or answer after the request timed out; file PUT and
// GET. At the end every instance is deleted, the figures must return to
// their baseline, and the daemon must stop on SIGTERM within its grace
// period leaving no process behind. The exit status says whether it did.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/proc"
)

func main() {
	duration := flag.Duration("duration", 5*time.Minute, "how long the load runs")
	every := flag.Duration("sample", 15*time.Second, "time between samples")
	workers := flag.Int("workers", 2, "goroutines per kind of load")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *duration, *every, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, duration, every time.Duration, workers int) error {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		return errors.New("run soak from inside the sandbox-agent module")
	}
	work, err := os.MkdirTemp("", "soak-")
	if err != nil {
		return err
	}
	defer func() { proc.KillUnder(work); os.RemoveAll(work) }()
	if err := harness.Build(ctx, work); err != nil {
		return err
	}
	agents := filepath.Join(work, "agents.json")
	if err := os.WriteFile(agents, []byte(`{"agents":[{"id":"test","command":"`+harness.TestAgent+`"}]}`), 0o644); err != nil {
		return err
	}
	d, err := start(work, agents)
	if err != nil {
		return err
	}
	defer func() { _ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL) }()

	l := &load{d: d, home: work, errs: map[string]int{}}
	time.Sleep(time.Second)
	first := l.sample()
	fmt.Printf("%-8s %10s %10s %6s %10s %8s %10s %8s\n", "elapsed", "rss", "heap", "gorout", "open fds", "instances", "spawns", "errors")
	printSample := func(s sample, at time.Duration) {
		fmt.Printf("%-8s %8.1fMiB %8.1fMiB %6.0f %10.0f %8.0f %10.0f %8d\n", at.Truncate(time.Second), s.rss/1048576, s.heap/1048576, s.goroutines, s.fds, s.instances, s.spawns, l.errCount())
	}
	printSample(first, 0)

	lctx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	var wg sync.WaitGroup
	for w := range workers {
		for _, f := range []func(context.Context, int){l.churn, l.sessions, l.streamChurn, l.faults, l.files, l.slowReader} {
			wg.Add(1)
			go func() { defer wg.Done(); f(lctx, w) }()
		}
	}
	startAt := time.Now()
	var maxRSS, maxG float64
	tick := time.NewTicker(every)
	for done := false; !done; {
		select {
		case <-lctx.Done():
			done = true
		case <-tick.C:
			s := l.sample()
			maxRSS, maxG = max(maxRSS, s.rss), max(maxG, s.goroutines)
			printSample(s, time.Since(startAt))
		}
	}
	tick.Stop()
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}

	// Clean up and let the daemon settle: everything must come back.
	for _, s := range l.servers() {
		l.del(s)
	}
	http.DefaultClient.CloseIdleConnections()
	time.Sleep(2 * time.Second)
	last := l.sample()
	printSample(last, time.Since(startAt))
	fmt.Printf("\nload ran %v: %.0f spawns, %d operations, %d unexpected results\n", duration, last.spawns, l.ops.Load(), l.errCount())
	for k, n := range l.errors() {
		fmt.Printf("  %s: %d\n", k, n)
	}
	fmt.Printf("RSS: %.1f MiB at start, %.1f MiB peak under load, %.1f MiB after cleanup\n", first.rss/1048576, maxRSS/1048576, last.rss/1048576)
	fmt.Printf("goroutines: %.0f at start, %.0f peak, %.0f after cleanup; open fds %.0f → %.0f\n", first.goroutines, maxG, last.goroutines, first.fds, last.fds)

	if last.fds > first.fds+2 {
		fmt.Println("open descriptors after cleanup:", describeFDs(d.cmd.Process.Pid))
	}
	startStop := time.Now()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		return errors.New("daemon did not exit within 10 s of SIGTERM")
	}
	fmt.Printf("SIGTERM to exit: %v\n", time.Since(startStop).Round(time.Millisecond))
	left := proc.ExeUnder(work)
	var problems []string
	if len(left) > 0 {
		problems = append(problems, fmt.Sprintf("processes left: %v", left))
	}
	if last.goroutines > first.goroutines+5 {
		problems = append(problems, fmt.Sprintf("goroutines grew %.0f → %.0f", first.goroutines, last.goroutines))
	}
	if last.fds > first.fds+2 {
		problems = append(problems, fmt.Sprintf("open fds grew %.0f → %.0f", first.fds, last.fds))
	}
	if l.errCount() > 0 {
		problems = append(problems, fmt.Sprintf("%d unexpected results", l.errCount()))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	fmt.Println("OK: no leak, no unexpected result, no process left")
	return nil
}
