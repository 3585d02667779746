package acp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/app/internal/seqring"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// instance is one ACP server id: one agent process, its pending-request
// table, sequence counter and event log.
//
// Goroutines: one reads stdout (readStdout), one drains stderr, one waits for
// the process (watch); all end when the process and its pipes are gone, and
// watch closes done after the other two. POST handlers write stdin under
// writeMu.
type instance struct {
	id        string
	agent     string
	createdAt time.Time
	proc      ports.AgentProcess
	log       *EventLog
	pool      *seqring.Pool // the budget of the log and of lines being read (--replay-total)
	stderr    stderrTail
	opts      *Options
	metrics   *Metrics // the owning Instances' counters
	logger    *slog.Logger
	routes    *routes // set for connections of ACP's standard transport
	gen       uint64  // set once, when listed (Instances.mu), before anyone else sees it

	writeMu  sync.Mutex
	writeErr error  // set once stdin is unusable
	wbuf     []byte // a frame and its newline, written at once; reused under writeMu

	mu      sync.Mutex
	pending map[string]*pendingRequest
	idBytes int               // the ids of pending, summed (MaxPendingIDBytes)
	free    []*pendingRequest // recycled, for synchronous POSTs
	exited  bool
	status  domain.ExitStatus

	readerDone chan struct{}
	done       chan struct{} // closed once the exit is fully recorded
	onExit     func(*instance)

	// Guarded by Instances.mu: the exit was noted (slot freed), and the
	// timer that forgets the exited instance.
	exitNoted bool
	expiry    *time.Timer
}

// pendingRequest is a request waiting for its response.
type pendingRequest struct {
	id      []byte // raw id, for the error sent to async requests on exit
	async   bool
	session string             // the ACP session of the POST that carried it
	ch      chan pendingResult // buffered 1; exactly one send
	timer   *time.Timer        // the request timeout, reused with the request
}

// MaxPendingRequests bounds the requests one instance has waiting for the
// agent's answer, and MaxPendingIDBytes their ids' bytes together: an
// agent that never answers (a hung turn on each of many sessions, or a
// client posting requests it knows go unanswered) would otherwise keep
// an entry, and its id, for every request ever posted. Past either, a
// request is refused with 429 until answers come or the agent exits.
const (
	MaxPendingRequests = 1024
	MaxPendingIDBytes  = 1 << 20
)

// maxFreePending bounds an instance's recycled pending requests.
const maxFreePending = 16

// newPending returns a pending request for a synchronous POST, recycled
// with its channel and timer when the instance has one: a round trip then
// allocates none of them. (Per instance, not a sync.Pool: channels and
// timers stay with the instance that made them, as testing/synctest
// requires of its bubbles.)
func (in *instance) newPending(id []byte, session string) *pendingRequest {
	in.mu.Lock()
	var p *pendingRequest
	if n := len(in.free); n > 0 {
		p, in.free[n-1] = in.free[n-1], nil
		in.free = in.free[:n-1]
	}
	in.mu.Unlock()
	if p == nil {
		p = &pendingRequest{ch: make(chan pendingResult, 1)}
	}
	p.id, p.session = id, session
	return p
}

// recycle keeps p for the next synchronous POST. The caller guarantees
// that nothing can send to p.ch any more (its one send, if any, was
// received, or p was taken out of the table by its own POST).
func (in *instance) recycle(p *pendingRequest) {
	if p.timer != nil {
		p.timer.Stop()
	}
	*p = pendingRequest{ch: p.ch, timer: p.timer}
	in.mu.Lock()
	if len(in.free) < maxFreePending {
		in.free = append(in.free, p)
	}
	in.mu.Unlock()
}

type pendingResult struct {
	seq  uint64
	data []byte
	err  error
}

