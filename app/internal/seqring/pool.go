package seqring

import (
	"sync"
	"sync/atomic"
)

// Member is a log that draws on a Pool: the ACP event log of an instance
// (--replay-total), a managed process's output log (--process-log-total).
type Member interface {
	// Size is what the log holds now, in the pool's units. It is read
	// without the log's lock (the log keeps it in an atomic), since the
	// pool holds its own lock while it looks for the largest log.
	Size() int64
	// EvictFor drops the log's oldest items until at least want is freed
	// or the log is empty, and returns what was freed. It takes the log's
	// lock; the pool calls it with its own held (pool before log).
	EvictFor(want int64) int64
}

// Pool is a budget several logs share. Each log reports its growth after
// an append (Add, called without the log's lock); past the budget the
// oldest items of the largest logs go first, so one busy log cannot push
// every other one's history out. Bytes not in any log yet (a line being
// read, a run's output being captured) are charged with Reserve, which
// makes room by evicting, and given back with Release.
//
// The methods of a nil *Pool do nothing (a log without a shared budget).
type Pool struct {
	max   int64
	total atomic.Int64

	mu      sync.Mutex // one enforcer at a time; guards members. Taken before a log's lock.
	members map[Member]struct{}
}

// NewPool returns a pool of max.
func NewPool(max int64) *Pool {
	return &Pool{max: max, members: map[Member]struct{}{}}
}

// Max is the budget.
func (p *Pool) Max() int64 {
	if p == nil {
		return 0
	}
	return p.max
}

// Total is what every log of the pool holds, plus what is reserved.
func (p *Pool) Total() int64 {
	if p == nil {
		return 0
	}
	return p.total.Load()
}

// Join makes m a log the pool may evict from.
func (p *Pool) Join(m Member) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.members[m] = struct{}{}
	p.mu.Unlock()
}

// Leave takes m out of the pool, giving back freed (what m still held,
// now dropped).
func (p *Pool) Leave(m Member, freed int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	delete(p.members, m)
	p.mu.Unlock()
	p.total.Add(-freed)
}

// Add records a log's growth (or shrinkage) and enforces the budget. It
// is called without the log's lock held.
func (p *Pool) Add(delta int64) {
	if p == nil || delta == 0 {
		return
	}
	if p.total.Add(delta) > p.max {
		p.enforce()
	}
}

// Reserve charges n that is not in a log yet, evicting from the logs to
// make room. It reports false, charging nothing, when there is no room
// even with every log empty.
func (p *Pool) Reserve(n int64) bool {
	if p == nil {
		return true
	}
	if p.total.Add(n) > p.max {
		p.enforce()
		if p.total.Load() > p.max {
			p.total.Add(-n)
			return false
		}
	}
	return true
}

// Release gives back what Reserve charged.
func (p *Pool) Release(n int64) {
	if p != nil && n != 0 {
		p.total.Add(-n)
	}
}

// enforce evicts from the largest log until the pool is within budget,
// taking each log down to the size of the next largest at most, so the
// largest logs shrink together.
func (p *Pool) enforce() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		over := p.total.Load() - p.max
		if over <= 0 {
			return
		}
		var largest Member
		var first, second int64
		for m := range p.members {
			switch b := m.Size(); {
			case b > first:
				largest, second, first = m, first, b
			case b > second:
				second = b
			}
		}
		if largest == nil {
			return
		}
		want := min(over, first-second)
		if want <= 0 {
			want = over
		}
		freed := largest.EvictFor(want)
		p.total.Add(-freed)
		if freed == 0 {
			return
		}
	}
}

// Members is how many logs draw on the pool (for tests).
func (p *Pool) Members() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.members)
}
