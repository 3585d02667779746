package acp

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/app/internal/seqring"
)

// eventOverhead is what one buffered event is charged on top of its payload:
// the Event header in the ring plus the SSE framing written per event. It
// keeps a flood of tiny events from holding unbounded memory.
const eventOverhead = 64

// Event is one message of an instance's stream: its sequence number and the
// exact bytes the agent wrote (or an _adapter/* notification).
type Event struct {
	Seq  uint64
	Data []byte
	// Stream is which stream of an ACP standard-transport connection
	// carries the event (see Conn): "" the connection's own stream, else a
	// session id, or noStream. Other readers ignore it.
	Stream string
}

// EventLog is an instance's replay buffer and fan-out in one: the most recent
// events up to a byte budget, which every reader reads at its own position
// through a Cursor. There are no per-reader queues: appending never waits
// for a reader, and a reader that falls behind the buffer learns so through
// a gap instead of slowing the agent down.
//
// Event payloads are immutable once appended, so readers get slices that
// alias the log's storage without copying.
//
// The budget is strict: an event larger than the whole log is never
// buffered. It goes to the readers registered when it arrives (each holds
// it until it reads it) and leaves at once, taking every older event with
// it; a reader that comes later, or was behind, gets a gap.
type EventLog struct {
	mu      sync.Mutex
	ring    seqring.Ring[Event] // the buffered events, oldest first
	size    atomic.Int64        // ring.Bytes(), readable without mu (by the replay pool)
	max     int64
	pool    *seqring.Pool // the budget all logs share (--replay-total); nil for none
	wake    seqring.Wake  // on append or close
	closed  bool
	cursors map[*Cursor]struct{}
	ackWake seqring.Wake // on a cursor's ack or close
	gaps    atomic.Uint64
}

// NewEventLog returns a log that keeps at most maxBytes of recent events.
func NewEventLog(maxBytes int64) *EventLog {
	return &EventLog{max: maxBytes, ring: seqring.New(eventCost), cursors: map[*Cursor]struct{}{}}
}

func eventCost(e *Event) int64 { return int64(len(e.Data)) + eventOverhead }

// Append adds data as the next event and wakes every waiting reader. It
// never blocks on readers. It returns the event's sequence number.
func (l *EventLog) Append(data []byte) uint64 { return l.AppendTo(data, "") }

// AppendTo is Append for an event routed to a stream (see Event.Stream).
func (l *EventLog) AppendTo(data []byte, stream string) uint64 {
	return l.appendTo(data, stream, true)
}

// AppendQuiet is AppendTo without waking the readers: the caller wakes
// them with Wake once it has done what should be readied first.
func (l *EventLog) AppendQuiet(data []byte, stream string) uint64 {
	return l.appendTo(data, stream, false)
}

// Wake wakes every waiting reader (after AppendQuiet).
func (l *EventLog) Wake() {
	l.mu.Lock()
	l.wake.Notify()
	l.mu.Unlock()
}

func (l *EventLog) appendTo(data []byte, stream string, wake bool) uint64 {
	l.mu.Lock()
	before := l.ring.Bytes()
	seq := l.ring.Next()
	ev := Event{Seq: seq, Data: data, Stream: stream}
	if eventCost(&ev) > l.max {
		// Too big for replay: straight to the readers there are now; every
		// older event leaves with it.
		l.ring.Skip()
		for c := range l.cursors {
			c.held = &ev
		}
	} else {
		l.ring.Push(ev)
		l.ring.Trim(l.max, 0)
	}
	l.size.Store(l.ring.Bytes())
	if wake {
		l.wake.Notify()
	}
	delta := l.ring.Bytes() - before
	l.mu.Unlock()
	l.pool.Add(delta)
	return seq
}

// EvictFor drops the oldest events until at least want bytes are freed or
// the log is empty, for the shared budget (seqring.Member). It returns the
// bytes freed.
func (l *EventLog) EvictFor(want int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	freed := l.ring.Free(want)
	l.size.Store(l.ring.Bytes())
	return freed
}

// Release drops every buffered event and leaves the shared budget: the log
// of an instance that is forgotten. Readers still open get a gap.
func (l *EventLog) Release() {
	l.mu.Lock()
	freed := l.ring.Bytes()
	l.ring.Reset()
	l.size.Store(0)
	l.mu.Unlock()
	l.pool.Leave(l, freed)
}

// Close ends every reader and releases flush barriers. Appending after
// Close is allowed and harmless.
func (l *EventLog) Close() {
	l.mu.Lock()
	l.closed = true
	l.wake.Notify()
	l.ackWake.Notify()
	l.mu.Unlock()
}

// LogStats is a snapshot for listings and metrics.
type LogStats struct {
	LastEventID uint64
	Events      int
	Bytes       int64
	Readers     int
	Gaps        uint64
}

// Stats returns a consistent snapshot.
func (l *EventLog) Stats() LogStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LogStats{
		LastEventID: l.ring.Next() - 1,
		Events:      l.ring.Len(),
		Bytes:       l.ring.Bytes(),
		Readers:     len(l.cursors),
		Gaps:        l.gaps.Load(),
	}
}