func newInstance(id, agent string, proc ports.AgentProcess, opts *Options, metrics *Metrics, now time.Time, pool *seqring.Pool, onExit func(*instance), r *routes) *instance {
	in := &instance{
		routes:     r,
		id:         id,
		agent:      agent,
		createdAt:  now,
		proc:       proc,
		log:        newPooledLog(pool, opts.ReplayBytes, opts.Spill, spillFailed(opts.Logger, id)),
		pool:       pool,
		onExit:     onExit,
		opts:       opts,
		metrics:    metrics,
		logger:     opts.Logger.With("server_id", id, "agent", agent, "pid", proc.PID()),
		pending:    map[string]*pendingRequest{},
		readerDone: make(chan struct{}),
		done:       make(chan struct{}),
	}
	go in.readStdout()
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		in.stderr.drain(proc.Stderr(), in.logger)
	}()
	go in.watch(stderrDone)
	return in
}

// readStdout frames stdout into events. It never blocks on readers.
//
// A line longer than the reader's buffer is assembled from copies of its
// chunks, each charged to the shared replay budget before it is kept (and
// given back once the line is an event, which the log charges itself): lines
// being read count against --replay-total like the logs do, so agents all
// writing huge lines at once cannot take the daemon's memory. A line that
// finds no room, or passes --max-frame, stops its agent.
func (in *instance) readStdout() {
	defer close(in.readerDone)
	r := bufio.NewReaderSize(in.proc.Stdout(), 64<<10)
	var chunks [][]byte // a line longer than the reader's buffer, so far
	var n, charged int64
	defer func() { in.pool.Release(charged) }()
	for {
		chunk, err := r.ReadSlice('\n')
		n += int64(len(chunk))
		size := n
		if err == nil {
			size-- // the newline is not part of the frame
		}
		tooBig := size > int64(in.opts.MaxFrameBytes)
		if !tooBig && (err == bufio.ErrBufferFull || chunks != nil) {
			// Room for this chunk's copy, and for the whole line once it ends.
			need := int64(len(chunk))
			if err != bufio.ErrBufferFull {
				need += size
			}
			if !in.pool.Reserve(need) {
				in.pool.Release(charged)
				charged = 0
				in.stopForOutput("agent wrote a line the replay budget has no room for; stopping it", "replay_total_bytes", in.pool.Max())
				_, _ = io.Copy(io.Discard, r) // keep the agent unblocked while it stops
				return
			}
			charged += need
		}
		if tooBig {
			in.stopForOutput("agent wrote a frame over the limit; stopping it", "limit_bytes", int64(in.opts.MaxFrameBytes))
			_, _ = io.Copy(io.Discard, r)
			return
		}
		line, owned := chunk, false // ReadSlice's buffer: the log copies what it keeps
		switch {
		case err == bufio.ErrBufferFull:
			chunks = append(chunks, append([]byte(nil), chunk...))
			continue
		case chunks != nil:
			line = make([]byte, 0, n)
			for _, c := range chunks {
				line = append(line, c...)
			}
			line, owned = append(line, chunk...), true
			chunks = nil
		}
		n = 0
		// The log charges what it keeps; the assembly's charge goes back
		// first, so the two never count twice.
		in.pool.Release(charged)
		charged = 0
		in.handleLine(line, owned)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				in.logger.Debug("agent stdout closed", "err", err)
			}
			return
		}
	}
}

// spillFailed is what an instance's log says when its spill file fails:
// once, since the log goes on in memory.
func spillFailed(log *slog.Logger, id string) func(error) {
	return func(err error) {
		log.Warn("replay spill file failed; this instance keeps its replay in memory from now on", "server_id", id, "err", err)
	}
}

// stopForOutput stops an agent whose output the daemon cannot take.
func (in *instance) stopForOutput(msg, key string, limit int64) {
	in.logger.Error(msg, key, limit)
	go func() {
		// SIGKILL after the grace period, as on DELETE: an agent
		// ignoring SIGTERM must not outlive its instance's end.
		ctx, cancel := context.WithTimeout(context.Background(), in.opts.StopGrace)
		defer cancel()
		in.proc.Stop(ctx) //nolint:errcheck // watch records the exit
	}()
}

