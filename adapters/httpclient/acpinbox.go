package httpclient

import (
	"context"
	"io"
	"sync"
)

const (
	maxQueued      = 1024     // delivered lines waiting for Read before the stream pauses
	maxQueuedBytes = 64 << 20 // ... or their bytes
)

// inbox is an ACPConn's queue of agent lines waiting for Read, in delivery
// order, and the end of it: once ended, Read returns what is queued, then
// the error.
//
// It owns no goroutine. The pending table pushes into it (the receiver's
// events, and the answers the transport gives itself, all through the
// table's lock); Read takes from it on the caller's goroutine. A full inbox
// never blocks a push: the receiver asks waitSpace before reading more
// from the stream, so a reader that stops reading slows the stream down
// (the daemon's replay buffer absorbs it) instead of growing this process.
type inbox struct {
	rmu sync.Mutex // one Read at a time

	mu      sync.Mutex
	lines   [][]byte // complete lines, without their newline
	partial []byte   // the rest of a line a Read did not take whole
	size    int      // bytes in lines
	ended   bool     // no more lines will be queued
	err     error    // what Read returns after the last line; nil: io.EOF
	wake    chan struct{}
	space   chan struct{}
}

func newInbox() *inbox {
	return &inbox{wake: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

// push queues lines for Read, in order; after end they are dropped.
func (q *inbox) push(lines ...[]byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended {
		return
	}
	q.lines = append(q.lines, lines...)
	for _, l := range lines {
		q.size += len(l)
	}
	signal(q.wake)
}

// end stops queueing: Read returns what is queued, then err (io.EOF when
// nil). The first call wins; it reports whether it was this one.
func (q *inbox) end(err error) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended {
		return false
	}
	q.ended, q.err = true, err
	signal(q.wake)
	return true
}

// result is the error the inbox ended with, and whether it ended.
func (q *inbox) result() (ended bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ended, q.err
}

// busy reports whether lines wait for Read.
func (q *inbox) busy() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.lines) > 0 || len(q.partial) > 0
}

// read fills p with queued lines, each followed by "\n", waiting for one
// when none is queued. It returns ErrClosed once closed is closed.
func (q *inbox) read(p []byte, closed <-chan struct{}) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	q.rmu.Lock()
	defer q.rmu.Unlock()
	for {
		select {
		case <-closed:
			return 0, ErrClosed
		default:
		}
		n, ended, err := q.take(p)
		if n > 0 {
			signal(q.space)
			return n, nil
		}
		if ended {
			if err == nil {
				err = io.EOF
			}
			return 0, err
		}
		select {
		case <-q.wake:
		case <-closed:
		}
	}
}

// take copies queued lines into p.
func (q *inbox) take(p []byte) (n int, ended bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for n < len(p) {
		if len(q.partial) == 0 {
			if len(q.lines) == 0 {
				break
			}
			q.size -= len(q.lines[0])
			q.partial = append(q.lines[0], '\n')
			q.lines[0] = nil
			q.lines = q.lines[1:]
			if len(q.lines) == 0 {
				q.lines = nil
			}
		}
		c := copy(p[n:], q.partial)
		q.partial = q.partial[c:]
		n += c
	}
	return n, q.ended, q.err
}

// full reports whether the queue is at its bounds.
func (q *inbox) full() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.lines) >= maxQueued || q.size >= maxQueuedBytes
}

// waitSpace returns once the queue is under its bounds, or ctx is done.
func (q *inbox) waitSpace(ctx context.Context) {
	for {
		if !q.full() {
			return
		}
		select {
		case <-q.space:
		case <-ctx.Done():
			return
		}
	}
}

// signal wakes the one waiter of a capacity-1 channel, if any.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
