package processes

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/app/internal/seqring"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// chunkOverhead is what one kept chunk is charged on top of its bytes: its
// header in the ring and the framing of its entry, so a flood of one-byte
// reads cannot hold unbounded memory.
const chunkOverhead = 64

// outputLog is a process's output: the most recent chunks up to a byte
// budget, each with the next sequence number. Readers keep their own
// position (the last sequence they read) and read after it; there is no
// per-reader state here, so appending never waits for a reader, and a
// reader that falls behind the budget learns of it through a gap.
//
// The same storage as the ACP replay buffer (app/acp), app/internal/seqring,
// without its flush barrier, which a process's output does not need.
//
// Every log draws on the daemon-wide pool (--process-log-total): past it
// the oldest chunks of the largest logs go first, and their readers get a
// gap, as ACP replay buffers do under --replay-total.
type outputLog struct {
	mu     sync.Mutex
	ring   seqring.Ring[Chunk]
	size   atomic.Int64 // ring.Bytes(), readable without mu (by the pool)
	max    int64
	pool   *seqring.Pool // nil: no shared budget
	wake   seqring.Wake  // on append or close
	closed bool
	gone   bool // released: left the pool for good
	gaps   atomic.Uint64
}

func newOutputLog(maxBytes int64, pool *seqring.Pool) *outputLog {
	l := &outputLog{max: maxBytes, ring: seqring.New(chunkCost), pool: pool}
	pool.Join(l)
	return l
}

func chunkCost(c *Chunk) int64 {
	return int64(len(c.Data)) + chunkOverhead
}

// append adds c (its Seq is assigned) and wakes readers. Chunks are
// immutable once appended; readers share them.
func (l *outputLog) append(c Chunk) {
	l.mu.Lock()
	if l.gone {
		l.mu.Unlock()
		return
	}
	before := l.ring.Bytes()
	c.Seq = l.ring.Next()
	l.ring.Push(c)
	l.ring.Trim(l.max, 1) // the newest chunk stays, even over the budget
	l.size.Store(l.ring.Bytes())
	l.wake.Notify()
	delta := l.ring.Bytes() - before
	l.mu.Unlock()
	l.pool.Add(delta)
}

// close ends every reader and frees what the log holds (the process was
// deleted or forgotten).
func (l *outputLog) close() {
	l.mu.Lock()
	l.closed = true
	l.gone = true
	freed := l.ring.Bytes()
	l.ring.Reset()
	l.size.Store(0)
	l.wake.Notify()
	l.mu.Unlock()
	l.pool.Leave(l, freed)
}

// Size is what the log holds (seqring.Member).
func (l *outputLog) Size() int64 { return l.size.Load() }

// EvictFor drops the oldest chunks until want bytes are freed or none is
// left, for the shared budget (seqring.Member).
func (l *outputLog) EvictFor(want int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	freed := l.ring.Free(want)
	l.size.Store(l.ring.Bytes())
	return freed
}

// errLogClosed is returned once the log is closed.
var errLogClosed = errors.New("process log closed")

// read appends to buf up to max chunks with a sequence greater than after.
// When after's successor was evicted it returns only a gap (the caller
// continues after gap.OldestAvailable-1). With nothing to read it queues
// r for the next append or close and reports not ready.
func (l *outputLog) read(after uint64, buf []Chunk, max int, r *seqring.Waiter) ([]Chunk, *domain.ProcessLogGap, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return buf, nil, true, errLogClosed
	}
	oldest := l.ring.Oldest()
	if after+1 < oldest {
		l.gaps.Add(1)
		return buf, &domain.ProcessLogGap{LastSequence: after, OldestAvailable: oldest}, true, nil
	}
	if after+1 < l.ring.Next() {
		return l.ring.AppendFrom(buf, after+1, max), nil, true, nil
	}
	l.wake.Add(r)
	return buf, nil, false, nil
}

// start is the sequence a reader without a position starts after.
func (l *outputLog) start() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ring.Oldest() - 1
}

// cursor is one reader's position in a log; owned by one goroutine.
type cursor struct {
	log    *outputLog
	after  uint64
	waiter seqring.Waiter
}

// cursorAfter starts a reader after sequence *after, or before the oldest
// kept chunk when after is nil; a position beyond the newest chunk starts
// with the next one.
func (l *outputLog) cursorAfter(after *uint64) *cursor {
	c := &cursor{log: l, after: l.start()}
	if after != nil {
		l.mu.Lock()
		c.after = min(*after, l.ring.Next()-1)
		l.mu.Unlock()
	}
	return c
}

// next returns the chunks after the cursor (up to max), a gap alone, or,
// waiting up to idle for one, nothing (idle passed). It fails with
// errLogClosed, or ctx's error once nothing is left to read.
func (c *cursor) next(ctx context.Context, buf []Chunk, max int, idle time.Duration) ([]Chunk, *domain.ProcessLogGap, error) {
	var gap *domain.ProcessLogGap
	var err error
	if !seqring.Follow(ctx, idle, &c.waiter, func() (ready bool) {
		buf, gap, ready, err = c.log.read(c.after, buf, max, &c.waiter)
		switch {
		case gap != nil:
			c.after = gap.OldestAvailable - 1
		case len(buf) > 0:
			c.after = buf[len(buf)-1].Seq
		}
		return ready
	}) {
		return buf, nil, ctx.Err() // nil: idle passed
	}
	return buf, gap, err
}
