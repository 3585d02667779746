package httpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// ACPOptions tune DialACP. The zero value is ready to use.
type ACPOptions struct {
	// ReconnectTimeout is how long the connection keeps trying to reach the
	// daemon (event stream reconnects, POST retries) before it gives up:
	// pending requests get JSON-RPC errors and the connection fails with
	// ErrDaemonUnreachable. Default 30 s.
	ReconnectTimeout time.Duration
	// DeleteOnClose deletes the server instance when the connection is
	// closed (DELETE /v1/acp/{id}), stopping its agent.
	DeleteOnClose bool
	// Logger receives transport events: reconnects, replay gaps, dropped
	// lines. Nil discards them. The connection never writes anything but
	// agent messages to its reader.
	Logger *slog.Logger
	// MaxMessage bounds one outgoing line; a longer line fails Write.
	// Default 64 MiB.
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
	// ErrDaemonUnreachable: the daemon could not be reached for longer than
	// ACPOptions.ReconnectTimeout.
	ErrDaemonUnreachable = errors.New("daemon unreachable")
	// ErrReplayGap is the message of the JSON-RPC errors given to requests
	// pending when the daemon reported lost events (_adapter/replay_gap).
	ErrReplayGap = errors.New("events were lost (replay gap); the response may have been among them")
)

// AgentExitedError ends a connection whose agent process exited
// (_adapter/agent_exited on the stream).
type AgentExitedError struct {
	Success bool
	Code    *int // nil when the agent was killed by a signal
}

func (e *AgentExitedError) Error() string {
	if e.Code == nil {
		return "agent process exited (killed by a signal)"
	}
	return "agent process exited with code " + strconv.Itoa(*e.Code)
}

// JSON-RPC error code given to requests the transport answers itself.
const rpcInternalError = -32603

const (
	streamIdleTimeout = 45 * time.Second // three missed 15 s heartbeats
	maxQueued         = 1024             // delivered lines waiting for Read before the stream pauses
	maxQueuedBytes    = 64 << 20         // ... or their bytes
	maxAnswered       = 4096             // ids remembered to drop a second copy of a response
)

// ACPConn is one ACP connection to a server instance of the daemon, shaped
// like the pipes of a local agent process: Write takes client→agent
// JSON-RPC messages, one per line; Read yields agent→client messages, one
// per line, exactly as the agent wrote them and in the order it wrote them.
// Plug it into acp-go-sdk as acp.NewClientSideConnection(client, conn, conn).
//
// How the order is kept: every agent message is read from the daemon's
// event stream (GET /v1/acp/{id}), which carries all of them, responses to
// synchronous POSTs included, numbered in the order the agent wrote them.
// The 200 body of a synchronous POST is the same response: it is held, not
// delivered, and dropped once the stream has delivered it, so a result
// never overtakes the updates written before it and nothing is delivered
// twice. The stream reconnects with Last-Event-ID after a cut. Only when
// the stream can no longer deliver a held response (a replay gap, the
// daemon gone) is the held copy delivered instead. A request the daemon
// stopped waiting for (504) is answered by the agent's late response from
// the stream; other problem answers become a JSON-RPC error for that
// request (code -32603, the problem document as error.data).
//
// Outgoing lines are sent in order, each as its own POST, the next one
// starting only when the previous one was taken: a notification or a
// response once the daemon answered it (202), a request once its body was
// handed to the network (a request may wait minutes for its answer, and the
// client must still be able to answer the agent's permission requests
// meanwhile), and while the instance is being created, the first request
// once answered. Since the daemon serves POSTs concurrently, a message
// written right behind a still-pending request can, in a narrow race, reach
// the agent first; ACP clients wait for the answers that matter
// (initialize, session/new) before sending more. A POST that fails before
// the daemon answered (connection refused or reset) is retried until
// ReconnectTimeout. With a Client that has no HTTP client of its own and a
// plain http:// endpoint, POSTs go over the connection's own kept-alive
// connections, each request written by Write itself (see acpPoster: it is
// faster); otherwise through net/http.
//
// Write and Read may be called concurrently with each other; each from one
// goroutine at a time. Close stops every goroutine the connection started.
type ACPConn struct {
	c        *Client
	poster   *acpPoster // nil: POSTs go through net/http
	serverID string
	postPath string // the escaped path POSTs go to
	opts     ACPOptions
	log      *slog.Logger

	ctx    context.Context // cancelled by Close and on failure
	cancel context.CancelFunc
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup

	rmu sync.Mutex // one Read at a time

	wsem        chan struct{} // cap 1: held by the Write in progress, or to end writing
	wbuf        []byte
	writeClosed bool

	startStream     chan struct{} // closed once the instance is known to exist
	startStreamOnce sync.Once

	mu          sync.Mutex
	agent       string        // ?agent= for POSTs until one succeeded
	lastSeq     uint64        // last event id delivered (stream goroutine writes)
	queue       [][]byte      // agent lines not yet read, in order
	partial     []byte        // the rest of a line a Read did not take whole
	queuedBytes int           // bytes in queue
	inflight    int           // request POSTs in flight
	postDone    chan struct{} // cap 1: a request POST finished
	ended       bool          // no more lines will be queued
	endErr      error         // nil: the reader gets io.EOF
	pending     map[string]*pendingRequest
	answered    map[string]struct{}
	answRing    []string
	wake        chan struct{} // cap 1: a Read has something to return
	space       chan struct{} // cap 1: a Read shrank the queue
}

