package acp

import (
	"bytes"
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/app/internal/seqring"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
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

// slot is what the log keeps per event besides its payload: the payload's
// length and its stream (an index into the log's stream names, which an
// event would otherwise hold a string header for). Eight bytes, within
// eventOverhead. Where a payload is in the spool follows from the lengths:
// kept payloads are contiguous, the newest ending at the spool's head (see
// oldestPos and Cursor.posOf).
type slot struct {
	n      uint32
	stream uint32
}

func slotCost(s *slot) int64 { return int64(s.n) + eventOverhead }

// readBatch bounds the payload bytes one Read copies back from the spool's
// file (one event at least): what a reader catching up holds at a time.
const readBatch = 32 << 10

// EventLog is an instance's replay buffer and fan-out in one: the most recent
// events up to a byte budget, which every reader reads at its own position
// through a Cursor. There are no per-reader queues: appending never waits
// for a reader, and a reader that falls behind the buffer learns so through
// a gap instead of slowing the agent down.
//
// Payloads live in a seqring.Spool: the newest in memory, the older ones,
// given a ports.Spill, in a file of the log's own that the page cache
// holds. Readers at the head of the log get slices that alias the log's
// memory without copying; a reader that fell behind gets a copy read back
// from the file, valid until its next Read.
//
// The budget is strict: an event larger than the whole log is never
// buffered. It goes to the readers registered when it arrives (each holds
// it until it reads it) and leaves at once, taking every older event with
// it; a reader that comes later, or was behind, gets a gap.
type EventLog struct {
	mu        sync.Mutex
	ring      seqring.Ring[slot] // the buffered events, oldest first
	spool     seqring.Spool      // their payloads
	streams   []string           // stream names by slot.stream; 0 is ""
	streamIdx map[string]uint32
	size      atomic.Int64 // ring.Bytes(), readable without mu (by the replay pool)
	max       int64
	pool      *seqring.Pool // the budget all logs share (--replay-total); nil for none
	wake      seqring.Wake  // on append or close
	closed    bool
	cursors   map[*Cursor]struct{}
	ackWake   seqring.Wake // on a cursor's ack or close
	gaps      atomic.Uint64
}

// NewEventLog returns a log that keeps at most maxBytes of recent events,
// in memory.
func NewEventLog(maxBytes int64) *EventLog { return newEventLog(maxBytes, nil, nil) }

// newEventLog returns a log of maxBytes whose older payloads go to a file
// of spill (nil: memory only); onError hears of the file failing.
func newEventLog(maxBytes int64, spill ports.Spill, onError func(error)) *EventLog {
	return &EventLog{
		max:     maxBytes,
		ring:    seqring.New(slotCost),
		spool:   seqring.NewSpool(spill, maxBytes, onError),
		streams: []string{""},
		cursors: map[*Cursor]struct{}{},
	}
}

// Append adds a copy of data as the next event and wakes every waiting
// reader. It never blocks on readers. It returns the event's sequence
// number.
func (l *EventLog) Append(data []byte) uint64 { return l.AppendTo(data, "") }

// AppendTo is Append for an event routed to a stream (see Event.Stream).
func (l *EventLog) AppendTo(data []byte, stream string) uint64 {
	seq, _ := l.appendTo(data, stream, false, true)
	return seq
}

// appendLine appends a copy of data (owned: data itself, which the caller
// gives up), waking the readers unless quiet (the caller then wakes them
// with Wake once it has done what should be readied first). It returns the
// event's sequence number and its stored bytes, which never change.
func (l *EventLog) appendLine(data []byte, stream string, owned, quiet bool) (uint64, []byte) {
	return l.appendTo(data, stream, owned, !quiet)
}

// Wake wakes every waiting reader (after a quiet append), and writes what
// the quiet append left for the spill file: the caller readied what came
// first without waiting for the disk.
func (l *EventLog) Wake() {
	l.mu.Lock()
	l.wake.Notify()
	job, flush := l.spool.TakeFlush()
	l.mu.Unlock()
	if flush {
		l.flush(job)
	}
}

func (l *EventLog) appendTo(data []byte, stream string, owned, wake bool) (uint64, []byte) {
	l.mu.Lock()
	before := l.ring.Bytes()
	seq := l.ring.Next()
	if int64(len(data))+eventOverhead > l.max || len(data) > math.MaxUint32 {
		// Too big for replay: straight to the readers there are now; every
		// older event leaves with it.
		if !owned {
			data = bytes.Clone(data)
		}
		ev := &Event{Seq: seq, Data: data, Stream: stream}
		l.ring.Skip()
		l.spool.Drop(l.spool.Head())
		for c := range l.cursors {
			c.held = ev
		}
	} else {
		_, data = l.spool.Append(data, owned)
		l.ring.Push(slot{n: uint32(len(data)), stream: l.streamIndex(stream)})
		l.ring.Trim(l.max, 0)
		l.dropSpool()
	}
	l.size.Store(l.ring.Bytes())
	if wake {
		l.wake.Notify()
	}
	delta := l.ring.Bytes() - before
	var job seqring.FlushJob
	var flush bool
	if wake {
		job, flush = l.spool.TakeFlush()
	}
	l.mu.Unlock()
	l.pool.Add(delta)
	if flush {
		l.flush(job)
	}
	return seq, data
}

// streamIndex is the index of a stream name, added at its first event. A
// connection's streams are its open sessions (at most MaxSessionStreams
// and two more), so the table stays small.
func (l *EventLog) streamIndex(stream string) uint32 {
	if stream == "" {
		return 0
	}
	if i, ok := l.streamIdx[stream]; ok {
		return i
	}
	if l.streamIdx == nil {
		l.streamIdx = map[string]uint32{}
	}
	i := uint32(len(l.streams))
	l.streams = append(l.streams, stream)
	l.streamIdx[stream] = i
	return i
}

// dropSpool tells the spool which payloads the kept events still need.
func (l *EventLog) dropSpool() { l.spool.Drop(l.oldestPos()) }

// oldestPos is where the oldest kept payload starts: the kept payloads end
// at the spool's head, and each event costs its length plus eventOverhead.
func (l *EventLog) oldestPos() int64 {
	return l.spool.Head() - (l.ring.Bytes() - eventOverhead*int64(l.ring.Len()))
}

// posOf is where event seq's payload starts (oldest <= seq < next),
// summing lengths from the nearer end of the log.
func (l *EventLog) posOf(seq uint64) int64 {
	if seq-l.ring.Oldest() <= l.ring.Next()-seq {
		pos := l.oldestPos()
		for s := l.ring.Oldest(); s < seq; s++ {
			pos += int64(l.ring.At(s).n)
		}
		return pos
	}
	pos := l.spool.Head()
	for s := l.ring.Next() - 1; s >= seq; s-- {
		pos -= int64(l.ring.At(s).n)
	}
	return pos
}

// flush writes the spool's full segments to its file, without the lock:
// readers meanwhile still find them in memory.
func (l *EventLog) flush(job seqring.FlushJob) {
	for more := true; more; {
		err := job.Write()
		l.mu.Lock()
		l.spool.Flushed(job, err)
		job, more = l.spool.TakeFlush()
		l.mu.Unlock()
	}
}

// EvictFor drops the oldest events until at least want bytes are freed or
// the log is empty, for the shared budget (seqring.Member). It returns the
// bytes freed.
func (l *EventLog) EvictFor(want int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	freed := l.ring.Free(want)
	l.dropSpool()
	l.size.Store(l.ring.Bytes())
	return freed
}

// Release drops every buffered event and leaves the shared budget: the log
// of an instance that is forgotten. Readers still open get a gap.
func (l *EventLog) Release() {
	l.mu.Lock()
	freed := l.ring.Bytes()
	l.ring.Reset()
	l.spool.Reset()
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
	// Memory is what the payloads take in memory (the rest of Bytes is
	// in the spool's file).
	Memory int64
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
		Memory:      l.spool.Memory(),
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
	// spilled holds the payloads last read back from the spool's file;
	// the events Read returned alias it until the next Read.
	spilled []byte
	waiter  seqring.Waiter
	// pos is where event posSeq's payload starts, as far as the last Read
	// knew: the next event's, found without a walk while it is kept.
	pos    int64
	posSeq uint64
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
// before the events that follow it. The events' Data is valid until the
// next Read on the cursor.
func (c *Cursor) Read(ctx context.Context, buf []Event, max int, idle time.Duration) ([]Event, *Gap, error) {
	var gap *Gap
	var err error
	if !seqring.Follow(ctx, idle, &c.waiter, func() (ready bool) {
		buf, gap, ready, err = c.poll(buf, max)
		return ready
	}) {
		return buf, nil, ctx.Err() // nil: idle passed
	}
	return buf, gap, err
}

// poll takes what the cursor can have now (events, a gap, the log's end),
// or queues the cursor for the log's next change and reports not ready.
func (c *Cursor) poll(buf []Event, max int) ([]Event, *Gap, bool, error) {
	l := c.log
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return buf, nil, true, ErrStreamClosed
		}
		if h := c.held; h != nil {
			if c.next < h.Seq {
				g := &Gap{LastEventID: c.next - 1, OldestAvailable: h.Seq}
				c.next = h.Seq
				l.mu.Unlock()
				l.gaps.Add(1)
				return buf, g, true, nil
			}
			c.held = nil
			if c.next == h.Seq {
				c.next++
				l.mu.Unlock()
				return append(buf, *h), nil, true, nil
			}
		}
		if oldest := l.ring.Oldest(); c.next < oldest {
			g := &Gap{LastEventID: c.next - 1, OldestAvailable: oldest}
			c.next = oldest
			l.mu.Unlock()
			l.gaps.Add(1)
			return buf, g, true, nil
		}
		if c.next >= l.ring.Next() {
			l.wake.Add(&c.waiter)
			l.mu.Unlock()
			return buf, nil, false, nil
		}
		if c.posSeq != c.next {
			c.pos, c.posSeq = l.posOf(c.next), c.next
		}
		first := l.ring.At(c.next)
		if _, inMemory := l.spool.Slice(c.pos, int(first.n)); inMemory {
			// At the head of the log: the events alias its memory.
			pos := c.pos
			for seq := c.next; seq < l.ring.Next() && len(buf) < max; seq++ {
				s := l.ring.At(seq)
				data, ok := l.spool.Slice(pos, int(s.n))
				if !ok {
					break
				}
				buf = append(buf, Event{Seq: seq, Data: data, Stream: l.streams[s.stream]})
				pos += int64(s.n)
			}
			c.next = buf[len(buf)-1].Seq + 1
			c.pos, c.posSeq = pos, c.next
			l.mu.Unlock()
			c.spilled = nil // caught up: the copy goes
			return buf, nil, true, nil
		}
		// Behind, in the file: a run of consecutive payloads is read back
		// without the lock, then kept only if none of them was evicted
		// meanwhile (an evicted position may be rewritten or given back).
		from, to, start, end := c.next, c.next, c.pos, c.pos+int64(first.n)
		for seq := c.next + 1; seq < l.ring.Next() && int(seq-from) < max; seq++ {
			s := l.ring.At(seq)
			if end-start+int64(s.n) > readBatch {
				break
			}
			if _, inMemory := l.spool.Slice(end, int(s.n)); inMemory {
				break
			}
			to, end = seq, end+int64(s.n)
		}
		file := l.spool.Reader()
		l.mu.Unlock()
		if n := int(end - start); cap(c.spilled) < n {
			c.spilled = make([]byte, n)
		}
		c.spilled = c.spilled[:end-start]
		err := file.ReadSpilled(c.spilled, start)
		l.mu.Lock()
		if l.closed || l.ring.Oldest() > from {
			l.mu.Unlock()
			continue // closed, or evicted meanwhile: a gap next
		}
		if err != nil {
			// The file lost what it held: those events are gone, and the
			// reader is told so by a gap.
			lost := l.spool.Lose(err)
			pos := l.oldestPos()
			freed := l.ring.DropWhile(func(s *slot) bool {
				pos += int64(s.n)
				return pos-int64(s.n) < lost
			})
			l.dropSpool()
			l.size.Store(l.ring.Bytes())
			l.mu.Unlock()
			l.pool.Add(-freed)
			continue
		}
		off := int64(0)
		for seq := from; seq <= to; seq++ {
			s := l.ring.At(seq)
			buf = append(buf, Event{Seq: seq, Data: c.spilled[off : off+int64(s.n) : off+int64(s.n)], Stream: l.streams[s.stream]})
			off += int64(s.n)
		}
		c.next = to + 1
		c.pos, c.posSeq = end, c.next
		l.mu.Unlock()
		return buf, nil, true, nil
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
	var waiting []*Cursor
	first := true
	var r seqring.Waiter
	return seqring.Follow(ctx, timeout, &r, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		if first {
			first = false
			for c := range l.cursors {
				if c.flushed.Load() < seq {
					waiting = append(waiting, c)
				}
			}
			if len(waiting) == 0 {
				return true
			}
		}
		remaining := waiting[:0]
		for _, c := range waiting {
			if _, live := l.cursors[c]; live && c.flushed.Load() < seq {
				remaining = append(remaining, c)
			}
		}
		waiting = remaining
		if len(waiting) == 0 || l.closed {
			return true
		}
		l.ackWake.Add(&r)
		return false
	})
}

// newPooledLog returns an event log of maxBytes that draws on pool, the
// budget all event logs share (--replay-total), and spills to spill.
func newPooledLog(pool *seqring.Pool, maxBytes int64, spill ports.Spill, onError func(error)) *EventLog {
	l := newEventLog(maxBytes, spill, onError)
	l.pool = pool
	pool.Join(l)
	return l
}

// Size is what the log holds (seqring.Member).
func (l *EventLog) Size() int64 { return l.size.Load() }
