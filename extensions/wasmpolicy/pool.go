package wasmpolicy

import (
	"context"
	"sync"
)

// pool keeps ready instances of one policy. It starts instances on demand,
// up to a limit; a caller that finds none idle and the limit reached waits
// for one to be returned or for a slot to free. Instances are reused until
// one breaks, and a broken one is closed and its slot freed, so the next
// caller starts a fresh instance.
type pool struct {
	idle  chan *instance
	slots chan struct{} // one token per live instance
	start func(context.Context) (*instance, error)

	mu     sync.Mutex
	closed bool
	all    map[*instance]struct{}
}

func newPool(size int, start func(context.Context) (*instance, error)) *pool {
	return &pool{
		idle:  make(chan *instance, size),
		slots: make(chan struct{}, size),
		start: start,
		all:   map[*instance]struct{}{},
	}
}

// seed adds an instance created outside get (the one made at load).
func (p *pool) seed(in *instance) {
	p.slots <- struct{}{}
	p.track(in)
	p.idle <- in
}

// get returns an instance for the caller's exclusive use; put or discard
// gives it back. It waits while every slot is busy, until ctx is done.
func (p *pool) get(ctx context.Context) (*instance, error) {
	select {
	case in := <-p.idle:
		return in, nil
	default:
	}
	select {
	case in := <-p.idle:
		return in, nil
	case p.slots <- struct{}{}:
		in, err := p.start(ctx)
		if err != nil {
			<-p.slots
			return nil, err
		}
		if !p.track(in) {
			in.close()
			<-p.slots
			return nil, errPolicyClosed
		}
		return in, nil
	case <-ctx.Done():
		return nil, &requestGone{cause: context.Cause(ctx)}
	}
}

// requestGone is the caller's request ending while it waited for an
// instance: not the policy's failure.
type requestGone struct{ cause error }

func (e *requestGone) Error() string { return "waiting for a policy instance: " + e.cause.Error() }
func (e *requestGone) Unwrap() error { return e.cause }

func (p *pool) track(in *instance) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.all[in] = struct{}{}
	return true
}

// put returns a healthy instance.
func (p *pool) put(in *instance) { p.idle <- in }

// discard closes a broken instance and frees its slot.
func (p *pool) discard(in *instance) {
	p.mu.Lock()
	delete(p.all, in)
	p.mu.Unlock()
	in.close()
	<-p.slots
}

// close closes every instance, idle or not. Callers must have stopped
// using the pool (the Set ensures it).
func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for in := range p.all {
		in.close()
	}
	clear(p.all)
}
