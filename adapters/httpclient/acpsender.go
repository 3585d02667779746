package httpclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// expectContinueFrom is the size from which a message's POST asks the
// daemon before sending the body (Expect: 100-continue): a refusal (413,
// 401, 503) then comes before any of the body was sent. Smaller messages
// fit the sockets' buffers, so the answer to them is read whole in any
// case, and are not worth the extra round trip.
const expectContinueFrom = 1 << 20

// sender POSTs an ACPConn's outgoing messages (POST /v1/acp/{id}), in
// order, through the Client's net/http client. Write's goroutine calls send
// for each line; a request's POST then runs on a goroutine of its own
// (tracked by wg), since the agent answers it when it is done and the
// client must meanwhile be able to answer the agent. It owns the instance's
// bootstrap (?agent= until a POST succeeded; the stream started on the
// first success), the retries of POSTs nothing of which was sent, and what
// becomes of an answer: held 200 bodies and refused requests go to the
// pending table, a lost instance or an unreachable daemon end the
// connection.
type sender struct {
	c         *Client
	serverID  string
	reconnect time.Duration // ACPOptions.ReconnectTimeout
	log       *slog.Logger
	ctx       context.Context // the connection's
	pending   *pendingTable
	recv      *receiver
	fail      func(error) // ends the connection

	wg   sync.WaitGroup // request POSTs in flight, and their idle goroutines
	jobs chan func()    // unbuffered: taken by a request POST's goroutine waiting for its next

	mu       sync.Mutex
	agent    string        // ?agent= for POSTs until one succeeded
	inflight int           // request POSTs in flight
	idle     chan struct{} // cap 1: a request POST finished
}

func newSender(a *ACPConn, agent string) *sender {
	return &sender{
		c: a.c, serverID: a.serverID, reconnect: a.opts.ReconnectTimeout, log: a.log,
		ctx: a.ctx, pending: a.pending, recv: a.recv, fail: a.fail,
		agent: agent, idle: make(chan struct{}, 1), jobs: make(chan func()),
	}
}

// postIdle is how long a request POST's goroutine waits for the next
// request before it returns.
const postIdle = 10 * time.Second

// goPost runs job (a request's POST) on a goroutine of its own: one that
// finished an earlier POST and waits for the next, else a new one. A
// fresh goroutine grows its stack again, copying it at each step, through
// net/http's calls: that was 5% of the bridge's CPU (runtime.morestack),
// which grpc-go's server avoids the same way.
func (s *sender) goPost(job func()) {
	select {
	case s.jobs <- job:
		return
	default:
	}
	s.wg.Go(func() {
		t := time.NewTimer(postIdle)
		defer t.Stop()
		for {
			job()
			t.Reset(postIdle)
			select {
			case job = <-s.jobs:
			case <-t.C:
				return
			case <-s.ctx.Done():
				return
			}
		}
	})
}