// Cursor is one reader's position in an EventLog. It is owned by a single
// goroutine (the stream writer); only its flushed mark is read by others.
type Cursor struct {
	log     *EventLog
	next    uint64        // next sequence number to read
	flushed atomic.Uint64 // every event up to this seq has reached the peer
	// held is an event too big for the log, kept for this reader alone
	// until it reads it; guarded by the log's mu.
	held *Event
}

// Subscribe registers a reader. With after == nil it starts at the oldest
// buffered event; otherwise at the first event with a sequence number greater
// than *after. A position that is no longer buffered yields a gap on the
// first Read; one beyond the newest event starts with the next live event.
func (l *EventLog) Subscribe(after *uint64) *Cursor {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := &Cursor{log: l}
	switch {
	case after == nil:
		c.next = l.ring.Oldest()
	case *after >= l.ring.Next():
		c.next = l.ring.Next()
	default:
		c.next = *after + 1
	}
	c.flushed.Store(c.next - 1)
	l.cursors[c] = struct{}{}
	return c
}

// Gap says the reader's position was evicted: events LastEventID+1 up to
// OldestAvailable-1 are gone. The cursor has already moved past them.
type Gap struct {
	LastEventID     uint64
	OldestAvailable uint64
}

// ErrStreamClosed is returned by Cursor.Read once the log is closed: the
// instance was deleted or the daemon is stopping.
var ErrStreamClosed = errors.New("stream closed")

// Read appends up to max events at the cursor's position to buf and advances
// the cursor. When nothing is buffered it waits until an event arrives, ctx
// is done, the log is closed, or idle passes (then it returns no events and
// no error, so the caller can send a heartbeat). A gap is returned alone,
// before the events that follow it.
func (c *Cursor) Read(ctx context.Context, buf []Event, max int, idle time.Duration) ([]Event, *Gap, error) {
	var timer *time.Timer
	for {
		l := c.log
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return buf, nil, ErrStreamClosed
		}
		if h := c.held; h != nil {
			if c.next < h.Seq {
				g := &Gap{LastEventID: c.next - 1, OldestAvailable: h.Seq}
				c.next = h.Seq
				l.mu.Unlock()
				l.gaps.Add(1)
				return buf, g, nil
			}
			c.held = nil
			if c.next == h.Seq {
				c.next++
				l.mu.Unlock()
				return append(buf, *h), nil, nil
			}
		}
		if oldest := l.ring.Oldest(); c.next < oldest {
			g := &Gap{LastEventID: c.next - 1, OldestAvailable: oldest}
			c.next = oldest
			l.mu.Unlock()
			l.gaps.Add(1)
			return buf, g, nil
		}
		if c.next < l.ring.Next() {
			buf = l.ring.AppendFrom(buf, c.next, max)
			c.next = buf[len(buf)-1].Seq + 1
			l.mu.Unlock()
			return buf, nil, nil
		}
		wake := l.wake.C()
		l.mu.Unlock()

		if timer == nil {
			timer = time.NewTimer(idle)
			defer timer.Stop()
		}
		select {
		case <-wake:
		case <-timer.C:
			return buf, nil, nil
		case <-ctx.Done():
			return buf, nil, ctx.Err()
		}
	}
}

// Ack records that every event up to seq has been flushed to the peer, and
// wakes flush barriers waiting on this reader.
func (c *Cursor) Ack(seq uint64) {
	c.flushed.Store(seq)
	l := c.log
	l.mu.Lock()
	l.ackWake.Notify()
	l.mu.Unlock()
}

// Flushed is the last sequence number acknowledged with Ack.
func (c *Cursor) Flushed() uint64 { return c.flushed.Load() }

// Close unregisters the reader.
func (c *Cursor) Close() {
	l := c.log
	l.mu.Lock()
	delete(l.cursors, c)
	c.held = nil
	l.ackWake.Notify()
	l.mu.Unlock()
}

// WaitFlushed is the flush barrier: it waits until every reader registered
// now has flushed every event up to seq (or left), or until timeout or ctx.
// It reports whether the barrier was met.
func (l *EventLog) WaitFlushed(ctx context.Context, seq uint64, timeout time.Duration) bool {
	l.mu.Lock()
	waiting := make([]*Cursor, 0, len(l.cursors))
	for c := range l.cursors {
		if c.flushed.Load() < seq {
			waiting = append(waiting, c)
		}
	}
	l.mu.Unlock()
	if len(waiting) == 0 {
		return true
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		l.mu.Lock()
		remaining := waiting[:0]
		for _, c := range waiting {
			if _, live := l.cursors[c]; live && c.flushed.Load() < seq {
				remaining = append(remaining, c)
			}
		}
		waiting = remaining
		if len(waiting) == 0 || l.closed {
			l.mu.Unlock()
			return true
		}
		wake := l.ackWake.C()
		l.mu.Unlock()
		select {
		case <-wake:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// newPooledLog returns an event log of maxBytes that draws on pool, the
// budget all event logs share (--replay-total).
func newPooledLog(pool *seqring.Pool, maxBytes int64) *EventLog {
	l := NewEventLog(maxBytes)
	l.pool = pool
	pool.Join(l)
	return l
}

// Size is what the log holds (seqring.Member).
func (l *EventLog) Size() int64 { return l.size.Load() }
