package httpclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// ACPOptions tune DialACP. The zero value is ready to use.
type ACPOptions struct {
	// ReconnectTimeout is how long the connection keeps trying to reach the
	// daemon (event stream reconnects, POSTs that could not connect or
	// were refused with 503, a daemon that stopped answering) before it
	// gives up: pending requests get JSON-RPC errors and the connection
	// fails with ErrDaemonUnreachable. Default 30 s.
	ReconnectTimeout time.Duration
	// DeleteOnClose deletes the server instance when the connection is
	// closed (DELETE /v1/acp/{id}), stopping its agent.
	DeleteOnClose bool
	// Logger receives transport events: reconnects, replay gaps, dropped
	// lines, messages whose delivery is unknown. Nil discards them. The
	// connection never writes anything but agent messages to its reader.
	Logger *slog.Logger
	// MaxMessage bounds one outgoing line; a longer line fails Write.
	// Default domain.DefaultMaxACPMessage (32 MiB), the daemon's default
	// --max-acp-body: raise both together.
	MaxMessage int
}

// Errors that end an ACPConn. ACPConn.Err and Read return them (wrapped, with
// what happened) after every message received before the failure and a
// JSON-RPC error for each request still pending.
var (
	// ErrClosed: the connection was closed by Close.
	ErrClosed = errors.New("acp connection closed")
	// ErrInstanceGone: the server instance no longer exists on the daemon
	// (deleted by someone else, or the daemon restarted and lost it).
	ErrInstanceGone = errors.New("acp server instance is gone")
	// ErrDaemonUnreachable: the daemon could not be reached, or stopped
	// answering (it took connections and sent nothing, not even the
	// event stream's heartbeat, for 45 s), for longer than
	// ACPOptions.ReconnectTimeout. StreamACP and FollowProcessLogs end
	// with it too when their stream falls silent for 45 s.
	ErrDaemonUnreachable = errors.New("daemon unreachable")
	// ErrReplayGap is the message of the JSON-RPC errors given to requests
	// pending when the daemon reported lost events (_adapter/replay_gap).
	ErrReplayGap = errors.New("events were lost (replay gap); the response may have been among them")
	// ErrNotDelivered starts the message of the JSON-RPC error given to a
	// request whose POST failed while it was being written: the daemon did
	// not take it (often it refused it early, a message over its
	// --max-acp-body say, and the answer was lost with the connection).
	// It does not end the connection.
	ErrNotDelivered = errors.New("the connection to the daemon failed before the request was sent whole; it did not reach the agent")
	// ErrDeliveryUnknown starts the message of the JSON-RPC error given to
	// the request creating the instance when its POST failed after it may
	// have reached the daemon (see ACPConn on delivery). It does not end
	// the connection.
	ErrDeliveryUnknown = errors.New("the connection to the daemon failed after the request was sent; it may or may not have reached the agent, and was not sent again")
)

// AgentExitedError ends a connection whose agent process exited
// (_adapter/agent_exited on the stream).
type AgentExitedError struct {
	Success bool
	Code    *int // nil when the agent was killed by a signal
}

// Error says how the agent ended.
func (e *AgentExitedError) Error() string {
	if e.Code == nil {
		return "agent process exited (killed by a signal)"
	}
	return "agent process exited with code " + strconv.Itoa(*e.Code)
}