// send POSTs one line (see ACPConn for the order kept): a notification or
// a response is sent before send returns; a request is handed to a
// goroutine, and send returns once its body was written (or, while the
// instance is being created, once it was answered). It returns false when
// the connection ended.
func (s *sender) send(line []byte) bool {
	f, err := domain.ParseFrame(line)
	if err != nil {
		s.log.Warn("acp write: line is not a JSON object; dropped", "err", err, "line", truncate(line, 200))
		return true
	}
	if f.Kind != domain.FrameRequest {
		s.deliver(line, f, nil)
		return s.ctx.Err() == nil
	}
	s.pending.add(f)
	s.mu.Lock()
	s.inflight++
	// Until the instance exists, the first request (initialize) is
	// answered before anything else is sent: concurrent first POSTs
	// would race to the agent's stdin while the agent starts.
	bootstrapping := s.agent != "" && !s.recv.isStarted()
	s.mu.Unlock()
	written, finished := make(chan struct{}), make(chan struct{})
	s.goPost(func() {
		defer close(finished)
		s.deliver(line, f, written)
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
		signal(s.idle)
	})
	wait := written
	if bootstrapping {
		wait = finished
	}
	select {
	case <-wait:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// waitIdle waits until no request POST is in flight, or until done.
func (s *sender) waitIdle(done <-chan struct{}) bool {
	for {
		s.mu.Lock()
		n := s.inflight
		s.mu.Unlock()
		if n == 0 {
			return true
		}
		select {
		case <-s.idle:
		case <-done:
			return false
		}
	}
}

// deliver POSTs one line, again while nothing of it was sent and the
// daemon is unreachable, and settles the outcome. written, when non-nil,
// is closed once the request was written, or the POST is over.
func (s *sender) deliver(line []byte, f domain.Frame, written chan struct{}) {
	var once sync.Once
	wrote := func() {
		if written != nil {
			once.Do(func() { close(written) })
		}
	}
	defer wrote()
	var firstFailure time.Time
	backoff := 20 * time.Millisecond
	for attempt := 1; ; attempt++ {
		s.mu.Lock()
		agent := s.agent
		s.mu.Unlock()
		r := s.post(line, agent, wrote)
		if firstFailure.IsZero() && r.err != nil {
			firstFailure = time.Now()
		}
		var p *Problem
		wait := backoff
		switch {
		case s.ctx.Err() != nil:
			return
		case r.err == nil:
			s.answered(f, r)
			return
		case errors.As(r.err, &p) && p.Status == http.StatusServiceUnavailable && time.Since(firstFailure)+max(p.RetryAfter, time.Second) <= s.reconnect:
			// Overloaded (or a proxy's sandbox not ready): the daemon
			// took nothing, and says when to come back. A notification
			// or a response has no other way to reach the agent (an
			// answer to a permission request lost would hang the turn).
			wait = max(p.RetryAfter, time.Second)
			s.log.Warn("acp post: the daemon is overloaded, nothing taken; sending again", "method", f.Method, "id", string(f.ID), "after", wait, "err", p)
		case errors.As(r.err, &p):
			s.refused(f, p)
			return
		case r.fate == cutShort:
			s.notDelivered(f, r.err)
			return
		case r.fate == maybeTaken:
			s.unknown(f, r.err)
			return
		case time.Since(firstFailure) > s.reconnect:
			s.fail(fmt.Errorf("%w for %v (POST to %q: %v)", ErrDaemonUnreachable, s.reconnect, s.serverID, r.err))
			return
		default:
			s.log.Warn("acp post: daemon not reachable, nothing sent; retrying", "err", r.err, "attempt", attempt)
			backoff = min(backoff*2, time.Second)
		}
		select {
		case <-time.After(wait):
		case <-s.ctx.Done():
			return
		}
	}
}

// postResult is the outcome of one POST.
type postResult struct {
	status  int
	body    []byte // a 200 body to hold; nil when empty, 202, or longer than an agent line may be
	eventID uint64 // the response's event id on the stream (domain.EventIDHeader); 0 if not given
	// err is a *Problem for a non-2xx answer, else what kept the POST
	// from being answered; nil for a 2xx answer, even one whose body
	// could not be read whole (the stream delivers the response).
	err  error
	fate fate // when err is not a *Problem: how much of the request was sent
}

// fate is how much of a POST that got no answer was sent.
type fate int

const (
	// notSent: no connection was made for it. Sending it again is safe.
	notSent fate = iota
	// cutShort: the connection failed while the request was being
	// written. The daemon acts on a message only once it read all of it,
	// so it did not take it (often it refused it early, and the answer
	// was lost with the connection).
	cutShort
	// maybeTaken: the request was written whole and the connection
	// failed before the answer. Whether the daemon took it is unknown.
	maybeTaken
)

// post makes one POST of line through net/http, which never sends it
// twice: it retries a POST only when not a byte of it was written, on a
// kept-alive connection found closed (rewinding the body with GetBody,
// which NewRequest sets for a *bytes.Reader). No Idempotency-Key header is
// set: it would let net/http resend a POST whose bytes were written. wrote
// is called once the request was written, or failed.
func (s *sender) post(line []byte, agent string, wrote func()) postResult {
	var q url.Values
	if agent != "" {
		q = url.Values{"agent": {agent}}
	}
	h := http.Header{"Accept": {"application/json"}}
	if len(line) >= expectContinueFrom {
		h.Set("Expect", "100-continue")
	}
	var getConn, gotConn, writeFailed atomic.Bool
	ctx := httptrace.WithClientTrace(s.ctx, &httptrace.ClientTrace{
		GetConn: func(string) { getConn.Store(true) },
		GotConn: func(httptrace.GotConnInfo) { gotConn.Store(true) },
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			if i.Err != nil {
				writeFailed.Store(true)
			}
			wrote()
		},
	})
	// The body is a *bytes.Reader, which net/http knows to be in memory
	// (and to rewind, for its own retry): it writes headers and body in
	// one segment when they fit its buffer.
	resp, err := s.c.rawLen(ctx, http.MethodPost, acpPath(s.serverID), q, bytes.NewReader(line), int64(len(line)), "application/json", h)
	if err != nil {
		var p *Problem
		switch {
		case errors.As(err, &p):
			return postResult{status: p.Status, err: err}
		case isDialError(err) || (getConn.Load() && !gotConn.Load()):
			// No connection: the dial failed, or (with a transport that
			// traces) none was obtained at all.
			return postResult{err: err, fate: notSent}
		case writeFailed.Load() || isWriteError(err):
			// net/http returns a failed request once its writer is done,
			// so the trace has seen how the write ended.
			return postResult{err: err, fate: cutShort}
		}
		return postResult{err: err, fate: maybeTaken}
	}
	defer resp.Body.Close()
	// An answer is one agent line; the stream bounds those too.
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, DefaultMaxSSEEvent+1))
	if rerr != nil || len(body) > DefaultMaxSSEEvent {
		body = nil // not held: the stream decides
	}
	eventID, _ := strconv.ParseUint(resp.Header.Get(domain.EventIDHeader), 10, 64)
	return postResult{status: resp.StatusCode, body: body, eventID: eventID}
}

