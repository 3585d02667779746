package httpapi

import (
	"context"
	"sort"
	"sync"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi/internal/route"
)

// Reloads counts what the daemon reloads on SIGHUP (its token file, its
// auth policies) by outcome, for /metrics (sandbox_agent_reloads_total):
// a failed reload keeps what was in use and says so only in the log,
// which an operator may not watch. The composition root counts; safe for
// concurrent use.
type Reloads struct {
	mu sync.Mutex
	n  map[reloadKey]uint64
	// streams are the open streams of the handler New built with these
	// counters, judged again after each successful reload.
	streams *route.Streams
}

type reloadKey struct{ what, result string }

// NewReloads returns counters with a zero series for each of whats, ok and
// failed, so a scraper sees them before the first reload.
func NewReloads(whats ...string) *Reloads {
	r := &Reloads{n: map[reloadKey]uint64{}}
	for _, w := range whats {
		r.n[reloadKey{w, "ok"}] = 0
		r.n[reloadKey{w, "failed"}] = 0
	}
	return r
}

// Count records one reload of what: ok when err is nil, else failed.
// Call it once the reload has taken effect: after a successful one, every
// open event stream and WebSocket is judged again by the auth chain, and
// those it now refuses end (a token taken out of the file, a policy that
// now denies), as a new request would be refused.
func (r *Reloads) Count(what string, err error) {
	if r == nil {
		return
	}
	res := "ok"
	if err != nil {
		res = "failed"
	}
	r.mu.Lock()
	r.n[reloadKey{what, res}]++
	streams := r.streams
	r.mu.Unlock()
	if err == nil {
		streams.Rejudge(context.Background())
	}
}

// attach gives the counters the open streams of the handler New built;
// a recheck (Recheck) may run on another goroutine already.
func (r *Reloads) attach(s *route.Streams) {
	r.mu.Lock()
	r.streams = s
	r.mu.Unlock()
}

// Recheck asks the auth chain again about every open event stream and
// WebSocket without a reload, and ends those it now refuses: a policy
// whose decisions change with time alone (hmactoken's expiry) refuses a
// stream it allowed when it opened. It returns how many ended.
func (r *Reloads) Recheck(ctx context.Context) int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	streams := r.streams
	r.mu.Unlock()
	return streams.Rejudge(ctx)
}

func (r *Reloads) write(e expo) {
	if r == nil {
		return
	}
	r.mu.Lock()
	keys := make([]reloadKey, 0, len(r.n))
	for k := range r.n {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].what != keys[j].what {
			return keys[i].what < keys[j].what
		}
		return keys[i].result < keys[j].result
	})
	const name = "sandbox_agent_reloads_total"
	e.family(name, "counter", "Reloads on SIGHUP by what was reloaded (tokens, policies) and result (ok, failed: what was in use stays; the log says why).")
	for _, k := range keys {
		e.sample(name, u64(r.n[k]), "what", k.what, "result", k.result)
	}
	r.mu.Unlock()
}