// ACPConn is one ACP connection to a server instance of the daemon, shaped
// like the pipes of a local agent process: Write takes client→agent
// JSON-RPC messages, one per line; Read yields agent→client messages, one
// per line, exactly as the agent wrote them and in the order it wrote them.
// Plug it into acp-go-sdk as acp.NewClientSideConnection(client, conn, conn).
//
// # Receiving
//
// Every agent message is read from the daemon's event stream (GET
// /v1/acp/{id}), which carries all of them, responses to synchronous POSTs
// included, numbered in the order the agent wrote them. The 200 body of a
// synchronous POST is the same response. It is delivered at once when the
// daemon named its event (Sandbox-Agent-Event-Id) and the stream has
// passed every event before that one, and the stream's copy is dropped;
// else it is held and dropped once the stream has delivered it. Either
// way a result never overtakes the updates written before it and nothing
// is delivered twice. The stream
// reconnects with Last-Event-ID after a cut. Only when the stream can no
// longer deliver a held response (a replay gap, the daemon gone) is the
// held copy delivered instead.
//
// # Sending
//
// Outgoing lines are sent in order, each as its own POST through the
// Client's net/http client, the next one starting only when the previous
// one was taken: a notification or a response once the daemon answered it
// (202), a request once its body was written (a request may wait minutes
// for its answer, and the client must still be able to answer the agent's
// permission requests meanwhile), and while the instance is being
// created, the first request once answered. Since the daemon serves POSTs
// concurrently, a message written right behind a still-pending request
// can, in a narrow race, reach the agent first; ACP clients wait for the
// answers that matter (initialize, session/new) before sending more.
//
// A problem answer (413 for a message over the daemon's --max-acp-body,
// 401, ...) becomes a JSON-RPC error for that request (code -32603, the
// problem document as error.data), and a logged warning for a
// notification or a response; the connection goes on. A 503 (the daemon
// overloaded: it took nothing) is first sent again after its Retry-After
// (at least a second) until ReconnectTimeout: a notification or a
// response has no other way to reach the agent. A retried request may
// reach the agent after messages written behind it. A
// message of 1 MiB or more asks the daemon first (Expect: 100-continue),
// so such an answer comes before its body was sent. A request the daemon
// stopped waiting for (504) is answered by the agent's late response from
// the stream.
//
// # Delivery: at most once
//
// No message is sent twice. A POST is sent again only when nothing of it
// was taken: when no connection to the daemon could be made (again until
// ReconnectTimeout; then the connection fails with ErrDaemonUnreachable),
// in net/http's own retry on a kept-alive connection found closed before
// a byte was written to it, and after a 503 (above). A POST whose
// connection fails later is
// not sent again, and what the caller sees depends on how far it got:
//
//   - Cut short while it was being written (typically a large message the
//     daemon refused before reading it, the refusal lost with the
//     connection): the daemon did not take it, since it acts on a message
//     only once it has all of it. A request gets a JSON-RPC error at once
//     whose message starts with ErrNotDelivered's.
//   - Written whole, with no answer: it is unknown whether the daemon took
//     it. A request stays pending: if the daemon took it, the agent's
//     response comes on the event stream, as every response does; if the
//     connection fails later, the request gets a JSON-RPC error, as every
//     pending request does; if the daemon never got it, no answer comes,
//     so bound such requests with a timeout of your own (acp-go-sdk's
//     request context). The request creating the instance has no stream
//     to wait on yet: it gets a JSON-RPC error at once whose message
//     starts with ErrDeliveryUnknown's, and the next message creates the
//     instance if it does not exist.
//   - In both cases a notification or a response is dropped with a logged
//     warning; Write does not fail for it.
//
// # Failures and lifetime
//
// The connection ends with an error Read returns after every message
// before it (and a JSON-RPC error for each request still pending):
// ErrDaemonUnreachable when the daemon could not be reached, or stopped
// answering, for ReconnectTimeout (a daemon that keeps its connections
// open and sends nothing, not even the event stream's heartbeat, for 45 s
// has stopped answering; the time counts from its last sign of life),
// ErrInstanceGone, *AgentExitedError. A request still creating the
// instance is waited for until Close: an agent may take minutes to
// install.
//
// Read, Write, CloseWrite and Close may be called from any goroutine;
// concurrent Writes are taken one at a time (each keeps its lines whole
// when it holds whole lines). Close ends every call in progress and stops
// every goroutine the connection started.
type ACPConn struct {
	// Four parts, each a small type owning its state: send (the POSTs),
	// recv (the event stream), pending (the requests awaiting answers:
	// every line reaches the reader through it) and in (the lines waiting
	// for Read). ACPConn itself owns the connection's lifetime, and
	// splits written bytes into lines on the goroutine holding wsem.
	c        *Client
	serverID string
	opts     ACPOptions
	log      *slog.Logger

	ctx    context.Context // cancelled by Close and on failure
	cancel context.CancelFunc
	done   chan struct{} // closed by Close
	closed sync.Once

	in      *inbox
	pending *pendingTable
	recv    *receiver
	send    *sender

	wsem        chan struct{} // cap 1: held by the Write in progress, or to end writing
	wbuf        []byte        // the start of a line whose newline has not come yet
	writeClosed bool
}

