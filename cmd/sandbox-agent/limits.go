package main

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi"
	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/app/processes"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// limitFlags are the resource limits of `sandbox-agent server` (docs/limits.md).
type limitFlags struct {
	fs              *pflag.FlagSet // what register defined them on: which were given
	derived         budgets        // what resolve took from the box
	maxInstances    int
	exitedTTL       time.Duration
	inflightBytes   int64
	replayTotal     int64
	readIdleTimeout time.Duration
	maxConns        int
	processLogTotal int64
	procCeiling     processCeiling
	withOpenCode    bool              // /opencode is mounted: its event buffer counts (openCodeEvents)
	budget          *httpapi.Inflight // made by inflight
}

// processCeiling is the most POST /v1/processes/config may set (the
// --process-max-* flags); the defaults are processes.DefaultCeiling.
type processCeiling struct {
	concurrent, logBytes, outputBytes, inputBytes int
	runTimeout                                    time.Duration
}

func (l *limitFlags) register(fs *pflag.FlagSet) {
	l.fs = fs
	d, h := acp.DefaultOptions(), httpapi.DefaultConfig()
	fs.IntVar(&l.maxInstances, "max-instances", d.MaxInstances, "most live agents at once; one more POST to a new server id gets 429 too_many_instances")
	fs.DurationVar(&l.exitedTTL, "exited-ttl", d.ExitedTTL, "how long an exited instance stays listed with its stderr tail and replay (at most "+strconv.Itoa(d.MaxExited)+" of them)")
	fs.Int64Var(&l.inflightBytes, "inflight-bytes", 0, "budget in bytes for request bodies and WebSocket messages held until handled (ACP POSTs until answered); past it 503 overloaded, or a WebSocket closed with 1013 (default: from the memory the daemon may use, at most "+mibs(h.InflightBytes)+"; see docs/limits.md)")
	fs.Int64Var(&l.replayTotal, "replay-total", 0, "budget in bytes for all replay buffers together; past it the largest lose their oldest events (default: from the memory the daemon may use, at most "+mibs(d.ReplayTotal)+")")
	fs.DurationVar(&l.readIdleTimeout, "read-idle-timeout", h.ReadIdleTimeout, "cut a request body that delivers nothing for this long (408)")
	fs.IntVar(&l.maxConns, "max-conns", defaultMaxConns, "most client connections (and HTTP/2 streams) open at once; more are answered 503 and closed (default: half the open-file limit when that is lower)")
	fs.Int64Var(&l.processLogTotal, "process-log-total", 0, "budget in bytes for the output kept by all processes together (and runs' captured output); past it the largest logs lose their oldest entries (default: from the memory the daemon may use, at most "+mibs(processes.DefaultLogTotal)+")")
	c := processes.DefaultCeiling()
	fs.IntVar(&l.procCeiling.concurrent, "process-max-concurrent", c.MaxConcurrentProcesses, "the most maxConcurrentProcesses POST /v1/processes/config may set (400 past it)")
	fs.IntVar(&l.procCeiling.logBytes, "process-max-log-bytes", c.MaxLogBytesPerProcess, "the most maxLogBytesPerProcess POST /v1/processes/config may set (400 past it)")
	fs.IntVar(&l.procCeiling.outputBytes, "process-max-output-bytes", c.MaxOutputBytes, "the most maxOutputBytes POST /v1/processes/config may set (400 past it)")
	fs.IntVar(&l.procCeiling.inputBytes, "process-max-input-bytes", c.MaxInputBytesPerRequest, "the most maxInputBytesPerRequest POST /v1/processes/config may set (400 past it)")
	fs.DurationVar(&l.procCeiling.runTimeout, "process-max-run-timeout", time.Duration(c.MaxRunTimeoutMs)*time.Millisecond, "the most maxRunTimeoutMs POST /v1/processes/config may set (400 past it)")
}

func mibs(n int64) string { return strconv.FormatInt(n>>20, 10) + " MiB" }

