package seqring

import (
	"sync"
	"testing"
)

// fakeLog is a Member over a Ring of items, as the real logs are.
type fakeLog struct {
	mu   sync.Mutex
	ring Ring[item]
	pool *Pool
}

func newFakeLog(p *Pool) *fakeLog {
	l := &fakeLog{ring: newRing(), pool: p}
	p.Join(l)
	return l
}

func (l *fakeLog) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ring.Bytes()
}

func (l *fakeLog) EvictFor(want int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ring.Free(want)
}

func (l *fakeLog) push(size int64) {
	l.mu.Lock()
	push(&l.ring, size)
	l.mu.Unlock()
	l.pool.Add(size)
}

// Past the budget the largest logs lose their oldest items first, and a
// reservation makes room by evicting, or fails when nothing is left to
// evict.
func TestPoolEvictsLargestFirst(t *testing.T) {
	p := NewPool(100)
	small, large := newFakeLog(p), newFakeLog(p)
	for range 3 {
		small.push(10)
	}
	for range 7 {
		large.push(10)
	}
	if p.Total() != 100 {
		t.Fatalf("total %d", p.Total())
	}
	large.push(10)
	if p.Total() != 100 || large.Size() != 70 || small.Size() != 30 {
		t.Fatalf("after one over: total %d, large %d, small %d", p.Total(), large.Size(), small.Size())
	}
	if !p.Reserve(50) {
		t.Fatal("a reservation the logs can make room for was refused")
	}
	if p.Total() != 100 || large.Size()+small.Size() != 50 || large.Size() < small.Size()-10 {
		t.Fatalf("after reserving: total %d, large %d, small %d", p.Total(), large.Size(), small.Size())
	}
	if p.Reserve(60) {
		t.Fatal("a reservation larger than what is left once every log is empty was granted")
	}
	if p.Total() != 50 || large.Size()+small.Size() != 0 {
		t.Fatalf("after a refused reservation: total %d, large %d, small %d", p.Total(), large.Size(), small.Size())
	}
	p.Release(50)
	p.Leave(small, small.Size())
	p.Leave(large, large.Size())
	if p.Total() != 0 || p.Members() != 0 {
		t.Fatalf("after leaving: total %d, %d members", p.Total(), p.Members())
	}
	var none *Pool
	none.Add(5)
	if !none.Reserve(1 << 40) {
		t.Fatal("a nil pool refused")
	}
}