// pendingRequest is a request sent by the client and not yet answered to it.
type pendingRequest struct {
	id   json.RawMessage
	held []byte // the synchronous POST's 200 body, waiting for the stream's copy
}

// DialACP connects to the ACP server instance serverID. If it exists, the
// connection attaches to it and reads only what the agent writes from now
// on (agent, when given, must match the instance's); otherwise agent is
// required and the first message written creates the instance (POST
// ?agent=). A daemon that is not reachable yet is waited for up to
// ACPOptions.ReconnectTimeout (bounded by ctx). opts may be nil. The caller
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
		o.MaxMessage = 64 << 20
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
	conn := &ACPConn{
		c: c, poster: newACPPoster(c), serverID: serverID, postPath: requestURI(c.BaseURL, acpPath(serverID)), opts: o, log: log.With("server_id", serverID),
		ctx: cctx, cancel: cancel, done: make(chan struct{}),
		startStream: make(chan struct{}), wsem: make(chan struct{}, 1),
		agent:   agent,
		pending: map[string]*pendingRequest{}, answered: map[string]struct{}{},
		wake: make(chan struct{}, 1), space: make(chan struct{}, 1), postDone: make(chan struct{}, 1),
	}
	if existing != nil {
		conn.lastSeq = existing.LastEventID
		conn.agent = existing.Agent
		conn.startStreamOnce.Do(func() { close(conn.startStream) })
	}
	conn.wg.Add(1)
	go conn.stream()
	return conn, nil
}