// resolve refuses values that would silently mean something else (the
// app treats zero as "default"), then takes the memory budgets not given
// as flags from the box (deriveBudgets).
func (l *limitFlags) resolve(b box) error {
	if err := l.validate(); err != nil {
		return err
	}
	l.derived = deriveBudgets(b)
	if !l.fs.Changed("replay-total") {
		l.replayTotal = l.derived.replayTotal
	}
	if !l.fs.Changed("inflight-bytes") {
		l.inflightBytes = l.derived.inflight
	}
	if !l.fs.Changed("process-log-total") {
		l.processLogTotal = l.derived.processLogTotal
	}
	if !l.fs.Changed("max-conns") {
		l.maxConns = connsFor(b.nofile)
	}
	return nil
}

// defaultMaxConns is --max-conns where descriptors are plenty.
const defaultMaxConns = 4096

// connsFor is --max-conns when not given: 4096, or half the open-file
// limit when that is lower, so that connections (an event stream, a
// WebSocket, an idle keep-alive) can never take every descriptor: the
// other half stays for agents and processes (three each), files being
// served, the replay files and the daemon's own. With a limit of 64 and
// 4096 connections allowed, 50 idle connections left no descriptor to
// start an agent, and the 51st connection waited in the kernel's queue
// unanswered; now the 33rd is answered 503.
func connsFor(nofile uint64) int {
	if nofile == 0 || nofile/2 >= defaultMaxConns {
		return defaultMaxConns
	}
	return max(int(nofile/2), 1)
}

// openFileLimit is the daemon's open-file limit (0 when unknown).
func openFileLimit() uint64 {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) != nil {
		return 0
	}
	return rl.Cur
}

// validate is resolve's check of the values given.
func (l *limitFlags) validate() error {
	given := func(name string) bool { return l.fs.Changed(name) }
	switch {
	case l.maxInstances < 1:
		return fmt.Errorf("--max-instances must be at least 1, got %d", l.maxInstances)
	case l.maxConns < 1:
		return fmt.Errorf("--max-conns must be at least 1, got %d", l.maxConns)
	case given("inflight-bytes") && l.inflightBytes < 1:
		return fmt.Errorf("--inflight-bytes must be at least 1, got %d", l.inflightBytes)
	case given("replay-total") && l.replayTotal < 1:
		return fmt.Errorf("--replay-total must be at least 1, got %d", l.replayTotal)
	case l.exitedTTL <= 0:
		return fmt.Errorf("--exited-ttl must be positive, got %v", l.exitedTTL)
	case l.readIdleTimeout <= 0:
		return fmt.Errorf("--read-idle-timeout must be positive, got %v", l.readIdleTimeout)
	case given("process-log-total") && l.processLogTotal < 1:
		return fmt.Errorf("--process-log-total must be at least 1, got %d", l.processLogTotal)
	}
	c := l.procCeiling
	for _, v := range []struct {
		name string
		val  int64
	}{
		{"--process-max-concurrent", int64(c.concurrent)}, {"--process-max-log-bytes", int64(c.logBytes)},
		{"--process-max-output-bytes", int64(c.outputBytes)}, {"--process-max-input-bytes", int64(c.inputBytes)},
		{"--process-max-run-timeout", c.runTimeout.Milliseconds()},
	} {
		if v.val < 1 {
			return fmt.Errorf("%s must be at least 1 (a millisecond for the timeout), got %d", v.name, v.val)
		}
	}
	return nil
}

// applyProcesses sets the processes' budget and ceiling.
func (l *limitFlags) applyProcesses(opts *processes.Options) {
	c := l.procCeiling
	opts.LogTotal = l.processLogTotal
	opts.Ceiling = domain.ProcessConfig{
		MaxConcurrentProcesses: c.concurrent, MaxLogBytesPerProcess: c.logBytes, MaxOutputBytes: c.outputBytes,
		MaxInputBytesPerRequest: c.inputBytes, MaxRunTimeoutMs: c.runTimeout.Milliseconds(), DefaultRunTimeoutMs: c.runTimeout.Milliseconds(),
	}
}