// handleLine appends one line of stdout to the log and hands a response
// to its waiting POST. line is stdout's buffer unless owned (a line
// assembled from chunks, given to the log as it is): what outlives this
// call is the log's stored copy.
func (in *instance) handleLine(line []byte, owned bool) {
	// Trim the line ending (LF, CRLF) and surrounding blanks.
	end := len(line)
	for end > 0 && (line[end-1] == '\n' || line[end-1] == '\r' || line[end-1] == ' ' || line[end-1] == '\t') {
		end--
	}
	start := 0
	for start < end && (line[start] == ' ' || line[start] == '\t') {
		start++
	}
	line = line[start:end]
	if len(line) == 0 {
		return
	}
	in.metrics.fromAgent(len(line))
	f, err := domain.ParseFrame(line)
	if err == nil && len(f.Data) != len(line) {
		// ParseFrame compacted a line holding a raw CR (whitespace to
		// JSON, a line end to Server-Sent Events, which would cut the
		// event's data in two for every SSE reader): the log, the
		// stream and the waiting POST get the compacted copy, a new
		// buffer the log may keep.
		line, owned = f.Data, true
	}
	if errors.Is(err, domain.ErrNotJSON) {
		in.log.Append(domain.InvalidStdoutMessage("agent wrote a line that is not JSON", line))
		return
	}
	if err != nil {
		// Valid JSON the daemon does not route (ambiguous, or not an
		// object): passed on as it is, but on one SSE line too.
		if bytes.IndexByte(line, '\r') >= 0 {
			var buf bytes.Buffer
			if json.Compact(&buf, line) == nil {
				line, owned = buf.Bytes(), true
			}
		}
		in.log.appendLine(line, "", owned, false)
		return
	}
	var p *pendingRequest
	if f.Kind == domain.FrameResponse {
		in.mu.Lock()
		key := f.IDKey()
		if p = in.pending[key]; p != nil {
			delete(in.pending, key)
			in.idBytes -= len(key)
		}
		in.mu.Unlock()
	}
	if p != nil {
		// The synchronous POST waiting for this response is readied
		// before the stream's readers: the goroutine readied last runs
		// first on this thread, so the stream writer goes first and the
		// POST's handler runs beside it on another CPU or right after.
		// Clients that deliver from the stream to keep the agent's order
		// (the Go client, "sandbox-agent acp") got their round trip 20-30
		// µs shorter; the POST's answer is no later (its flush barrier
		// waits for the events before this one, not for this one).
		seq, stored := in.log.appendLine(line, in.routes.streamOf(f, p), owned, true)
		p.ch <- pendingResult{seq: seq, data: stored}
		in.log.Wake()
		return
	}
	in.log.appendLine(line, in.routes.streamOf(f, p), owned, false)
	if f.Kind == domain.FrameResponse {
		in.metrics.lateResponse()
	}
}

// watch waits for the process to end, then fails what is still pending and
// appends _adapter/agent_exited.
func (in *instance) watch(stderrDone <-chan struct{}) {
	st, err := in.proc.Wait()
	if err != nil {
		in.logger.Warn("waiting for agent failed", "err", err)
	}
	// The process group is gone, so stdout ends promptly; a descendant that
	// escaped the group could keep it open, so do not wait for it long.
	for _, ch := range []<-chan struct{}{in.readerDone, stderrDone} {
		select {
		case <-ch:
		case <-time.After(200 * time.Millisecond):
			in.proc.Stdout().Close()
			in.proc.Stderr().Close()
			<-ch
		}
	}
	// Both readers are done; release the pipes now rather than whenever a
	// finalizer gets to them (a daemon with a large heap collects rarely).
	in.proc.Stdout().Close()
	in.proc.Stderr().Close()
	in.mu.Lock()
	in.exited = true
	in.status = st
	pending := in.pending
	in.pending = map[string]*pendingRequest{}
	in.idBytes = 0
	in.mu.Unlock()

	exitErr := in.exitError()
	for _, p := range pending {
		if p.async {
			in.log.AppendTo(domain.AgentStoppedResponse(p.id), in.routes.streamOf(domain.Frame{Kind: domain.FrameResponse}, p))
		}
		p.ch <- pendingResult{err: exitErr}
	}
	in.log.Append(domain.AgentExitedMessage(st.Success(), st.Code))
	in.metrics.exited(st)
	in.logger.Info("agent exited", "code", codeOrNil(st.Code), "signal", st.Signal)
	// Free the agent's slot before done: a DELETE returns once done is
	// closed, and a POST right after it must find the slot free.
	if in.onExit != nil {
		in.onExit(in)
	}
	close(in.done)
}

