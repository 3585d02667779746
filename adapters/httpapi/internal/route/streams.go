package route

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Streams are the open event streams and WebSockets, each with the request
// the chain authorised it as, so that a reload of the tokens or of the
// policies ends those the chain now refuses: a stream is decided once,
// when it opens, and a revoked token must not keep reading an agent's
// events, or typing into a terminal, for as long as the socket lives.
type Streams struct {
	mu   sync.Mutex
	open map[*openStream]struct{}
	// gen counts Rejudge calls; a stream decided before the latest one
	// and registered after its snapshot is judged again as it registers.
	gen atomic.Uint64
}

// openStream is one registered stream.
type openStream struct {
	env    *Env
	req    domain.AuthRequest
	log    *slog.Logger
	once   sync.Once
	revoke func()
}

// NewStreams returns an empty registry.
func NewStreams() *Streams { return &Streams{open: map[*openStream]struct{}{}} }

// ErrRevoked is why a stream ended at a reload.
var ErrRevoked = errors.New("no longer authorised")

// Revocable registers the stream of ctx's request (authorised by the
// middleware) until release is called, at the stream's end. When a reload
// makes the chain refuse the request, revoke is called, once, on the
// reloading goroutine: it must only start the stream's end (cancel its
// context, close its socket). A request the chain did not decide (no
// token, no policies: nothing can be revoked) registers nothing.
func Revocable(ctx context.Context, revoke func()) (release func()) {
	s := authOf(ctx).judged
	if s == nil || s.env == nil || s.env.Streams == nil {
		return func() {}
	}
	reg := s.env.Streams
	st := &openStream{env: s.env, req: s.req, log: Logger(ctx), revoke: revoke}
	reg.mu.Lock()
	reg.open[st] = struct{}{}
	reg.mu.Unlock()
	if reg.gen.Load() != s.gen {
		// Decided before a reload whose snapshot did not hold it yet.
		st.judge(ctx)
	}
	return func() {
		reg.mu.Lock()
		delete(reg.open, st)
		reg.mu.Unlock()
	}
}

// Rejudge asks the chain again about every open stream and ends those it
// now refuses (a token no longer configured, a policy that now denies);
// it returns how many ended. Call it after a reload has taken effect.
func (s *Streams) Rejudge(ctx context.Context) int {
	if s == nil {
		return 0
	}
	s.gen.Add(1)
	s.mu.Lock()
	open := make([]*openStream, 0, len(s.open))
	for st := range s.open {
		open = append(open, st)
	}
	s.mu.Unlock()
	ended := 0
	for _, st := range open {
		if st.judge(ctx) {
			ended++
		}
	}
	return ended
}

// Len is how many streams are registered.
func (s *Streams) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}

// judge runs the chain on the stream's request; a refusal revokes it.
func (st *openStream) judge(ctx context.Context) bool {
	_, err := st.env.Chain.Authorize(ctx, st.req)
	var refused *domain.Error
	if !errors.As(err, &refused) {
		return false // allowed, or the chain could not answer: left open
	}
	st.once.Do(func() {
		st.log.Info("stream ended: no longer authorised", "action", st.req.Action, "path", st.req.Path,
			"status", ProblemFor(ctx, refused).Status)
		st.revoke()
	})
	return true
}

// CloseRevoked closes a WebSocket whose credentials a reload revoked:
// 1008 (policy violation), saying why. It waits (at most 5 s) for the
// peer's close frame: revoke functions run it on a goroutine of its own.
func CloseRevoked(c *websocket.Conn) {
	_ = c.Close(websocket.StatusPolicyViolation, "no longer authorised: the credentials were revoked")
}