// warnFDs says so when --max-conns cannot be reached because the process
// may not open that many descriptors: past the limit, accept fails instead
// of answering 503.
func (l *limitFlags) warnFDs(log *slog.Logger) {
	nofile := openFileLimit()
	switch {
	case nofile == 0:
	case l.fs.Changed("max-conns") && uint64(l.maxConns)+256 > nofile:
		log.Warn("--max-conns is close to or above the open-file limit; raise `ulimit -n` or lower --max-conns", "max_conns", l.maxConns, "nofile", nofile)
	case l.maxConns < defaultMaxConns:
		log.Info("--max-conns is half the open-file limit", "max_conns", l.maxConns, "nofile", nofile)
	}
}

func (l *limitFlags) apply(opts *acp.Options) {
	opts.MaxInstances = l.maxInstances
	opts.ExitedTTL = l.exitedTTL
	opts.ReplayTotal = l.replayTotal
}

// applyHTTP gives the HTTP API the --inflight-bytes budget (the one the
// OpenCode API shares, inflight).
func (l *limitFlags) applyHTTP(cfg *httpapi.Config) {
	cfg.InflightBytes = l.inflightBytes
	cfg.Inflight = l.inflight()
	cfg.ReadIdleTimeout = l.readIdleTimeout
}

// inflight is the --inflight-bytes budget, made once: the HTTP API and the
// OpenCode API hold their request bodies against the same one, so the
// flag bounds them together.
func (l *limitFlags) inflight() *httpapi.Inflight {
	if l.budget == nil {
		l.budget = httpapi.NewInflight(l.inflightBytes)
	}
	return l.budget
}

// openCodeEvents is the OpenCode API's event buffer when /opencode is
// mounted (withOpenCode): a sixteenth of --inflight-bytes, at most 16 MiB,
// counted in the memory bound; else 0.
func (l *limitFlags) openCodeEvents() int64 {
	if !l.withOpenCode {
		return 0
	}
	return max(min(l.inflightBytes/16, 16<<20), 1)
}

// connLimit is --max-conns, shared by the listener (connections) and the
// handler (HTTP/2 streams).
func (l *limitFlags) connLimit() *httpapi.ConnLimit {
	return httpapi.NewConnLimit(l.maxConns)
}

// setMemoryLimit gives the Go runtime its soft memory limit (unless
// GOMEMLIMIT is set): the daemon's stated memory bound (idle heap,
// per-instance and per-connection overhead, plus the three budgets that
// hold client, agent and process bytes), or, in a box where that is more
// than the daemon's share, the share (but never less than its budgets and
// its own reserve). Live data stays under the bound by construction; the
// limit keeps the collector from letting garbage double the heap on top
// of it (GOGC=100 alone would). It logs what the daemon holds, and where
// each figure came from, and returns the limit in force.
func (l *limitFlags) setMemoryLimit(log *slog.Logger) int64 {
	limit := softLimit(l.derived.share, l.inflightBytes, l.replayTotal, l.processLogTotal, l.openCodeEvents(), l.maxInstances, l.maxConns)
	source := "derived"
	if os.Getenv("GOMEMLIMIT") != "" {
		source = "GOMEMLIMIT"
	} else {
		debug.SetMemoryLimit(limit)
	}
	limit = debug.SetMemoryLimit(-1)
	from := func(flag string) string {
		if l.fs.Changed(flag) {
			return "--" + flag
		}
		return "derived"
	}
	log.Info("memory budgets", "box_bytes", l.derived.box.bytes, "box", l.derived.box.source, "share_bytes", l.derived.share,
		"replay_total", l.replayTotal, "replay_total_from", from("replay-total"),
		"inflight_bytes", l.inflightBytes, "inflight_bytes_from", from("inflight-bytes"),
		"process_log_total", l.processLogTotal, "process_log_total_from", from("process-log-total"),
		"go_memory_limit", limit, "go_memory_limit_from", source)
	return limit
}