// exitError is the error for requests that can no longer be answered.
func (in *instance) exitError() error {
	in.mu.Lock()
	st := in.status
	in.mu.Unlock()
	return domain.AgentExited(in.agent, st.Code, in.stderr.String())
}

// write sends one frame plus a newline to stdin. Writes never interleave; a
// write that fails (or makes no progress within the write timeout) breaks
// stdin for good, since a partial frame may have been written.
func (in *instance) write(data []byte) error {
	in.writeMu.Lock()
	defer in.writeMu.Unlock()
	if in.writeErr != nil {
		return in.writeFailure(in.writeErr)
	}
	w := in.proc.Stdin()
	if d, ok := w.(interface{ SetWriteDeadline(time.Time) error }); ok && in.opts.WriteTimeout > 0 {
		_ = d.SetWriteDeadline(time.Now().Add(in.opts.WriteTimeout))
	}
	var err error
	if len(data) < 64<<10 {
		in.wbuf = append(append(in.wbuf[:0], data...), '\n')
		_, err = w.Write(in.wbuf)
	} else if _, err = w.Write(data); err == nil {
		_, err = w.Write([]byte{'\n'})
	}
	if err != nil {
		in.writeErr = err
		in.metrics.stdinWriteFailed()
		in.logger.Warn("writing to agent stdin failed", "err", err)
		return in.writeFailure(err)
	}
	in.metrics.toAgent(len(data) + 1)
	return nil
}

func (in *instance) writeFailure(err error) error {
	// exited, not done: a client that has seen _adapter/agent_exited on the
	// stream must get agent_process_exited, and done closes only after it.
	in.mu.Lock()
	exited := in.exited
	in.mu.Unlock()
	if exited {
		return in.exitError()
	}
	return domain.StreamError("failed to write to agent stdin").Because(err)
}

// post forwards one client frame and, for a synchronous request, waits for
// the response. It returns the response bytes, or nil when the POST is
// answered with 202.
//
// async forces the 202 answer whatever the method; session is the ACP
// session the client sent the frame for, which routes its response.
func (in *instance) post(ctx context.Context, f domain.Frame, async bool, session string) (Answer, error) {
	select {
	case <-in.done:
		return Answer{}, in.exitError()
	default:
	}
	if f.Kind != domain.FrameRequest {
		return Answer{}, in.write(f.Data)
	}
	key := f.IDKey()
	async = async || in.opts.AsyncMethods[f.Method]
	var p *pendingRequest
	if async {
		// Answered on the stream, whenever: never recycled. Its id is a
		// copy: f.ID points into the POST's body, which would otherwise
		// stay in memory, uncharged, until the agent answers.
		p = &pendingRequest{id: bytes.Clone(f.ID), async: true, session: session, ch: make(chan pendingResult, 1)}
	} else {
		p = in.newPending(f.ID, session)
	}
	in.mu.Lock()
	if in.exited {
		in.mu.Unlock()
		return Answer{}, in.exitError()
	}
	if _, dup := in.pending[key]; dup {
		in.mu.Unlock()
		return Answer{}, domain.Conflict("request id " + shortID(f.ID) + " is already in flight on server '" + in.id + "'")
	}
	if len(in.pending) >= MaxPendingRequests || in.idBytes+len(key) > MaxPendingIDBytes {
		n := len(in.pending)
		in.mu.Unlock()
		if len(key) > MaxPendingIDBytes {
			return Answer{}, domain.InvalidRequest("request id is longer than %d bytes", MaxPendingIDBytes)
		}
		return Answer{}, domain.TooManyRequests(fmt.Sprintf("%d requests to server '%s' are waiting for the agent's answer (at most %d, their ids at most %d bytes together)", n, in.id, MaxPendingRequests, MaxPendingIDBytes), MaxPendingRequests)
	}
	in.pending[key] = p
	in.idBytes += len(key)
	in.mu.Unlock()

	if err := in.write(f.Data); err != nil {
		in.forget(key, p)
		return Answer{}, err
	}
	if p.async {
		return Answer{}, nil
	}

	var timeout <-chan time.Time
	if in.opts.RequestTimeout > 0 {
		if p.timer == nil {
			p.timer = time.NewTimer(in.opts.RequestTimeout)
		} else {
			p.timer.Reset(in.opts.RequestTimeout)
		}
		timeout = p.timer.C
	}
	select {
	case r := <-p.ch:
		in.recycle(p)
		if r.err != nil {
			return Answer{}, r.err
		}
		// Flush barrier: readers connected now see every earlier event
		// before the client sees this result.
		in.log.WaitFlushed(ctx, r.seq-1, in.opts.BarrierTimeout)
		return Answer{Data: r.data, EventID: r.seq}, nil
	case <-timeout:
		in.forget(key, p)
		return Answer{}, domain.Timeout("timed out waiting for agent response")
	case <-ctx.Done():
		in.forget(key, p)
		return Answer{}, ctx.Err()
	}
}

