package acp

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/app/internal/seqring"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// numbered is the payload of event seq: n bytes that name it, so an event
// read from the wrong place shows.
func numbered(seq uint64, n int) []byte {
	head := `{"seq":` + strconv.FormatUint(seq, 10) + `,"pad":"`
	n = max(n, len(head)+2)
	return []byte(head + string(bytes.Repeat([]byte{'a' + byte(seq%26)}, n-len(head)-2)) + `"}`)
}

// checkEvents fails unless every event is the one its number names.
func checkEvents(t testing.TB, evs []Event, size func(uint64) int) {
	t.Helper()
	for _, e := range evs {
		if want := numbered(e.Seq, size(e.Seq)); !bytes.Equal(e.Data, want) {
			t.Fatalf("event %d reads %.40q…, want %.40q…", e.Seq, e.Data, want)
		}
	}
}

// A log with a spill keeps its older events in the file and only the
// newest in memory; a reader that fell behind gets a gap, then every kept
// event exactly, from the file and then from memory, in order.
func TestEventLogSpill(t *testing.T) {
	spill := &porttest.MemSpill{}
	l := newEventLog(1<<20, spill, func(err error) { t.Errorf("spill failed: %v", err) })
	size := func(seq uint64) int { return 150 + int(seq%7)*40 }
	c := l.Subscribe(nil)
	defer c.Close()
	const n = 20000
	for seq := uint64(1); seq <= n; seq++ {
		l.Append(numbered(seq, size(seq)))
	}
	st := l.Stats()
	if st.Bytes < 900<<10 || st.Memory > 2*64<<10 || spill.Files != 1 {
		t.Fatalf("stats %+v with %d files: want the budget nearly full, at most two segments in memory", st, spill.Files)
	}
	evs, gap := readNow(t, c)
	if gap == nil || gap.LastEventID != 0 || len(evs) != 0 {
		t.Fatalf("first read: gap %+v, %d events", gap, len(evs))
	}
	next := gap.OldestAvailable
	for next <= n {
		evs, gap = readNow(t, c)
		if gap != nil || len(evs) == 0 || evs[0].Seq != next {
			t.Fatalf("at %d: gap %+v, %d events from %v", next, gap, len(evs), seqs(evs[:min(1, len(evs))]))
		}
		checkEvents(t, evs, size)
		next = evs[len(evs)-1].Seq + 1
	}
	l.Release()
	if spill.OpenFiles() != 0 {
		t.Fatal("a released log keeps its spill file open")
	}
}

// A reader that reconnects with Last-Event-ID anywhere in a log whose file
// has wrapped many times (a budget that is no multiple of a page, so
// events straddle the file's end), the first kept event and the newest
// included, gets exactly the events after it, read across the wrap; one
// from before the oldest kept event gets a gap first. The reader that
// fell behind reads from the oldest end; these start near the head, where
// the position of their first event is found from the newest.
func TestEventLogSpillResumeAnywhere(t *testing.T) {
	spill := &porttest.MemSpill{}
	l := newEventLog(256<<10+17, spill, func(err error) { t.Errorf("spill failed: %v", err) })
	defer l.Release()
	size := func(seq uint64) int {
		if seq%997 == 0 {
			return 66 << 10 // larger than a segment: kept in memory
		}
		return 40 + int(seq*7919%900)
	}
	const n = 5000
	for seq := uint64(1); seq <= n; seq++ {
		l.Append(numbered(seq, size(seq)))
	}
	oldest := oldestKept(l, n)
	if st := l.Stats(); !l.spool.Spilled() || st.Memory >= st.Bytes || oldest < n/2 {
		t.Fatalf("stats %+v, oldest %d: want most of the log in a wrapped file", st, oldest)
	}
	for after := oldest - 2; after <= n+1; after++ {
		c := l.Subscribe(&after)
		want := after + 1
		if after+1 < oldest {
			if _, gap := readNow(t, c); gap == nil || gap.LastEventID != after || gap.OldestAvailable != oldest {
				t.Fatalf("after %d: gap %+v, want one up to %d", after, gap, oldest)
			}
			want = oldest
		}
		for want <= n {
			evs, gap := readNow(t, c)
			if gap != nil || len(evs) == 0 || evs[0].Seq != want {
				t.Fatalf("after %d, at %d: gap %+v, events %v", after, want, gap, seqs(evs[:min(3, len(evs))]))
			}
			checkEvents(t, evs, size)
			want = evs[len(evs)-1].Seq + 1
		}
		if evs, gap := readNow(t, c); gap != nil || len(evs) != 0 {
			t.Fatalf("after %d: past the newest: gap %+v, %v", after, gap, seqs(evs))
		}
		c.Close()
	}
}

// oldestKept is the first event a log with n events still keeps.
func oldestKept(l *EventLog, n uint64) uint64 { return n - uint64(l.Stats().Events) + 1 }

