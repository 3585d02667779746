package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi"
	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
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
}

func (l *limitFlags) register(fs *pflag.FlagSet) {
	d, h := acp.DefaultOptions(), httpapi.DefaultConfig()
	fs.IntVar(&l.maxInstances, "max-instances", d.MaxInstances, "most live agents at once; one more POST to a new server id gets 429 too_many_instances")
	fs.DurationVar(&l.exitedTTL, "exited-ttl", d.ExitedTTL, "how long an exited instance stays listed with its stderr tail and replay (at most "+strconv.Itoa(d.MaxExited)+" of them)")
	fs.Int64Var(&l.inflightBytes, "inflight-bytes", h.InflightBytes, "budget in bytes for all ACP POST bodies held until answered; past it 503 overloaded")
	fs.Int64Var(&l.replayTotal, "replay-total", d.ReplayTotal, "budget in bytes for all replay buffers together; past it the largest lose their oldest events")
	fs.DurationVar(&l.readIdleTimeout, "read-idle-timeout", h.ReadIdleTimeout, "cut a request body that delivers nothing for this long (408)")
	fs.IntVar(&l.maxConns, "max-conns", 4096, "most client connections open at once; more are answered 503 and closed")
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
	}
	return nil
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

func (l *limitFlags) listener(ln net.Listener) net.Listener {
	return httpapi.LimitListener(ln, l.maxConns)
}

// setMemoryLimit gives the Go runtime the daemon's stated memory bound as
// its soft limit (unless GOMEMLIMIT is set): idle heap, per-instance and
// per-connection overhead, plus the two budgets that hold client and agent
// bytes. Live
// data stays under it by construction; the limit keeps the collector from
// letting garbage double the heap on top of it (GOGC=100 alone would).
func (l *limitFlags) setMemoryLimit(log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := 64<<20 + l.inflightBytes + l.replayTotal + int64(l.maxInstances)<<20 + int64(l.maxConns)*16<<10
	debug.SetMemoryLimit(limit)
	log.Debug("memory limit", "bytes", limit)
}
