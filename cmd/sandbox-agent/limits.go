package main

import (
	"fmt"
	"log/slog"
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

// limitFlags are the resource limits of `sandbox-agent server` (README,
// "Limits and hostile input").
type limitFlags struct {
	maxInstances    int
	exitedTTL       time.Duration
	inflightBytes   int64
	replayTotal     int64
	readIdleTimeout time.Duration
	maxConns        int
	processLogTotal int64
	procCeiling     processCeiling
}

// processCeiling is the most POST /v1/processes/config may set (the
// --process-max-* flags); the defaults are processes.DefaultCeiling.
type processCeiling struct {
	concurrent, logBytes, outputBytes, inputBytes int
	runTimeout                                    time.Duration
}

func (l *limitFlags) register(fs *pflag.FlagSet) {
	d, h := acp.DefaultOptions(), httpapi.DefaultConfig()
	fs.IntVar(&l.maxInstances, "max-instances", d.MaxInstances, "most live agents at once; one more POST to a new server id gets 429 too_many_instances")
	fs.DurationVar(&l.exitedTTL, "exited-ttl", d.ExitedTTL, "how long an exited instance stays listed with its stderr tail and replay (at most "+strconv.Itoa(d.MaxExited)+" of them)")
	fs.Int64Var(&l.inflightBytes, "inflight-bytes", h.InflightBytes, "budget in bytes for request bodies and WebSocket messages held until handled (ACP POSTs until answered); past it 503 overloaded, or a WebSocket closed with 1013")
	fs.Int64Var(&l.replayTotal, "replay-total", d.ReplayTotal, "budget in bytes for all replay buffers together; past it the largest lose their oldest events")
	fs.DurationVar(&l.readIdleTimeout, "read-idle-timeout", h.ReadIdleTimeout, "cut a request body that delivers nothing for this long (408)")
	fs.IntVar(&l.maxConns, "max-conns", 4096, "most client connections (and HTTP/2 streams) open at once; more are answered 503 and closed")
	fs.Int64Var(&l.processLogTotal, "process-log-total", processes.DefaultLogTotal, "budget in bytes for the output kept by all processes together (and runs' captured output); past it the largest logs lose their oldest entries")
	c := processes.DefaultCeiling()
	fs.IntVar(&l.procCeiling.concurrent, "process-max-concurrent", c.MaxConcurrentProcesses, "the most maxConcurrentProcesses POST /v1/processes/config may set (400 past it)")
	fs.IntVar(&l.procCeiling.logBytes, "process-max-log-bytes", c.MaxLogBytesPerProcess, "the most maxLogBytesPerProcess POST /v1/processes/config may set (400 past it)")
	fs.IntVar(&l.procCeiling.outputBytes, "process-max-output-bytes", c.MaxOutputBytes, "the most maxOutputBytes POST /v1/processes/config may set (400 past it)")
	fs.IntVar(&l.procCeiling.inputBytes, "process-max-input-bytes", c.MaxInputBytesPerRequest, "the most maxInputBytesPerRequest POST /v1/processes/config may set (400 past it)")
	fs.DurationVar(&l.procCeiling.runTimeout, "process-max-run-timeout", time.Duration(c.MaxRunTimeoutMs)*time.Millisecond, "the most maxRunTimeoutMs POST /v1/processes/config may set (400 past it)")
}

// validate refuses values that would silently mean something else (the
// app treats zero as "default").
func (l *limitFlags) validate() error {
	switch {
	case l.maxInstances < 1:
		return fmt.Errorf("--max-instances must be at least 1, got %d", l.maxInstances)
	case l.maxConns < 1:
		return fmt.Errorf("--max-conns must be at least 1, got %d", l.maxConns)
	case l.inflightBytes < 1:
		return fmt.Errorf("--inflight-bytes must be at least 1, got %d", l.inflightBytes)
	case l.replayTotal < 1:
		return fmt.Errorf("--replay-total must be at least 1, got %d", l.replayTotal)
	case l.exitedTTL <= 0:
		return fmt.Errorf("--exited-ttl must be positive, got %v", l.exitedTTL)
	case l.readIdleTimeout <= 0:
		return fmt.Errorf("--read-idle-timeout must be positive, got %v", l.readIdleTimeout)
	case l.processLogTotal < 1:
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
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && uint64(l.maxConns)+256 > rl.Cur {
		log.Warn("--max-conns is close to or above the open-file limit; raise `ulimit -n` or lower --max-conns", "max_conns", l.maxConns, "nofile", rl.Cur)
	}
}

func (l *limitFlags) apply(opts *acp.Options) {
	opts.MaxInstances = l.maxInstances
	opts.ExitedTTL = l.exitedTTL
	opts.ReplayTotal = l.replayTotal
}

func (l *limitFlags) applyHTTP(cfg *httpapi.Config) {
	cfg.InflightBytes = l.inflightBytes
	cfg.ReadIdleTimeout = l.readIdleTimeout
}

// connLimit is --max-conns, shared by the listener (connections) and the
// handler (HTTP/2 streams).
func (l *limitFlags) connLimit() *httpapi.ConnLimit {
	return httpapi.NewConnLimit(l.maxConns)
}

// setMemoryLimit gives the Go runtime the daemon's stated memory bound as
// its soft limit (unless GOMEMLIMIT is set): idle heap, per-instance and
// per-connection overhead, plus the three budgets that hold client, agent
// and process bytes. Live
// data stays under it by construction; the limit keeps the collector from
// letting garbage double the heap on top of it (GOGC=100 alone would).
func (l *limitFlags) setMemoryLimit(log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := memoryBound(l.inflightBytes, l.replayTotal, l.processLogTotal, l.maxInstances, l.maxConns)
	debug.SetMemoryLimit(limit)
	log.Debug("memory limit", "bytes", limit)
}

// memoryBound is the README's memory bound ("Memory bound"): 64 MiB of
// idle heap and slack, the budgets of request bodies and messages
// (--inflight-bytes), of replay (--replay-total) and of process output
// (--process-log-total), 1 MiB per instance and 16 KiB per connection.
func memoryBound(inflight, replay, processLogs int64, instances, conns int) int64 {
	return 64<<20 + inflight + replay + processLogs + int64(instances)<<20 + int64(conns)*16<<10
}