// isWriteError reports a failure to write to the connection.
func isWriteError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "write"
}

// isDialError reports a failure to connect, before anything was sent.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// answered records a 2xx answer: the instance exists (the stream starts),
// and a request's 200 body is held until the stream delivers its copy.
func (s *sender) answered(f domain.Frame, r postResult) {
	s.log.Debug("acp post answered", "method", f.Method, "id", string(f.ID), "status", r.status)
	s.recv.start()
	s.mu.Lock()
	s.agent = "" // from now on a missing instance is an error, not a fresh start
	s.mu.Unlock()
	if f.Kind == domain.FrameRequest && r.status == http.StatusOK {
		s.pending.hold(f, bytes.TrimSpace(r.body), r.eventID)
	}
}

// refused handles a problem answer: the instance being gone ends the
// connection; a request the daemon stopped waiting for (504) is answered
// by the agent's late response on the stream; any other refused request
// gets a JSON-RPC error carrying the problem; the rest is logged.
func (s *sender) refused(f domain.Frame, p *Problem) {
	s.mu.Lock()
	bootstrapping := s.agent != ""
	s.mu.Unlock()
	if !bootstrapping && (p.Kind() == "session_not_found" || (p.Status == http.StatusBadRequest && bytes.Contains([]byte(p.Detail), []byte("missing required 'agent'")))) {
		s.fail(fmt.Errorf("%w: %q (deleted, or the daemon restarted): %w", ErrInstanceGone, s.serverID, p))
		return
	}
	if p.Kind() == "timeout" && f.Kind == domain.FrameRequest {
		// The daemon stopped waiting, the agent did not: its late
		// response goes to the stream, and from there to the reader, as
		// it would from a local agent.
		s.log.Info("acp request outlived the daemon's request timeout; its response will come on the stream", "method", f.Method, "id", string(f.ID))
		s.answered(f, postResult{status: http.StatusAccepted})
		return
	}
	s.log.Warn("acp post refused", "method", f.Method, "id", string(f.ID), "err", p)
	if f.Kind == domain.FrameRequest {
		s.pending.refuse(f, p.Error(), p.Raw)
	}
}

// notDelivered settles a POST cut short while it was being written: the
// daemon did not take it (see cutShort). It is not sent again (the daemon
// most likely refused it, and would again); a request is answered with an
// error at once.
func (s *sender) notDelivered(f domain.Frame, err error) {
	s.log.Warn("acp post: the connection failed before the message was sent whole; it did not reach the agent", "method", f.Method, "id", string(f.ID), "err", err)
	if f.Kind == domain.FrameRequest {
		s.pending.refuse(f, ErrNotDelivered.Error()+": "+err.Error(), nil)
	}
}

// unknown settles a POST that failed after it was sent whole, before the
// answer came: it is not sent again (see ACPConn on delivery). A request's
// response, if the daemon took it, comes on the stream; before the
// instance is known to exist there is no stream to wait on, and the
// request is answered with an error at once.
func (s *sender) unknown(f domain.Frame, err error) {
	if f.Kind == domain.FrameRequest && s.recv.isStarted() {
		s.log.Warn("acp post: the connection failed after the request was sent; not sent again, its response is awaited on the event stream", "method", f.Method, "id", string(f.ID), "err", err)
		return
	}
	s.log.Warn("acp post: the connection failed after the message was sent; it may or may not have reached the agent, and is not sent again", "method", f.Method, "id", string(f.ID), "err", err)
	if f.Kind == domain.FrameRequest {
		s.pending.refuse(f, ErrDeliveryUnknown.Error()+": "+err.Error(), nil)
	}
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