// A spill file that fails to be written leaves the log in memory, nothing
// lost; one that fails to be read back loses what it held, and a reader
// behind is told so by a gap, never given wrong bytes.
func TestEventLogSpillFailures(t *testing.T) {
	size := func(uint64) int { return 500 }
	t.Run("write", func(t *testing.T) {
		spill := &porttest.MemSpill{Fail: func(op string) error {
			if op == "write" {
				return errors.New("no space left on device")
			}
			return nil
		}}
		var failures atomic.Int32
		l := newEventLog(1<<20, spill, func(error) { failures.Add(1) })
		c := l.Subscribe(nil)
		defer c.Close()
		for seq := uint64(1); seq <= 1000; seq++ {
			l.Append(numbered(seq, size(seq)))
		}
		evs, gap := readNow(t, c)
		if gap != nil || len(evs) != 1000 || failures.Load() != 1 {
			t.Fatalf("gap %+v, %d events, %d failures reported", gap, len(evs), failures.Load())
		}
		checkEvents(t, evs, size)
	})
	t.Run("read", func(t *testing.T) {
		var failing atomic.Bool
		spill := &porttest.MemSpill{Fail: func(op string) error {
			if op == "read" && failing.Load() {
				return errors.New("input/output error")
			}
			return nil
		}}
		p := seqring.NewPool(1 << 30)
		l := newPooledLog(p, 1<<20, spill, nil)
		c := l.Subscribe(nil)
		defer c.Close()
		for seq := uint64(1); seq <= 1000; seq++ {
			l.Append(numbered(seq, size(seq)))
		}
		failing.Store(true)
		evs, gap := readNow(t, c)
		if gap == nil || len(evs) != 0 || gap.OldestAvailable < 2 {
			t.Fatalf("gap %+v, %d events", gap, len(evs))
		}
		evs, gap = readNow(t, c)
		if gap != nil || len(evs) == 0 || evs[0].Seq != oldestKept(l, 1000) || evs[len(evs)-1].Seq != 1000 {
			t.Fatalf("after the gap: %+v, %v", gap, seqs(evs))
		}
		checkEvents(t, evs, size)
		if p.Total() != l.Stats().Bytes {
			t.Fatalf("the pool holds %d for a log of %d", p.Total(), l.Stats().Bytes)
		}
	})
}

// One appender, readers at their own pace and a second log taking the
// shared budget from it, with a spill: every reader sees increasing
// sequence numbers, gaps that join up, and every event exactly as
// appended, whether it came from memory, the file or a large payload.
func TestEventLogSpillHammer(t *testing.T) {
	spill := &porttest.MemSpill{}
	p := seqring.NewPool(3 << 20)
	l := newPooledLog(p, 2<<20, spill, func(err error) { t.Errorf("spill failed: %v", err) })
	other := newPooledLog(p, 2<<20, spill, nil)
	sizes := sync.Map{}
	size := func(seq uint64) int { v, _ := sizes.Load(seq); return v.(int) }
	const n = 30000
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for r := range 3 {
		c := l.Subscribe(nil)
		wg.Go(func() {
			defer c.Close()
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			var last uint64
			var buf []Event
			for last < n {
				evs, gap, err := c.Read(ctx, buf[:0], 1+rng.IntN(300), time.Second)
				if err != nil {
					t.Errorf("reader %d: %v", r, err)
					return
				}
				if gap != nil {
					if gap.LastEventID != last || gap.OldestAvailable <= last {
						t.Errorf("reader %d: gap %+v after %d", r, gap, last)
						return
					}
					last = gap.OldestAvailable - 1
					continue
				}
				for _, e := range evs {
					if e.Seq != last+1 {
						t.Errorf("reader %d: event %d after %d", r, e.Seq, last)
						return
					}
					last = e.Seq
				}
				checkEvents(t, evs, size)
				c.Ack(last)
				buf = evs
				if r == 0 && rng.IntN(20) == 0 {
					time.Sleep(time.Millisecond) // a slow reader falls behind
				}
			}
		})
	}
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(9, 9))
		for range 3000 {
			other.Append(evt(200 + rng.IntN(2000)))
		}
	})
	rng := rand.New(rand.NewPCG(3, 4))
	for seq := uint64(1); seq <= n; seq++ {
		sz := 50 + rng.IntN(400)
		switch rng.IntN(500) {
		case 0:
			sz = 70 << 10 // larger than a spool segment
		case 1:
			sz = 3 << 20 // larger than the log
		}
		sizes.Store(seq, sz)
		if got := l.Append(numbered(seq, sz)); got != seq {
			t.Fatalf("append %d numbered %d", seq, got)
		}
	}
	wg.Wait()
	if st := l.Stats(); p.Total() != st.Bytes+other.Stats().Bytes {
		t.Fatalf("the pool holds %d, the logs %d and %d", p.Total(), st.Bytes, other.Stats().Bytes)
	}
	l.Release()
	other.Release()
	if spill.OpenFiles() != 0 || p.Total() != 0 {
		t.Fatalf("after release: %d files open, pool %d", spill.OpenFiles(), p.Total())
	}
}
