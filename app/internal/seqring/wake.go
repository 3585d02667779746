package seqring

import "time"

// Wake lets a log's readers wait for its next change: each waiting reader
// queues its Waiter (Add, under the owner's mutex, once it found nothing)
// and Notify wakes every queued one. Appending never waits for a reader
// this way. Guarded by the owner's mutex; the zero value is ready.
type Wake struct {
	q []*Waiter
}

// Waiter is one reader's means of waiting, made once per reader and reused
// by every wait: a channel that holds one wake-up and the reader's idle
// timer, so that a reader following a busy log allocates nothing per
// event. A wake-up left over from a wait that ended otherwise costs one
// extra poll. The zero value is ready.
type Waiter struct {
	ch     chan struct{}
	queued bool // in a Wake's queue; guarded by that owner's mutex
	timer  *time.Timer
}

// Add queues r for the next Notify. Call it under the owner's mutex.
func (w *Wake) Add(r *Waiter) {
	if r.ch == nil {
		r.ch = make(chan struct{}, 1)
	}
	if !r.queued {
		r.queued = true
		w.q = append(w.q, r)
	}
}

// Notify wakes every queued waiter.
func (w *Wake) Notify() {
	for i, r := range w.q {
		r.queued = false
		select {
		case r.ch <- struct{}{}:
		default: // one wake-up is pending already
		}
		w.q[i] = nil
	}
	w.q = w.q[:0]
}
