package main

import (
	"math"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi"
	"github.com/sandbox-agent-go/sandbox-agent/app/processes"
)

// bigBox is a machine large enough that every budget keeps its default.
var bigBox = box{bytes: 24 << 30, source: "test"}

func parseLimits(t *testing.T, args ...string) (*limitFlags, error) {
	return parseLimitsIn(t, bigBox, args...)
}

func parseLimitsIn(t *testing.T, b box, args ...string) (*limitFlags, error) {
	t.Helper()
	var l limitFlags
	fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
	fs.Int64("max-acp-body", 32<<20, "")
	l.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &l, l.resolve(b)
}

// The memory bound docs/limits.md states at the defaults is the one the
// daemon gives the runtime, and the process budgets reach the service.
func TestLimitFlags(t *testing.T) {
	l, err := parseLimits(t)
	if err != nil {
		t.Fatal(err)
	}
	if got := memoryBound(l.inflightBytes, l.replayTotal, l.processLogTotal, l.maxInstances, l.maxConns); got != 1252<<20 {
		t.Errorf("memory bound at the defaults %d MiB, docs/limits.md says 1252", got>>20)
	}
	var opts processes.Options
	l.applyProcesses(&opts)
	if opts.LogTotal != processes.DefaultLogTotal || opts.Ceiling.MaxLogBytesPerProcess != processes.DefaultCeiling().MaxLogBytesPerProcess ||
		opts.Ceiling.MaxRunTimeoutMs != processes.DefaultCeiling().MaxRunTimeoutMs {
		t.Errorf("defaults: %+v", opts)
	}
	l, err = parseLimits(t, "--process-log-total", "1048576", "--process-max-log-bytes", "4096", "--process-max-run-timeout", "2s")
	if err != nil {
		t.Fatal(err)
	}
	l.applyProcesses(&opts)
	if opts.LogTotal != 1<<20 || opts.Ceiling.MaxLogBytesPerProcess != 4096 || opts.Ceiling.MaxRunTimeoutMs != 2000 {
		t.Errorf("set: %+v", opts)
	}
	// A ceiling below a default lowers the default.
	if c := processes.New(nil, opts).Config(); c.MaxLogBytesPerProcess != 4096 || c.MaxRunTimeoutMs != 2000 {
		t.Errorf("initial config under lowered ceilings: %+v", c)
	}
	for _, bad := range [][]string{
		{"--process-log-total", "0"}, {"--process-max-concurrent", "0"}, {"--process-max-input-bytes", "-1"}, {"--process-max-run-timeout", "0s"},
		{"--replay-total", "0"}, {"--inflight-bytes", "-5"},
	} {
		if _, err := parseLimits(t, bad...); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// The budgets a box gives: a 512 MiB sandbox gets a quarter of it for the
// daemon, 32 MiB of which it keeps for itself, the rest split 2:1:1; the
// soft limit is the share. A large machine keeps the defaults (and the
// memory bound as its soft limit); a tiny one the floors. Flags win.
func TestBudgetsFromTheBox(t *testing.T) {
	for _, c := range []struct {
		box                                    int64
		replay, inflight, processLogs, goLimit int64
		body                                   int64
	}{
		{box: 512 << 20, replay: 48 << 20, inflight: 24 << 20, processLogs: 24 << 20, goLimit: 128 << 20, body: 24 << 20},
		{box: 2 << 30, replay: 240 << 20, inflight: 120 << 20, processLogs: 120 << 20, goLimit: 512 << 20, body: 32 << 20},
		{box: 24 << 30, replay: 512 << 20, inflight: 256 << 20, processLogs: 256 << 20, goLimit: 1252 << 20, body: 32 << 20},
		{box: 64 << 20, replay: 12 << 20, inflight: 6 << 20, processLogs: 6 << 20, goLimit: 56 << 20, body: 6 << 20},
	} {
		l, err := parseLimitsIn(t, box{bytes: c.box, source: "test"})
		if err != nil {
			t.Fatal(err)
		}
		got := []int64{l.replayTotal, l.inflightBytes, l.processLogTotal,
			softLimit(l.derived.share, l.inflightBytes, l.replayTotal, l.processLogTotal, 0, l.maxInstances, l.maxConns), l.maxACPBody(32 << 20)}
		want := []int64{c.replay, c.inflight, c.processLogs, c.goLimit, c.body}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("box of %d MiB: replay, inflight, process logs, Go limit, ACP body = %v MiB, want %v MiB", c.box>>20, mibList(got), mibList(want))
				break
			}
		}
	}
	l, err := parseLimitsIn(t, box{bytes: 512 << 20}, "--replay-total", "1073741824", "--max-acp-body", "33554432")
	if err != nil {
		t.Fatal(err)
	}
	if l.replayTotal != 1<<30 || l.inflightBytes != 24<<20 || l.maxACPBody(32<<20) != 32<<20 {
		t.Errorf("flags given in a small box: replay %d, inflight %d, body %d", l.replayTotal, l.inflightBytes, l.maxACPBody(32<<20))
	}
	if got := softLimit(l.derived.share, l.inflightBytes, l.replayTotal, l.processLogTotal, 0, l.maxInstances, l.maxConns); got != ownReserve+(1<<30)+48<<20 {
		t.Errorf("the soft limit under a replay total given as a flag: %d MiB", got>>20)
	}
}

