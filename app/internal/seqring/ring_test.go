package seqring

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"testing/synctest"
	"time"
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
	w.Notify() // nobody waits: nothing to do
	var a, b Waiter
	w.Add(&a)
	w.Add(&b)
	w.Add(&a) // queued once
	select {
	case <-a.ch:
		t.Fatal("woken before Notify")
	default:
	}
	w.Notify()
	<-a.ch
	<-b.ch
	w.Notify() // nobody queued now
	select {
	case <-a.ch:
		t.Fatal("a waiter not queued again was woken")
	default:
	}
}

// Follow returns at once when poll has something, waits for a wake-up
// otherwise, returns false after idle, and on a done context polls once
// more before it gives up.
func TestFollow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var w Wake
		var r Waiter
		items := 0
		poll := func() bool {
			mu.Lock()
			defer mu.Unlock()
			if items > 0 {
				items--
				return true
			}
			w.Add(&r)
			return false
		}
		items = 1
		if !Follow(context.Background(), time.Second, &r, poll) {
			t.Fatal("an item ready was not taken")
		}
		start := time.Now()
		if Follow(context.Background(), time.Second, &r, poll) || time.Since(start) != time.Second {
			t.Fatalf("idle: returned after %v", time.Since(start))
		}
		go func() {
			time.Sleep(100 * time.Millisecond)
			mu.Lock()
			items = 1
			w.Notify()
			mu.Unlock()
		}()
		start = time.Now()
		if !Follow(context.Background(), time.Second, &r, poll) || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("woken: after %v", time.Since(start))
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		items = 1
		if !Follow(ctx, time.Second, &r, poll) {
			t.Fatal("a done context kept the reader from what was there")
		}
		if Follow(ctx, time.Second, &r, poll) || ctx.Err() == nil {
			t.Fatal("a done context with nothing there did not end the wait")
		}
	})
}
