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

// streamFigures is one leg's streaming run, over its bursts.
type streamFigures struct {
	rate float64 // updates per second received, over the bursts' time
	lost int     // updates never received
	gaps int     // replay-gap frames seen

	got  int
	busy time.Duration // from each burst's prompt to its last update
}

// add counts one burst: got of n updates, the last at last (zero if none).
func (f *streamFigures) add(got, n int, start, last time.Time) {
	f.lost += n - got
	f.got += got
	if !last.IsZero() {
		f.busy += last.Sub(start)
	}
	if f.busy > 0 {
		f.rate = float64(f.got) / f.busy.Seconds()
	}
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
// in turn. index is the round's, from 0: it turns the legs' order.
func runRound(ctx context.Context, c config, e *env, index int) (*round, error) {
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
	// instance whose replay has just taken the whole run. The updates
	// come in c.bursts prompts per leg, the legs taking turns burst by
	// burst and their order turning (rotate), so that a change of the
	// machine's state falls on every leg alike (one burst of 150 000 per
	// leg in a row let a round's ratio swing 0.84-1.04x with the load);
	// a leg's rate is its updates over its bursts' time.
	streams := map[string]*httpStream{}
	defer func() {
		for _, s := range streams {
			s.close()
		}
	}()
	for _, t := range daemons {
		s, err := openHTTPStream(ctx, t, "stream")
		if err != nil {
			return nil, fmt.Errorf("%s stream: %w", t.kind, err)
		}
		streams[t.kind] = s
	}
	figs := map[string]*streamFigures{"ours": {}, "reference": {}, "direct": {}}
	per := max(1, c.stream/c.bursts)
	logf("streaming %d updates per leg, in %d bursts", per*c.bursts, c.bursts)
	for b := range c.bursts {
		for _, leg := range rotate([]string{"ours", "reference", "direct"}, index+b) {
			var err error
			if leg == "direct" {
				err = directStream(e.direct, e.directSession, per, &seq, figs[leg])
			} else {
				err = streams[leg].burst(ctx, b+1, per, figs[leg])
			}
			if err != nil {
				return nil, fmt.Errorf("%s stream: %w", leg, err)
			}
		}
	}
	for leg, f := range figs {
		r.stream[leg] = *f
	}
	for _, t := range daemons {
		r.rss[t.kind] = settledRSS(t.pid())
		streams[t.kind].close()
		delete(streams, t.kind)
		del(t, "stream")
	}

	// Round trips, every leg in the same window: after each leg's untimed
	// warm-up, the legs take turns in blocks of c.block requests (their
	// order turning block by block), so that a change of the machine's
	// state (load, which CPU each process was placed on) falls on every
	// leg alike instead of on whichever ran during it.
	for _, t := range daemons {
		if _, err := mustPost(ctx, t, "rtt", "?agent=mock", initMsg); err != nil {
			return nil, err
		}
	}
	legs := map[string]func() error{
		"proxy":  func() error { return httpRoundTrip(ctx, e.proxyURL, &seq) },
		"direct": func() error { return directRoundTrip(e.direct, &seq) },
	}
	for _, t := range daemons {
		legs[t.kind] = func() error { return httpRoundTrip(ctx, t.url+"/v1/acp/rtt", &seq) }
	}
	order := []string{"ours", "reference", "proxy", "direct"}
	logf("%d round trips per leg (%s), in blocks of %d", c.roundTrips, strings.Join(order, ", "), c.block)
	durs, err := interleave(legs, order, c.warmup, c.roundTrips, c.block)
	if err != nil {
		return nil, err
	}
	for leg, d := range durs {
		r.rtt[leg] = latencyOf(d)
	}
	for _, t := range daemons {
		del(t, "rtt")
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

// interleave runs every leg's warm-up (warmup untimed requests each), then
// n timed requests per leg in blocks of block: each block runs the legs
// once in turn, starting one leg further on than the block before.
func interleave(legs map[string]func() error, order []string, warmup, n, block int) (map[string][]time.Duration, error) {
	for _, leg := range order {
		for range warmup {
			if err := legs[leg](); err != nil {
				return nil, fmt.Errorf("%s round trips: %w", leg, err)
			}
		}
	}
	durs := map[string][]time.Duration{}
	for b := 0; b*block < n; b++ {
		size := min(block, n-b*block)
		for _, leg := range rotate(order, b) {
			for range size {
				start := time.Now()
				if err := legs[leg](); err != nil {
					return nil, fmt.Errorf("%s round trips: %w", leg, err)
				}
				durs[leg] = append(durs[leg], time.Since(start))
			}
		}
	}
	return durs, nil
}

// rotate returns s turned left by k places (a new slice).
func rotate(s []string, k int) []string {
	k %= len(s)
	return append(append([]string(nil), s[k:]...), s[:k]...)
}

// httpRoundTrip POSTs one echo request to url over a kept-alive
// connection and checks its answer.
func httpRoundTrip(ctx context.Context, url string, seq *int) error {
	*seq++
	msg := `{"jsonrpc":"2.0","id":` + strconv.Itoa(*seq) + `,"method":"bench/ping","params":{}}`
	st, b, err := postURL(ctx, url, msg)
	if err != nil {
		return err
	}
	if st != 200 {
		return fmt.Errorf("POST %s: %d %s", url, st, b)
	}
	return nil
}

// startProxy runs e2e/testagent -proxy in front of another mock, on the
// daemon's number of Ps (half the CPUs) and with Go's sysmon kept awake
// as the daemon keeps its own (cmd/sandbox-agent's sysmon_linux.go; its
// agent gets GODEBUG as it was, as the daemon's do; on a machine up for
// more than 23.8 days the daemon keeps the runtime's default and the
// proxy does not, which can only make the floor look worse), and returns
// its URL. The process
// ends with the run (parent-death signal; the run also kills what is left
// under its directory).
func startProxy(ctx context.Context, testagent, bin string) (string, error) {
	procs := strconv.Itoa(max(1, runtime.NumCPU()/2))
	cmd := exec.CommandContext(ctx, testagent, "-proxy", "127.0.0.1:0", procs, bin, "mock-agent-process")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	godebug, set := os.LookupEnv("GODEBUG")
	was := ""
	if set {
		was = "=" + godebug
	}
	if !strings.Contains(","+godebug, ",schedtrace=") {
		godebug = strings.TrimPrefix(godebug+",schedtrace=2147483647", ",")
	}
	cmd.Env = append(os.Environ(), "GODEBUG="+godebug, "TESTAGENT_AGENT_GODEBUG="+was)
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