// DialACP connects to the ACP server instance serverID. If it exists, the
// connection attaches to it and reads only what the agent writes from now
// on (agent, when given, must match the instance's); otherwise agent is
// required and the first message written creates the instance (POST
// ?agent=). A daemon that is not reachable yet is waited for up to
// ACPOptions.ReconnectTimeout (bounded by ctx), as is one that takes the
// connection and does not answer. ctx bounds the dial only: the
// connection lives until Close or a failure. opts may be nil. The caller
// must Close the connection.
func (c *Client) DialACP(ctx context.Context, serverID, agent string, opts *ACPOptions) (*ACPConn, error) {
	if !domain.ValidServerID(serverID) {
		return nil, fmt.Errorf("dial acp %q: a server id is a non-empty path segment (no '/'), at most %d bytes", serverID, domain.MaxServerIDLen)
	}
	var o ACPOptions
	if opts != nil {
		o = *opts
	}
	if o.ReconnectTimeout <= 0 {
		o.ReconnectTimeout = 30 * time.Second
	}
	if o.MaxMessage <= 0 {
		o.MaxMessage = domain.DefaultMaxACPMessage
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	servers, err := c.listPatiently(ctx, o.ReconnectTimeout, log)
	if err != nil {
		return nil, fmt.Errorf("dial acp %q: %w", serverID, err)
	}
	var existing *ACPServer
	for i := range servers {
		if servers[i].ServerID == serverID {
			existing = &servers[i]
		}
	}
	switch {
	case existing != nil && agent != "" && existing.Agent != agent:
		return nil, fmt.Errorf("dial acp %q: the instance runs agent %q, not %q", serverID, existing.Agent, agent)
	case existing == nil && agent == "":
		return nil, fmt.Errorf("dial acp %q: no such instance, and no agent given to create it", serverID)
	case existing != nil && existing.State == "exited":
		return nil, fmt.Errorf("dial acp %q: the instance's agent has exited; delete the instance (DELETE /v1/acp/%s) or use another id", serverID, url.PathEscape(serverID))
	}
	cctx, cancel := context.WithCancel(context.Background())
	a := &ACPConn{
		c: c, serverID: serverID, opts: o, log: log.With("server_id", serverID),
		ctx: cctx, cancel: cancel, done: make(chan struct{}),
		wsem: make(chan struct{}, 1),
	}
	a.in = newInbox()
	a.pending = newPendingTable(a.in)
	var lastSeq uint64
	if existing != nil {
		lastSeq, agent = existing.LastEventID, existing.Agent
	}
	a.recv = newReceiver(a, lastSeq)
	// What the instance wrote before attaching is not for this reader:
	// the stream starts after it, and a POST's answer may follow it.
	a.pending.passed(lastSeq)
	// agent stays set after attaching too: until a POST succeeded, an
	// instance deleted meanwhile is created again rather than refused.
	a.send = newSender(a, agent)
	if existing != nil {
		a.recv.start()
	}
	go a.recv.run()
	return a, nil
}

// listPatiently lists the instances, waiting up to patience for a daemon
// that is not listening yet (an editor may start before the sandbox is up)
// or that does not answer (a daemon stopped, or a dead peer behind a
// proxy, accepts and never replies): each attempt is bounded by what is
// left of patience (at least a second). Answers, problems included, are
// final; ctx ending returns ctx.Err().
func (c *Client) listPatiently(ctx context.Context, patience time.Duration, log *slog.Logger) ([]ACPServer, error) {
	deadline := time.Now().Add(patience)
	backoff := 50 * time.Millisecond
	for waited := false; ; waited = true {
		// An answer gets at least a second, however short the patience.
		actx, cancel := context.WithDeadline(ctx, later(deadline, time.Now().Add(time.Second)))
		servers, err := c.ListACPServers(actx)
		cancel()
		var p *Problem
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err == nil || errors.As(err, &p):
			return servers, err
		case errors.Is(err, context.DeadlineExceeded):
			// Our deadline, not the caller's: the daemon took the
			// connection and never answered. Not a context error for
			// the caller.
			return nil, fmt.Errorf("%w at %s for %v: no answer (%v)", ErrDaemonUnreachable, c.BaseURL, patience, err)
		case !time.Now().Add(backoff).Before(deadline):
			return nil, fmt.Errorf("%w at %s for %v: %w", ErrDaemonUnreachable, c.BaseURL, patience, err)
		}
		if !waited {
			log.Warn("daemon not reachable yet; waiting", "endpoint", c.BaseURL, "for", patience, "err", err)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		backoff = min(backoff*2, time.Second)
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// ServerID is the instance this connection talks to.
func (a *ACPConn) ServerID() string { return a.serverID }

// Read reads agent messages, each a line ending in "\n". After a failure it
// returns the error (see ErrInstanceGone, ErrDaemonUnreachable,
// *AgentExitedError) once everything before it was read; after Close,
// ErrClosed.
func (a *ACPConn) Read(p []byte) (int, error) {
	return a.in.read(p, a.done)
}

// Write takes client messages, one JSON-RPC object per line (a trailing CR
// is dropped, blank lines are skipped, a line that is not a JSON object is
// logged and dropped). It returns once each complete line was taken by the
// daemon as described above, so a slow or unreachable daemon slows the
// writer down; the connection's error once it has failed.
func (a *ACPConn) Write(p []byte) (int, error) {
	select {
	case a.wsem <- struct{}{}:
	case <-a.done:
		return 0, a.writeErr()
	}
	defer func() { <-a.wsem }()
	if a.writeClosed {
		return 0, a.writeErr()
	}
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(a.wbuf)+len(p) > a.opts.MaxMessage {
				return 0, fmt.Errorf("acp write: message longer than %d bytes", a.opts.MaxMessage)
			}
			a.wbuf = append(a.wbuf, p...)
			break
		}
		if len(a.wbuf)+i > a.opts.MaxMessage {
			return 0, fmt.Errorf("acp write: message longer than %d bytes", a.opts.MaxMessage)
		}
		line := append(a.wbuf, p[:i]...)
		if a.wbuf == nil {
			line = bytes.Clone(p[:i])
		}
		a.wbuf = nil
		p = p[i+1:]
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if !a.send.send(line) {
			return 0, a.writeErr()
		}
	}
	return n, nil
}

func (a *ACPConn) writeErr() error {
	if err := a.Err(); err != nil {
		return err
	}
	return ErrClosed
}

// CloseWrite ends the client's side like closing an agent's stdin: no more
// writes. It returns once every message written so far was handed to the
// daemon, every synchronous request among them was answered, and those
// answers were read from the connection; or when ctx is done or the
// connection failed. Requests answered on the stream only (session/prompt,
// which may run for hours) are not waited for. Messages from the agent keep
// arriving until Close.
func (a *ACPConn) CloseWrite(ctx context.Context) error {
	select {
	case a.wsem <- struct{}{}: // a Write in progress has returned
		a.writeClosed = true
		<-a.wsem
	case <-ctx.Done():
		return ctx.Err()
	}
	if !a.send.waitIdle(ctx.Done()) {
		return ctx.Err()
	}
	// Held answers are delivered by the stream; wait until they and
	// everything queued before them were read.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		busy := a.in.busy() || a.pending.holding()
		if ended, _ := a.in.result(); !busy || ended {
			return a.Err()
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Err is the error that ended the connection, nil while it runs.
func (a *ACPConn) Err() error {
	_, err := a.in.result()
	return err
}

// Close stops the connection: in-flight POSTs and the stream are
// abandoned, calls in progress return, and every goroutine of the
// connection has returned when Close does. With DeleteOnClose it first
// gives a request still creating the instance up to 2 s to finish, then
// deletes the instance (up to 5 s; its error is Close's). Reads after
// Close return ErrClosed (or the earlier failure). Idempotent.
func (a *ACPConn) Close() error {
	first := false
	a.closed.Do(func() { first = true; close(a.done) })
	if !first {
		return nil
	}
	if a.opts.DeleteOnClose {
		// A POST still creating the instance would recreate it after the
		// DELETE; give in-flight POSTs a moment to finish.
		grace := make(chan struct{})
		t := time.AfterFunc(2*time.Second, func() { close(grace) })
		a.send.waitIdle(grace)
		t.Stop()
	}
	a.in.end(ErrClosed)
	a.cancel()
	a.wsem <- struct{}{} // a Write in progress has returned (its POST was cancelled)
	a.writeClosed = true
	<-a.wsem
	a.send.wg.Wait()
	a.recv.wait()
	if a.opts.DeleteOnClose {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := a.c.CloseACP(ctx, a.serverID); err != nil {
			return fmt.Errorf("delete acp instance %q: %w", a.serverID, err)
		}
	}
	return nil
}

// fail ends the connection with err: held responses are delivered, every
// other pending request gets a JSON-RPC error, then the reader gets err.
// The first end wins.
func (a *ACPConn) fail(err error) {
	if a.pending.failAll(err) {
		a.log.Error("acp connection failed", "err", err)
	}
	a.cancel()
}
