package main

import (
	"log/slog"
	"net"
	"os"
	"runtime/debug"
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
	d := acp.DefaultOptions()
	fs.IntVar(&l.maxInstances, "max-instances", d.MaxInstances, "most live agents at once; one more POST to a new server id gets 429 too_many_instances")
	fs.DurationVar(&l.exitedTTL, "exited-ttl", d.ExitedTTL, "how long an exited instance stays listed with its stderr tail and replay (at most 100 of them)")
	fs.Int64Var(&l.inflightBytes, "inflight-bytes", 256<<20, "budget in bytes for all ACP POST bodies held until answered; past it 503 overloaded")
	fs.Int64Var(&l.replayTotal, "replay-total", d.ReplayTotal, "budget in bytes for all replay buffers together; past it the largest lose their oldest events")
	fs.DurationVar(&l.readIdleTimeout, "read-idle-timeout", 60*time.Second, "cut a request body that delivers nothing for this long (408)")
	fs.IntVar(&l.maxConns, "max-conns", 4096, "most client connections open at once; more are answered 503 and closed")
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
// its soft limit (unless GOMEMLIMIT is set): idle heap and per-instance
// overhead, plus the two budgets that hold client and agent bytes. Live
// data stays under it by construction; the limit keeps the collector from
// letting garbage double the heap on top of it (GOGC=100 alone would).
func (l *limitFlags) setMemoryLimit(log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := 64<<20 + l.inflightBytes + l.replayTotal + int64(l.maxInstances)<<20
	debug.SetMemoryLimit(limit)
	log.Debug("memory limit", "bytes", limit)
}