func mibList(v []int64) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = x >> 20
	}
	return out
}

// TestOpenCodeSharesInflight: the HTTP API and the OpenCode API hold
// their bodies against one --inflight-bytes budget, and the OpenCode event
// buffer is counted only when /opencode is mounted.
func TestOpenCodeSharesInflight(t *testing.T) {
	for _, inflight := range []int64{1, 24 << 20, 256 << 20, 1 << 30} {
		l := limitFlags{inflightBytes: inflight}
		var cfg httpapi.Config
		l.applyHTTP(&cfg)
		if cfg.Inflight == nil || cfg.Inflight != l.inflight() || cfg.Inflight.Max() != inflight || cfg.InflightBytes != inflight {
			t.Errorf("inflight %d: the HTTP API's budget is not the shared one of that size", inflight)
		}
		if l.openCodeEvents() != 0 {
			t.Errorf("inflight %d: events counted without /opencode", inflight)
		}
		l.withOpenCode = true
		if ev := l.openCodeEvents(); ev < 1 || ev > 16<<20 || (inflight >= 16 && ev > inflight/16) {
			t.Errorf("inflight %d: OpenCode events %d", inflight, ev)
		}
	}
}

// Budgets given as the largest number ("no limit") give no soft limit;
// their sum used to wrap: --inflight-bytes and --replay-total at
// 9223372036854775807 set a soft limit of 500 MiB, under which the
// collector would thrash as soon as the budgets held more.
func TestSoftLimitSaturates(t *testing.T) {
	const huge = math.MaxInt64
	share := int64(6 << 30)
	for _, c := range []struct {
		name                   string
		inflight, replay, logs int64
		instances, conns       int
	}{
		{"inflight and replay", huge, huge, 256 << 20, 100, 4096},
		{"all three", huge, huge, huge, 100, 4096},
		{"one", huge, 512 << 20, 256 << 20, 100, 4096},
		{"instances", 256 << 20, 512 << 20, 256 << 20, math.MaxInt, 4096},
		{"conns", 256 << 20, 512 << 20, 256 << 20, 100, math.MaxInt},
	} {
		got := softLimit(share, c.inflight, c.replay, c.logs, 16<<20, c.instances, c.conns)
		if c.name == "instances" || c.name == "conns" {
			// The bound saturates; the share caps it.
			if got != share {
				t.Errorf("%s: soft limit %d, want the share %d", c.name, got, share)
			}
			continue
		}
		if got != huge {
			t.Errorf("%s: soft limit %d, want %d (none)", c.name, got, int64(huge))
		}
	}
	if got := satAdd(huge, huge, 1); got != huge {
		t.Errorf("satAdd wrapped: %d", got)
	}
	if got := satAdd(1, 2, 3); got != 6 {
		t.Errorf("satAdd(1,2,3) = %d", got)
	}
}

// --max-conns, when not given, leaves half the open-file limit to the
// rest of the daemon; given, it is kept as it is.
func TestMaxConnsFromOpenFileLimit(t *testing.T) {
	for _, c := range []struct {
		nofile uint64
		want   int
	}{{0, 4096}, {1 << 20, 4096}, {8192, 4096}, {8190, 4095}, {1024, 512}, {64, 32}, {1, 1}} {
		if got := connsFor(c.nofile); got != c.want {
			t.Errorf("connsFor(%d) = %d, want %d", c.nofile, got, c.want)
		}
	}
	small := bigBox
	small.nofile = 64
	l, err := parseLimitsIn(t, small)
	if err != nil || l.maxConns != 32 {
		t.Fatalf("derived --max-conns %d, %v; want 32", l.maxConns, err)
	}
	l, err = parseLimitsIn(t, small, "--max-conns", "100")
	if err != nil || l.maxConns != 100 {
		t.Fatalf("given --max-conns %d, %v; want 100", l.maxConns, err)
	}
}