// shortID is a request id as an error message shows it: at most 64 bytes.
func shortID(id []byte) string {
	if len(id) > 64 {
		return string(id[:64]) + "…"
	}
	return string(id)
}

// forget drops a pending request that will not be waited for; its response,
// if it ever comes, still goes to the stream. A synchronous request taken
// out of the table here can receive nothing more, and is recycled.
func (in *instance) forget(key string, p *pendingRequest) {
	in.mu.Lock()
	mine := in.pending[key] == p
	if mine {
		delete(in.pending, key)
		in.idBytes -= len(key)
	}
	in.mu.Unlock()
	if mine && !p.async {
		in.recycle(p)
	}
}

// stop ends the instance: the process group is stopped (SIGTERM, then
// SIGKILL after the grace period), pending requests fail, streams end.
//
// With drain (a DELETE), the streams end only after their readers have
// had what the exit appended: the JSON-RPC error of each asynchronous
// request still pending and _adapter/agent_exited (bounded by the flush
// barrier's timeout, so a reader that takes nothing cannot hold the
// DELETE). A client whose prompt was running then sees it fail; ended
// first, its stream took the errors with it, and the official client,
// which answers a prompt only from the stream, waited for it forever.
// Without drain (the daemon stopping) the streams end at once.
func (in *instance) stop(ctx context.Context, drain bool) {
	if !drain {
		in.log.Close()
	}
	sctx, cancel := context.WithTimeout(ctx, in.opts.StopGrace)
	defer cancel()
	if err := in.proc.Stop(sctx); err != nil {
		in.logger.Warn("stopping agent failed", "err", err)
	}
	<-in.done
	if drain {
		in.log.WaitFlushed(ctx, in.log.Stats().LastEventID, in.opts.BarrierTimeout)
		in.log.Close()
	}
}

// ServerInfo describes an instance for GET /v1/acp.
type ServerInfo struct {
	ServerID        string `json:"serverId"`
	Agent           string `json:"agent"`
	CreatedAtMs     int64  `json:"createdAtMs"`
	PID             int    `json:"pid"`
	State           string `json:"state"`
	ExitCode        *int   `json:"exitCode,omitempty"`
	PendingRequests int    `json:"pendingRequests"`
	Subscribers     int    `json:"subscribers"`
	LastEventID     uint64 `json:"lastEventId"`
	BufferedEvents  int    `json:"bufferedEvents"`
	BufferedBytes   int64  `json:"bufferedBytes"`
}

func (in *instance) info() ServerInfo {
	st := in.log.Stats()
	in.mu.Lock()
	defer in.mu.Unlock()
	state := "running"
	if in.exited {
		state = "exited"
	}
	return ServerInfo{
		ServerID:        in.id,
		Agent:           in.agent,
		CreatedAtMs:     in.createdAt.UnixMilli(),
		PID:             in.proc.PID(),
		State:           state,
		ExitCode:        in.status.Code,
		PendingRequests: len(in.pending),
		Subscribers:     st.Readers,
		LastEventID:     st.LastEventID,
		BufferedEvents:  st.Events,
		BufferedBytes:   st.Bytes,
	}
}

// codeOrNil logs an exit code, or nil after a signal.
func codeOrNil(c *int) any {
	if c == nil {
		return nil
	}
	return *c
}
