package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// latency is one leg's p50 and p99.
type latency struct{ p50, p99 time.Duration }

func latencyOf(durs []time.Duration) latency {
	return latency{percentile(durs, 0.50), percentile(durs, 0.99)}
}

// streamFigures is one leg's streaming run.
type streamFigures struct {
	rate float64 // updates per second received
	lost int     // updates never received
	gaps int     // replay-gap frames seen
}

// round holds one round's figures, every leg measured in the same window,
// keyed by leg: "ours", "reference", "proxy" (round trips only) and
// "direct" (the mock over its pipes; no RSS).
type round struct {
	load   string
	rtt    map[string]latency
	stream map[string]streamFigures
	rss    map[string]int64 // KiB, settled, after the streaming run
	spawn  map[string]latency
	// spawnMin is spawn with the minimal agent (ours and the reference).
	spawnMin map[string]latency
}

// loadavg is the machine's 1, 5 and 15 minute load averages.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// runRound starts both daemons afresh and runs each workload on every leg
// in turn: ours, the reference, then the baselines.
func runRound(ctx context.Context, c config, e *env) (*round, error) {
	r := &round{load: loadavg(), rtt: map[string]latency{}, stream: map[string]streamFigures{},
		rss: map[string]int64{}, spawn: map[string]latency{}, spawnMin: map[string]latency{}}
	var daemons []*target
	defer func() {
		for _, t := range daemons {
			t.stop()
		}
	}()
	for _, kind := range []string{"ours", "reference"} {
		t, err := startTarget(ctx, kind, e.work, e.bin, e.ref)
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", kind, err)
		}
		daemons = append(daemons, t)
	}
	seq := 0

	// Streaming first, on fresh daemons: the RSS row is the daemon with one
	// instance whose replay has just taken the whole run.
	for _, t := range daemons {
		logf("%s: streaming %d updates", t.kind, c.stream)
		s, err := burstOverHTTP(ctx, t, "stream", c.stream)
		if err != nil {
			return nil, fmt.Errorf("%s stream: %w", t.kind, err)
		}
		r.stream[t.kind] = s
		r.rss[t.kind] = settledRSS(t.pid())
		del(t, "stream")
	}
	s, err := directStream(e.direct, e.directSession, c.stream, &seq)
	if err != nil {
		return nil, fmt.Errorf("direct stream: %w", err)
	}
	r.stream["direct"] = s

	// Round trips.
	for _, t := range daemons {
		logf("%s: %d round trips", t.kind, c.roundTrips)
		if _, err := mustPost(ctx, t, "rtt", "?agent=mock", initMsg); err != nil {
			return nil, err
		}
		l, err := httpRoundTrips(ctx, t.url+"/v1/acp/rtt", c.warmup, c.roundTrips, &seq)
		if err != nil {
			return nil, fmt.Errorf("%s round trips: %w", t.kind, err)
		}
		r.rtt[t.kind] = l
		del(t, "rtt")
	}
	if r.rtt["proxy"], err = httpRoundTrips(ctx, e.proxyURL, c.warmup, c.roundTrips, &seq); err != nil {
		return nil, fmt.Errorf("proxy round trips: %w", err)
	}
	if r.rtt["direct"], err = directRoundTrips(e.direct, c.warmup, c.roundTrips, &seq); err != nil {
		return nil, fmt.Errorf("direct round trips: %w", err)
	}

	// First request of a new instance, spawn included: the mock, then the
	// minimal agent. The legs take turns instance by instance, so a burst
	// of other work on the machine falls on both.
	for _, agent := range []string{"mock", minimalAgent} {
		logf("%d first requests (%s) on each daemon, in turn", c.firsts, agent)
		durs := map[string][]time.Duration{}
		for i := range c.firsts {
			for _, t := range daemons {
				id := "first-" + agent + "-" + strconv.Itoa(i)
				start := time.Now()
				if _, err := mustPost(ctx, t, id, "?agent="+agent, initMsg); err != nil {
					return nil, err
				}
				durs[t.kind] = append(durs[t.kind], time.Since(start))
				del(t, id)
			}
		}
		for _, t := range daemons {
			if agent == "mock" {
				r.spawn[t.kind] = latencyOf(durs[t.kind])
			} else {
				r.spawnMin[t.kind] = latencyOf(durs[t.kind])
			}
		}
	}
	if r.spawn["direct"], err = directFirsts(ctx, e.bin, c.firsts); err != nil {
		return nil, fmt.Errorf("direct first requests: %w", err)
	}
	return r, ctx.Err()
}

// httpRoundTrips POSTs warmup untimed then n timed echo requests to url,
// one at a time over a kept-alive connection.
func httpRoundTrips(ctx context.Context, url string, warmup, n int, seq *int) (latency, error) {
	var durs []time.Duration
	for i := range warmup + n {
		*seq++
		msg := `{"jsonrpc":"2.0","id":` + strconv.Itoa(*seq) + `,"method":"bench/ping","params":{}}`
		start := time.Now()
		st, b, err := postURL(ctx, url, msg)
		if err != nil {
			return latency{}, err
		}
		if st != 200 {
			return latency{}, fmt.Errorf("POST %s: %d %s", url, st, b)
		}
		if i >= warmup {
			durs = append(durs, time.Since(start))
		}
	}
	return latencyOf(durs), nil
}

// startProxy runs e2e/testagent -proxy in front of another mock, on the
// daemon's number of Ps (half the CPUs), and returns its URL. The process
// ends with the run (parent-death signal; the run also kills what is left
// under its directory).
func startProxy(ctx context.Context, testagent, bin string) (string, error) {
	procs := strconv.Itoa(max(1, runtime.NumCPU()/2))
	cmd := exec.CommandContext(ctx, testagent, "-proxy", "127.0.0.1:0", procs, bin, "mock-agent-process")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	go func() { _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("no address: %w", err)
	}
	return "http://" + strings.TrimSpace(strings.TrimPrefix(line, "listening ")) + "/", nil
}
