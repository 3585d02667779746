package seqring

import (
	"reflect"
	"testing"
)

type item struct {
	seq  uint64
	size int64
}

func newRing() Ring[item] { return New(func(it *item) int64 { return it.size }) }

func push(r *Ring[item], size int64) { r.Push(item{seq: r.Next(), size: size}) }

func seqs(items []item) []uint64 {
	var out []uint64
	for _, it := range items {
		out = append(out, it.seq)
	}
	return out
}

func TestRingNumbersTrimsAndReads(t *testing.T) {
	r := newRing()
	if r.Next() != 1 || r.Oldest() != 1 || r.Len() != 0 {
		t.Fatalf("empty ring: next %d oldest %d len %d", r.Next(), r.Oldest(), r.Len())
	}
	for range 5 {
		push(&r, 10)
	}
	r.Trim(30, 0)
	if r.Oldest() != 3 || r.Len() != 3 || r.Bytes() != 30 {
		t.Fatalf("after trim: oldest %d len %d bytes %d", r.Oldest(), r.Len(), r.Bytes())
	}
	if got := seqs(r.AppendFrom(nil, 4, 10)); !reflect.DeepEqual(got, []uint64{4, 5}) {
		t.Fatalf("from 4: %v", got)
	}
	if got := seqs(r.AppendFrom(nil, 3, 2)); !reflect.DeepEqual(got, []uint64{3, 4}) {
		t.Fatalf("max 2: %v", got)
	}
	// keep: the newest stays even over budget.
	push(&r, 100)
	r.Trim(30, 1)
	if r.Oldest() != 6 || r.Len() != 1 || r.Bytes() != 100 {
		t.Fatalf("keep 1: oldest %d len %d bytes %d", r.Oldest(), r.Len(), r.Bytes())
	}
	r.Skip()
	if r.Len() != 0 || r.Bytes() != 0 || r.Next() != 8 || r.Oldest() != 8 {
		t.Fatalf("skip: len %d bytes %d next %d", r.Len(), r.Bytes(), r.Next())
	}
	push(&r, 10)
	push(&r, 10)
	push(&r, 10)
	if freed := r.Free(15); freed != 20 || r.Oldest() != 10 {
		t.Fatalf("free 15: freed %d oldest %d", freed, r.Oldest())
	}
	r.Reset()
	if r.Len() != 0 || r.Bytes() != 0 || r.Next() != 11 {
		t.Fatalf("reset: len %d bytes %d next %d", r.Len(), r.Bytes(), r.Next())
	}
}

// TestRingCompacts checks that a long run of pushes and trims keeps the
// storage near the kept size instead of growing with the total.
func TestRingCompacts(t *testing.T) {
	r := newRing()
	for range 100000 {
		push(&r, 1)
		r.Trim(10, 0)
	}
	if r.Len() != 10 || r.Slots() > 4096 {
		t.Fatalf("len %d slots %d", r.Len(), r.Slots())
	}
	if got := r.AppendFrom(nil, r.Oldest(), 100); len(got) != 10 || got[9].seq != 100000 {
		t.Fatalf("kept %v", seqs(got))
	}
}

func TestWakeNotifiesEveryWaiterOnce(t *testing.T) {
	var w Wake
	w.Notify() // nobody waits: nothing to close
	a, b := w.C(), w.C()
	if a != b {
		t.Fatal("two waiters before a Notify got different channels")
	}
	select {
	case <-a:
		t.Fatal("closed before Notify")
	default:
	}
	w.Notify()
	<-a
	<-b
	select {
	case <-w.C():
		t.Fatal("a new wait is already closed")
	default:
	}
}