// gauges are the figures /metrics shows as sandbox_agent_memory_limit_bytes.
func (l *limitFlags) gauges(goLimit int64) []httpapi.MemoryLimit {
	return []httpapi.MemoryLimit{
		{Limit: "box", Bytes: l.derived.box.bytes},
		{Limit: "share", Bytes: l.derived.share},
		{Limit: "replay_total", Bytes: l.replayTotal},
		{Limit: "inflight_bytes", Bytes: l.inflightBytes},
		{Limit: "process_log_total", Bytes: l.processLogTotal},
		{Limit: "go_soft_limit", Bytes: goLimit},
	}
}

// maxACPBody is --max-acp-body unless given: at most --inflight-bytes, so
// that a body that could never be held is refused as too large (413)
// rather than answered "retry later" (503) for ever.
func (l *limitFlags) maxACPBody(body int64) int64 {
	if l.fs.Changed("max-acp-body") {
		return body
	}
	return min(body, l.inflightBytes)
}

// The daemon's share of its box, and what it keeps for itself beyond its
// budgets (docs/limits.md, "Memory bound").
const (
	// shareOfBox: the daemon takes a quarter of the memory it may use and
	// leaves the rest to the agents and processes it runs.
	shareOfBox = 4
	// ownReserve is the daemon's own memory beside its budgets: the
	// runtime and binary (about 15 MiB idle), tens of instances and
	// hundreds of connections.
	ownReserve = 32 << 20
	// minBudgets is what the three budgets get together however small
	// the box: below it the daemon could hardly take one large message.
	minBudgets = 24 << 20
)

// budgets are the memory budgets a box gives: a quarter of it for the
// daemon, less its own reserve, split half to replay (--replay-total) and
// a quarter each to bodies and messages held (--inflight-bytes) and to
// process output (--process-log-total), each at most its default, so that
// a large machine keeps the defaults (from a box of about 4.1 GiB up).
type budgets struct {
	box                                    box
	share                                  int64
	replayTotal, inflight, processLogTotal int64
}

func deriveBudgets(b box) budgets {
	share := b.bytes / shareOfBox
	total := max(share-ownReserve, minBudgets)
	return budgets{
		box:             b,
		share:           share,
		replayTotal:     min(total/2, acp.DefaultOptions().ReplayTotal),
		inflight:        min(total/4, httpapi.DefaultConfig().InflightBytes),
		processLogTotal: min(total/4, processes.DefaultLogTotal),
	}
}

// softLimit is the Go runtime's soft memory limit: the memory bound, but
// in a box smaller than that bound's fourfold, the share of the box,
// never below the budgets plus the daemon's reserve (so that a tiny box,
// or budgets given as flags, still leave the collector room). extra is
// held beyond the budgets (the OpenCode event buffer), counted in the
// bound; in a small box it comes out of the daemon's reserve.
func softLimit(share, inflight, replay, processLogs, extra int64, instances, conns int) int64 {
	return min(satAdd(memoryBound(inflight, replay, processLogs, instances, conns), extra), max(share, satAdd(ownReserve, inflight, replay, processLogs)))
}

// memoryBound is the memory bound of docs/limits.md ("Memory bound"): 64 MiB of
// idle heap and slack, the budgets of request bodies and messages
// (--inflight-bytes), of replay (--replay-total) and of process output
// (--process-log-total), 1 MiB per instance and 16 KiB per connection.
func memoryBound(inflight, replay, processLogs int64, instances, conns int) int64 {
	return satAdd(64<<20, inflight, replay, processLogs, satMul(int64(instances), 1<<20), satMul(int64(conns), 16<<10))
}

// satAdd adds non-negative terms, stopping at math.MaxInt64: budgets given
// as 9223372036854775807 ("no limit") must give no limit, not wrap to a
// small soft limit the collector would thrash under.
func satAdd(terms ...int64) int64 {
	var sum int64
	for _, t := range terms {
		if t > math.MaxInt64-sum {
			return math.MaxInt64
		}
		sum += t
	}
	return sum
}

// satMul is n × unit for non-negative n, stopping at math.MaxInt64.
func satMul(n, unit int64) int64 {
	if n > math.MaxInt64/unit {
		return math.MaxInt64
	}
	return n * unit
}