// listPatiently lists the instances, waiting up to patience for a daemon
// that is not listening yet (an editor may start before the sandbox is up).
// Answers, problems included, are final.
func (c *Client) listPatiently(ctx context.Context, patience time.Duration, log *slog.Logger) ([]ACPServer, error) {
	deadline := time.Now().Add(patience)
	backoff := 50 * time.Millisecond
	for waited := false; ; waited = true {
		servers, err := c.ListACPServers(ctx)
		var p *Problem
		if err == nil || errors.As(err, &p) || ctx.Err() != nil {
			return servers, err
		}
		if time.Now().Add(backoff).After(deadline) {
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

// ServerID is the instance this connection talks to.
func (a *ACPConn) ServerID() string { return a.serverID }

// Read reads agent messages, each a line ending in "\n". After a failure it
// returns the error (see ErrInstanceGone, ErrDaemonUnreachable,
// *AgentExitedError) once everything before it was read; after Close,
// ErrClosed.
func (a *ACPConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	a.rmu.Lock()
	defer a.rmu.Unlock()
	for {
		a.mu.Lock()
		if a.closedLocked() {
			a.mu.Unlock()
			return 0, ErrClosed
		}
		n := 0
		for n < len(p) {
			if len(a.partial) == 0 {
				if len(a.queue) == 0 {
					break
				}
				a.queuedBytes -= len(a.queue[0])
				a.partial = append(a.queue[0], '\n')
				a.queue[0] = nil
				a.queue = a.queue[1:]
				if len(a.queue) == 0 {
					a.queue = nil
				}
			}
			c := copy(p[n:], a.partial)
			a.partial = a.partial[c:]
			n += c
		}
		ended, err := a.ended, a.endErr
		a.mu.Unlock()
		if n > 0 {
			select {
			case a.space <- struct{}{}:
			default:
			}
			return n, nil
		}
		if ended {
			if err == nil {
				err = io.EOF
			}
			return 0, err
		}
		select {
		case <-a.wake:
		case <-a.done:
		}
	}
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
		if !a.send(line) {
			return 0, a.writeErr()
		}
	}
	return n, nil
}

func (a *ACPConn) writeErr() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.endErr != nil {
		return a.endErr
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
	if !a.waitPosts(ctx.Done()) {
		return ctx.Err()
	}
	// Held answers are delivered by the stream; wait until they and
	// everything queued before them were read.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		a.mu.Lock()
		busy := len(a.queue) > 0 || len(a.partial) > 0
		for _, p := range a.pending {
			busy = busy || p.held != nil
		}
		ended := a.ended
		a.mu.Unlock()
		if !busy || ended {
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
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.endErr
}

// Close stops the connection at once: in-flight POSTs and the stream are
// abandoned, and every goroutine of the connection has returned when Close
// does. With DeleteOnClose it then deletes the instance (bounded by 5 s).
// Reads after Close return ErrClosed (or the earlier failure). Idempotent.
func (a *ACPConn) Close() error {
	a.mu.Lock()
	first := !a.closedLocked()
	if first {
		close(a.done)
	}
	a.mu.Unlock()
	if !first {
		return nil
	}
	if a.opts.DeleteOnClose {
		// A POST still creating the instance would recreate it after the
		// DELETE; give in-flight POSTs a moment to finish.
		grace := make(chan struct{})
		t := time.AfterFunc(2*time.Second, func() { close(grace) })
		a.waitPosts(grace)
		t.Stop()
	}
	a.end(ErrClosed)
	a.cancel()
	a.wsem <- struct{}{} // a Write in progress has returned (its POST was cancelled)
	a.writeClosed = true
	<-a.wsem
	a.wg.Wait()
	if a.poster != nil {
		a.poster.close()
	}
	if a.opts.DeleteOnClose {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := a.c.CloseACP(ctx, a.serverID); err != nil {
			return fmt.Errorf("delete acp instance %q: %w", a.serverID, err)
		}
	}
	return nil
}

func (a *ACPConn) closedLocked() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// --- delivery: Read takes lines from the queue ---

// queueLocked appends lines for the reader, in order. a.mu is held.
func (a *ACPConn) queueLocked(lines ...[]byte) {
	if a.ended {
		return
	}
	a.queue = append(a.queue, lines...)
	for _, l := range lines {
		a.queuedBytes += len(l)
	}
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// end stops queueing: the reader gets what is queued, then err (io.EOF when
// nil). The first call wins.
func (a *ACPConn) end(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ended {
		return
	}
	a.ended, a.endErr = true, err
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// waitSpace pauses the stream while the reader lags, so a client that
// stops reading slows the stream (the daemon's replay buffer absorbs it)
// instead of growing this process.
func (a *ACPConn) waitSpace() {
	for {
		a.mu.Lock()
		n, size := len(a.queue), a.queuedBytes
		a.mu.Unlock()
		if n < maxQueued && size < maxQueuedBytes {
			return
		}
		select {
		case <-a.space:
		case <-a.ctx.Done():
			return
		}
	}
}

// fail ends the connection with err: held responses are delivered, every
// other pending request gets a JSON-RPC error, then the reader gets err.
func (a *ACPConn) fail(err error) {
	a.mu.Lock()
	if !a.ended {
		a.log.Error("acp connection failed", "err", err)
		a.answerPendingLocked(err.Error())
	}
	a.mu.Unlock()
	a.end(err)
	a.cancel()
}

// answerPendingLocked answers every pending request: with its held 200 body
// when there is one, else with a JSON-RPC error saying why. a.mu is held.
func (a *ACPConn) answerPendingLocked(why string) {
	for key, p := range a.pending {
		if p.held != nil {
			a.queueLocked(p.held)
		} else {
			a.queueLocked(rpcError(p.id, why, nil))
		}
		a.markAnsweredLocked(key)
	}
}

func (a *ACPConn) markAnsweredLocked(key string) {
	delete(a.pending, key)
	if _, ok := a.answered[key]; ok {
		return
	}
	a.answered[key] = struct{}{}
	a.answRing = append(a.answRing, key)
	if len(a.answRing) > maxAnswered {
		delete(a.answered, a.answRing[0])
		a.answRing = a.answRing[1:]
	}
}

// rpcError is a JSON-RPC error response for id; data, when valid JSON, is
// attached as error.data (the daemon's problem document).
func rpcError(id json.RawMessage, msg string, data json.RawMessage) []byte {
	m, _ := json.Marshal(msg)
	b := []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":` + strconv.Itoa(rpcInternalError) + `,"message":` + string(m))
	if len(data) > 0 && json.Valid(data) {
		var buf bytes.Buffer
		if json.Compact(&buf, data) == nil {
			b = append(b, `,"data":`...)
			b = append(b, buf.Bytes()...)
		}
	}
	return append(b, "}}"...)
}

// --- the event stream ---

func (a *ACPConn) stream() {
	defer a.wg.Done()
	select {
	case <-a.startStream:
	case <-a.ctx.Done():
		return
	}
	var downSince time.Time
	backoff := 20 * time.Millisecond
	for {
		started := time.Now()
		connected, err := a.streamOnce()
		if a.ctx.Err() != nil {
			return
		}
		var p *Problem
		switch {
		case errors.As(err, &p) && (p.Status == http.StatusNotFound || p.Kind() == "session_not_found"):
			a.fail(fmt.Errorf("%w: %q (deleted, or the daemon restarted): %w", ErrInstanceGone, a.serverID, err))
			return
		case errors.As(err, &p) && p.Status/100 == 4:
			a.fail(fmt.Errorf("acp stream %q: %w", a.serverID, err))
			return
		case errors.Is(err, errStopStream):
			return
		case errors.Is(err, ErrSSEEventTooLarge):
			a.fail(fmt.Errorf("acp stream %q: %w", a.serverID, err)) // a reconnect would replay it
			return
		}
		if connected {
			// The daemon was there: the reconnect timeout counts from now.
			// A daemon that answers and hangs up at once, over and over,
			// still backs off.
			downSince = time.Time{}
			if time.Since(started) > time.Second {
				backoff = 20 * time.Millisecond
			}
		}
		if downSince.IsZero() {
			downSince = time.Now()
		}
		if time.Since(downSince) > a.opts.ReconnectTimeout {
			a.fail(fmt.Errorf("%w for %v (event stream of %q: %v)", ErrDaemonUnreachable, a.opts.ReconnectTimeout, a.serverID, err))
			return
		}
		a.log.Warn("acp event stream lost; reconnecting", "err", err, "last_event_id", a.seq())
		select {
		case <-time.After(backoff):
		case <-a.ctx.Done():
			return
		}
		backoff = min(backoff*2, time.Second)
	}
}

var errStopStream = errors.New("stop stream")

func (a *ACPConn) seq() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lastSeq
}

// streamOnce reads the stream from after the last delivered event until it
// ends; connected reports whether the daemon answered 200.
func (a *ACPConn) streamOnce() (connected bool, err error) {
	ctx, cancel := context.WithCancel(a.ctx)
	defer cancel()
	h := http.Header{}
	h.Set("Accept", "text/event-stream")
	h.Set("Last-Event-ID", strconv.FormatUint(a.seq(), 10))
	resp, err := a.c.raw(ctx, http.MethodGet, acpPath(a.serverID), nil, nil, "", h)
	if err != nil {
		return false, err
	}
	a.log.Debug("acp event stream connected", "last_event_id", h.Get("Last-Event-ID"))
	defer resp.Body.Close()
	// A stream that sends nothing, not even heartbeats, is dead.
	idle := time.AfterFunc(streamIdleTimeout, cancel)
	defer idle.Stop()
	r := NewSSEReader(&idleReader{r: resp.Body, t: idle}, 0)
	for {
		ev, err := r.Next()
		if err != nil {
			if err == io.EOF {
				err = errors.New("stream ended")
			}
			return true, err
		}
		if stop := a.onEvent(ev); stop {
			return true, errStopStream
		}
		a.waitSpace()
	}
}

type idleReader struct {
	r io.Reader
	t *time.Timer
}

func (i *idleReader) Read(p []byte) (int, error) {
	n, err := i.r.Read(p)
	if n > 0 {
		i.t.Reset(streamIdleTimeout)
	}
	return n, err
}

// onEvent delivers one stream event; stop reports that the connection
// ended.
func (a *ACPConn) onEvent(ev SSEEvent) (stop bool) {
	f, err := domain.ParseFrame(ev.Data)
	if ev.ID == "" {
		if err == nil && f.Method == "_adapter/replay_gap" {
			a.onGap(ev.Data)
		}
		return false
	}
	seq, perr := strconv.ParseUint(ev.ID, 10, 64)
	if exit, ok := a.deliverEvent(seq, perr == nil, f, err == nil, ev.Data); ok {
		a.fail(exit)
		return true
	}
	return false
}

// deliverEvent queues one numbered event unless it is a copy; it returns
// the agent's exit when the event reports one.
func (a *ACPConn) deliverEvent(seq uint64, seqOK bool, f domain.Frame, frameOK bool, data []byte) (*AgentExitedError, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !seqOK || seq <= a.lastSeq {
		return nil, false // a copy of an event already delivered
	}
	a.lastSeq = seq
	if !frameOK {
		a.log.Warn("acp stream: event is not a JSON object; dropped", "event_id", seq)
		return nil, false
	}
	switch f.Method {
	case "_adapter/agent_exited":
		var m struct {
			Params AgentExitedError `json:"params"`
		}
		_ = json.Unmarshal(data, &m)
		return &m.Params, true
	case "_adapter/invalid_stdout":
		a.log.Warn("agent wrote a line that is not JSON; dropped", "event", string(data))
		return nil, false
	}
	if f.Kind == domain.FrameResponse {
		key := f.IDKey()
		if _, dup := a.answered[key]; dup {
			return nil, false // already answered (held copy after a gap, or a transport error)
		}
		if _, ok := a.pending[key]; ok {
			a.markAnsweredLocked(key)
		}
	}
	a.queueLocked(bytes.Clone(data))
	return nil, false
}

// onGap reports lost events and answers every pending request, since its
// response may have been among them.
func (a *ACPConn) onGap(data []byte) {
	a.log.Error("acp stream: events were lost (the reader fell behind the daemon's replay buffer)", "gap", string(data))
	a.mu.Lock()
	defer a.mu.Unlock()
	a.answerPendingLocked(ErrReplayGap.Error())
}

// --- sending ---

// send POSTs one line in order (see ACPConn); it returns false when the
// connection ended. Called by Write holding wsem.
func (a *ACPConn) send(line []byte) bool {
	f, err := domain.ParseFrame(line)
	if err != nil {
		a.log.Warn("acp write: line is not a JSON object; dropped", "err", err, "line", truncate(line, 200))
		return true
	}
	if f.Kind != domain.FrameRequest {
		a.postMessage(line, f, nil, nil)
		return a.ctx.Err() == nil
	}
	key := f.IDKey()
	a.mu.Lock()
	delete(a.answered, key)
	a.pending[key] = &pendingRequest{id: bytes.Clone(f.ID)}
	a.inflight++
	a.mu.Unlock()
	bootstrapping := a.bootstrapping()
	var first *postAttempt
	if a.poster != nil && !bootstrapping {
		// Put the request on the wire from this goroutine: the message
		// reaches the daemon without a hand-off; a goroutine waits for
		// the answer. If this write fails, that goroutine retries.
		a.mu.Lock()
		agent := a.agent // set until a POST succeeded, after attaching too
		a.mu.Unlock()
		first = a.writePost(line, agent)
	}
	taken, finished := make(chan struct{}), make(chan struct{})
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer close(finished)
		a.postMessage(line, f, taken, first)
		a.mu.Lock()
		a.inflight--
		a.mu.Unlock()
		select {
		case a.postDone <- struct{}{}:
		default:
		}
	}()
	if first != nil && first.pc != nil {
		return true // taken: it is on the wire
	}
	// Until the instance exists, the first request (initialize) is
	// answered before anything else is sent: concurrent first POSTs would
	// race to the agent's stdin while the agent starts.
	wait := taken
	if bootstrapping {
		wait = finished
	}
	select {
	case <-wait:
		return true
	case <-a.ctx.Done():
		return false
	}
}

// waitPosts waits until no request POST is in flight, or until done.
func (a *ACPConn) waitPosts(done <-chan struct{}) bool {
	for {
		a.mu.Lock()
		n := a.inflight
		a.mu.Unlock()
		if n == 0 {
			return true
		}
		select {
		case <-a.postDone:
		case <-done:
			return false
		}
	}
}

func (a *ACPConn) bootstrapping() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.agent != "" && !a.streamStarted()
}

func (a *ACPConn) streamStarted() bool {
	select {
	case <-a.startStream:
		return true
	default:
		return false
	}
}

// postAttempt is one attempt at a POST with the poster: the connection it
// was written on, or why writing failed.
type postAttempt struct {
	pc  *postConn
	err error
}

// writePost writes one attempt with the poster; agent is the bootstrap
// ?agent= value.
func (a *ACPConn) writePost(line []byte, agent string) *postAttempt {
	target := a.postPath
	if agent != "" {
		target += "?" + url.Values{"agent": {agent}}.Encode()
	}
	pc, err := a.poster.write(a.ctx, target, line)
	return &postAttempt{pc: pc, err: err}
}

// postOnce makes one attempt at POSTing line, or finishes the one already
// written (first). written is called once the request was written and
// flushed, or failed. It returns the status and body of a 2xx answer
// (body nil when over the limit an agent line has), a *Problem for any
// other answer, bodyErr when a 2xx answer's body was cut.
func (a *ACPConn) postOnce(line []byte, agent string, first *postAttempt, written func()) (status int, body []byte, bodyErr, err error) {
	if a.poster == nil {
		var q url.Values
		if agent != "" {
			q = url.Values{"agent": {agent}}
		}
		// The body is a *bytes.Reader, which net/http knows to be in
		// memory: it then writes headers and body in one segment. Any
		// other reader (a wrapper signalling EOF, say) makes it flush the
		// headers on their own first: an extra write, and an extra
		// wake-up of the daemon's reader, on every message. "Written" is
		// the trace's WroteRequest, called once the request was written
		// and flushed (or failed).
		ctx := httptrace.WithClientTrace(a.ctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { written() },
		})
		resp, err := a.c.rawLen(ctx, http.MethodPost, acpPath(a.serverID), q, bytes.NewReader(line), int64(len(line)), "application/json", http.Header{"Accept": {"application/json"}})
		if err != nil {
			return 0, nil, nil, err
		}
		// An answer is one agent line; the stream bounds those too.
		body, rerr := io.ReadAll(io.LimitReader(resp.Body, DefaultMaxSSEEvent+1))
		resp.Body.Close()
		if rerr != nil {
			return resp.StatusCode, nil, rerr, nil
		}
		if len(body) > DefaultMaxSSEEvent {
			body = nil // not held: the stream decides
		}
		return resp.StatusCode, body, nil, nil
	}
	at := first
	if at == nil {
		at = a.writePost(line, agent)
	}
	written()
	if at.err != nil {
		return 0, nil, nil, at.err
	}
	status, body, _, err = a.poster.read(a.ctx, at.pc, DefaultMaxSSEEvent)
	var p *Problem
	if err != nil && status/100 == 2 && !errors.As(err, &p) {
		return status, nil, err, nil
	}
	return status, body, nil, err
}

// postMessage POSTs one line, retrying while the daemon cannot be reached,
// and hands the outcome to the pending table. taken, when non-nil, is
// closed once the body was handed to the network or the POST is over.
// first, when non-nil, is the first attempt, already written.
func (a *ACPConn) postMessage(line []byte, f domain.Frame, taken chan struct{}, first *postAttempt) {
	var once sync.Once
	signal := func() {
		if taken != nil {
			once.Do(func() { close(taken) })
		}
	}
	defer signal()
	var firstFailure time.Time
	backoff := 20 * time.Millisecond
	for attempt := 1; ; attempt++ {
		a.mu.Lock()
		agent := a.agent
		a.mu.Unlock()
		status, answer, bodyErr, err := a.postOnce(line, agent, first, signal)
		first = nil
		if err == nil && bodyErr == nil {
			a.posted(f, status, answer)
			return
		}
		if err == nil {
			if f.Kind != domain.FrameRequest || a.ctx.Err() != nil {
				return // taken; a response, if any, comes on the stream
			}
			// The response body was cut: the stream still delivers it.
			a.posted(f, http.StatusAccepted, nil)
			return
		}
		if a.ctx.Err() != nil {
			return
		}
		if errors.Is(err, errStaleConn) {
			// A kept-alive connection the daemon had closed while idle:
			// again at once, on a fresh connection (a 409 then says the
			// daemon had taken it after all, as for any retry).
			continue
		}
		var p *Problem
		if errors.As(err, &p) {
			if attempt > 1 && p.Status == http.StatusConflict && f.Kind == domain.FrameRequest {
				// An earlier attempt was taken after all; its response comes on the stream.
				a.posted(f, http.StatusAccepted, nil)
				return
			}
			if p.Kind() == "timeout" && f.Kind == domain.FrameRequest {
				// The daemon stopped waiting, the agent did not: its late
				// response goes to the stream, and from there to the
				// reader, as it would from a local agent.
				a.log.Info("acp request outlived the daemon's request timeout; its response will come on the stream", "method", f.Method, "id", string(f.ID))
				a.posted(f, http.StatusAccepted, nil)
				return
			}
			a.postProblem(f, p)
			return
		}
		if firstFailure.IsZero() {
			firstFailure = time.Now()
		}
		if time.Since(firstFailure) > a.opts.ReconnectTimeout {
			a.fail(fmt.Errorf("%w for %v (POST to %q: %v)", ErrDaemonUnreachable, a.opts.ReconnectTimeout, a.serverID, err))
			return
		}
		a.log.Warn("acp post failed before the daemon answered; retrying", "err", err, "attempt", attempt)
		select {
		case <-time.After(backoff):
		case <-a.ctx.Done():
			return
		}
		backoff = min(backoff*2, time.Second)
	}
}

// posted records a 2xx answer: the instance exists (start the stream), and
// a synchronous response is held until the stream delivers its copy.
func (a *ACPConn) posted(f domain.Frame, status int, answer []byte) {
	a.log.Debug("acp post answered", "method", f.Method, "id", string(f.ID), "status", status)
	a.startStreamOnce.Do(func() { close(a.startStream) })
	a.mu.Lock()
	defer a.mu.Unlock()
	a.agent = "" // from now on a missing instance is an error, not a fresh start
	if f.Kind != domain.FrameRequest || status != http.StatusOK {
		return
	}
	answer = bytes.TrimSpace(answer)
	if p, ok := a.pending[f.IDKey()]; ok && len(answer) > 0 {
		p.held = answer
	}
}

// postProblem handles a problem answer: the instance being gone ends the
// connection; a failed request gets a JSON-RPC error carrying the problem;
// anything else is logged.
func (a *ACPConn) postProblem(f domain.Frame, p *Problem) {
	a.mu.Lock()
	bootstrapping := a.agent != ""
	a.mu.Unlock()
	if !bootstrapping && (p.Kind() == "session_not_found" || (p.Status == http.StatusBadRequest && bytes.Contains([]byte(p.Detail), []byte("missing required 'agent'")))) {
		a.fail(fmt.Errorf("%w: %q (deleted, or the daemon restarted): %w", ErrInstanceGone, a.serverID, p))
		return
	}
	a.log.Warn("acp post refused", "method", f.Method, "id", string(f.ID), "err", p)
	if f.Kind != domain.FrameRequest {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	key := f.IDKey()
	if _, ok := a.pending[key]; !ok {
		return
	}
	a.queueLocked(rpcError(f.ID, p.Error(), p.Raw))
	a.markAnsweredLocked(key)
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
