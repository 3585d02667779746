package httpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// receiver reads an ACPConn's event stream (GET /v1/acp/{id}), which
// carries every agent message, responses included, numbered in the order
// the agent wrote them. It owns one goroutine, started once the instance is
// known to exist (start), which alone touches lastSeq: it reconnects with
// Last-Event-ID after a cut (up to ReconnectTimeout of failures), drops
// events it already delivered, hands the rest to the pending table in
// order, reports replay gaps to it, and ends the connection when the agent
// exits or the instance is gone. It pauses while the inbox is full.
type receiver struct {
	c         *Client
	serverID  string
	reconnect time.Duration // ACPOptions.ReconnectTimeout
	log       *slog.Logger
	ctx       context.Context // the connection's
	in        *inbox
	pending   *pendingTable
	fail      func(error) // ends the connection

	startOnce sync.Once
	started   chan struct{} // closed once the instance is known to exist
	done      chan struct{} // closed when run has returned

	lastSeq uint64 // the last event id delivered; run's alone once started
}

func newReceiver(a *ACPConn, lastSeq uint64) *receiver {
	return &receiver{
		c: a.c, serverID: a.serverID, reconnect: a.opts.ReconnectTimeout, log: a.log,
		ctx: a.ctx, in: a.in, pending: a.pending, fail: a.fail,
		started: make(chan struct{}), done: make(chan struct{}), lastSeq: lastSeq,
	}
}

// start lets the stream connect: the instance exists. Idempotent.
func (r *receiver) start() { r.startOnce.Do(func() { close(r.started) }) }

// isStarted reports whether start was called.
func (r *receiver) isStarted() bool {
	select {
	case <-r.started:
		return true
	default:
		return false
	}
}

// wait returns once run has returned.
func (r *receiver) wait() { <-r.done }

var errStopStream = errors.New("stop stream")

// run reads the stream until the connection ends.
func (r *receiver) run() {
	defer close(r.done)
	select {
	case <-r.started:
	case <-r.ctx.Done():
		return
	}
	var downSince time.Time
	backoff := 20 * time.Millisecond
	for {
		began := time.Now()
		alive, err := r.once()
		if r.ctx.Err() != nil {
			return
		}
		var p *Problem
		switch {
		case errors.As(err, &p) && (p.Status == http.StatusNotFound || p.Kind() == "session_not_found"):
			r.fail(fmt.Errorf("%w: %q (deleted, or the daemon restarted): %w", ErrInstanceGone, r.serverID, err))
			return
		case errors.As(err, &p) && p.Status/100 == 4:
			r.fail(fmt.Errorf("acp stream %q: %w", r.serverID, err))
			return
		case errors.Is(err, errStopStream):
			return
		case errors.Is(err, ErrSSEEventTooLarge):
			r.fail(fmt.Errorf("acp stream %q: %w", r.serverID, err)) // a reconnect would replay it
			return
		}
		switch {
		case !alive.IsZero():
			// The daemon was there until alive: the reconnect timeout
			// counts from then. A stream cut now counts from now; one
			// that fell silent counts from its last byte. A daemon that
			// answers and hangs up at once, over and over, still backs
			// off.
			downSince = alive
			if time.Since(began) > time.Second {
				backoff = 20 * time.Millisecond
			}
		case downSince.IsZero():
			downSince = began
		}
		if time.Since(downSince) > r.reconnect {
			r.fail(fmt.Errorf("%w for %v (event stream of %q: %v)", ErrDaemonUnreachable, r.reconnect, r.serverID, err))
			return
		}
		r.log.Warn("acp event stream lost; reconnecting", "err", err, "last_event_id", r.lastSeq)
		select {
		case <-time.After(backoff):
		case <-r.ctx.Done():
			return
		}
		backoff = min(backoff*2, time.Second)
	}
}

// once reads the stream from after the last delivered event until it
// ends. alive is when the daemon last showed life on it (its answer, or a
// byte of the stream); zero when it never answered. A wait longer than
// streamIdleTimeout, for the answer or for the next byte, ends the attempt
// (see silence).
func (r *receiver) once() (alive time.Time, err error) {
	w := watchSilence(r.ctx)
	defer w.stop()
	h := http.Header{}
	h.Set("Accept", "text/event-stream")
	h.Set("Last-Event-ID", strconv.FormatUint(r.lastSeq, 10))
	resp, err := r.c.raw(w.ctx, http.MethodGet, acpPath(r.serverID), nil, nil, "", h)
	if err != nil {
		return time.Time{}, w.err(err)
	}
	r.log.Debug("acp event stream connected", "last_event_id", r.lastSeq)
	defer resp.Body.Close()
	events := NewSSEReader(w.body(resp.Body), 0)
	for {
		ev, err := events.Next()
		if err != nil {
			if err == io.EOF {
				err = errors.New("stream ended")
			}
			return w.last, w.err(err)
		}
		if r.onEvent(ev) {
			return w.last, errStopStream
		}
		if r.in.full() {
			// The reader is behind: the stream waits (the daemon's
			// replay buffer holds what comes meanwhile), and the
			// silence is ours, not the daemon's.
			w.pause()
			r.in.waitSpace(r.ctx)
			w.resume()
		}
	}
}

// onEvent delivers one stream event; it reports whether the connection
// ended (the agent exited).
func (r *receiver) onEvent(ev SSEEvent) (stop bool) {
	f, err := domain.ParseFrame(ev.Data)
	if ev.ID == "" {
		if err == nil && f.Method == "_adapter/replay_gap" {
			// Events were lost: a pending request's response may have
			// been among them.
			r.log.Error("acp stream: events were lost (the reader fell behind the daemon's replay buffer)", "gap", string(ev.Data))
			r.pending.answerAll(ErrReplayGap.Error())
		}
		return false
	}
	seq, perr := strconv.ParseUint(ev.ID, 10, 64)
	if perr != nil || seq <= r.lastSeq {
		return false // a copy of an event already delivered
	}
	r.lastSeq = seq
	if err != nil {
		r.log.Warn("acp stream: event is not a JSON object; dropped", "event_id", seq)
		r.pending.passed(seq)
		return false
	}
	switch f.Method {
	case "_adapter/agent_exited":
		var m struct {
			Params AgentExitedError `json:"params"`
		}
		_ = json.Unmarshal(ev.Data, &m)
		r.fail(&m.Params)
		return true
	case "_adapter/invalid_stdout":
		r.log.Warn("agent wrote a line that is not JSON; dropped", "event", string(ev.Data))
		r.pending.passed(seq)
		return false
	}
	r.pending.deliver(f, ev.Data, seq)
	return false
}
