package seqring

import (
	"context"
	"time"
)

// Follow is the wait loop of every reader of a log: it calls poll until
// poll has something for the reader (events, a gap, the log's end: poll
// keeps it and reports true), waiting between calls for r's next wake-up
// otherwise (poll queues r with the log's Wake under the log's mutex
// before it reports false). It reports false when idle passes with nothing
// (the caller sends a heartbeat), or when ctx is done and one more poll
// found nothing: a reader whose request ended still gets what was already
// there, then ctx.Err() tells it to stop.
//
// r belongs to one reader at a time; its timer is armed only if the
// reader has to wait.
func Follow(ctx context.Context, idle time.Duration, r *Waiter, poll func() bool) bool {
	armed := false
	defer func() {
		if armed {
			r.timer.Stop()
		}
	}()
	for {
		if poll() {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if !armed {
			if r.timer == nil {
				r.timer = time.NewTimer(idle)
			} else {
				r.timer.Reset(idle)
			}
			armed = true
		}
		select {
		case <-r.ch:
		case <-r.timer.C:
			armed = false
			return false
		case <-ctx.Done():
		}
	}
}
