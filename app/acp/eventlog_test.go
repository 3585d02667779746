package acp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/app/internal/seqring"
)

// evt is an event payload of exactly n bytes (n >= 2).
func evt(n int) []byte { return []byte("\"" + strings.Repeat("x", n-2) + "\"") }

// readNow reads what is buffered at the cursor without waiting for more.
func readNow(t *testing.T, c *Cursor) ([]Event, *Gap) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a read that would wait returns at once
	evs, gap, err := c.Read(ctx, nil, 1<<20, time.Hour)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Read: %v", err)
	}
	return evs, gap
}

func seqs(evs []Event) []uint64 {
	out := make([]uint64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

func wantSeqs(t *testing.T, evs []Event, from, to uint64) {
	t.Helper()
	var want []uint64
	for s := from; s <= to && to > 0; s++ {
		want = append(want, s)
	}
	if fmt.Sprint(seqs(evs)) != fmt.Sprint(want) {
		t.Fatalf("seqs = %v, want %v", seqs(evs), want)
	}
}

func TestEventLogSequence(t *testing.T) {
	l := NewEventLog(1 << 20)
	for i, want := range []uint64{1, 2, 3} {
		if got := l.Append([]byte(fmt.Sprintf(`{"n":%d}`, i+1))); got != want {
			t.Fatalf("Append = %d, want %d", got, want)
		}
	}
	c := l.Subscribe(nil)
	defer c.Close()
	evs, gap := readNow(t, c)
	if gap != nil {
		t.Fatalf("gap %+v", gap)
	}
	wantSeqs(t, evs, 1, 3)
	for i, e := range evs {
		if string(e.Data) != fmt.Sprintf(`{"n":%d}`, i+1) {
			t.Errorf("event %d data %q", e.Seq, e.Data)
		}
	}
	st := l.Stats()
	if st.LastEventID != 3 || st.Events != 3 || st.Bytes != int64(3*(7+eventOverhead)) || st.Readers != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestEventLogBudget(t *testing.T) {
	const size = 100
	per := int64(size + eventOverhead)
	l := NewEventLog(3 * per)
	for range 3 {
		l.Append(evt(size))
	}
	if st := l.Stats(); st.Events != 3 || st.Bytes != 3*per {
		t.Fatalf("at budget: %+v", st)
	}
	l.Append(evt(size))
	if st := l.Stats(); st.Events != 3 || st.Bytes != 3*per || st.LastEventID != 4 {
		t.Fatalf("one over: %+v", st)
	}
	c := l.Subscribe(nil)
	defer c.Close()
	evs, _ := readNow(t, c)
	wantSeqs(t, evs, 2, 4)

	// The per-event overhead counts: tiny events cannot pile up unbounded.
	tiny := NewEventLog(10 * eventOverhead)
	for range 1000 {
		tiny.Append([]byte("1"))
	}
	if st := tiny.Stats(); st.Events != 9 || st.Bytes != 9*(1+eventOverhead) {
		t.Errorf("tiny events: %+v", st)
	}

	// One event larger than the whole budget is never buffered: it goes to
	// the readers there are (a caught-up one and one behind, which gets a
	// gap first), takes the older events with it, and a later reader with
	// a Last-Event-ID before it gets a gap.
	big := NewEventLog(200)
	big.Append(evt(5))
	live := big.Subscribe(nil)
	defer live.Close()
	readNow(t, live) // caught up after event 1
	behind := big.Subscribe(nil)
	defer behind.Close()
	big.Append(evt(1000))
	if st := big.Stats(); st.Events != 0 || st.Bytes != 0 || st.LastEventID != 2 {
		t.Errorf("oversized event buffered: %+v", st)
	}
	big.Append(evt(10))
	if evs, gap := readNow(t, live); gap != nil || len(evs) != 1 || evs[0].Seq != 2 || len(evs[0].Data) != 1000 {
		t.Errorf("live reader: %v %+v", seqs(evs), gap)
	}
	if evs, gap := readNow(t, live); gap != nil || len(evs) != 1 || evs[0].Seq != 3 {
		t.Errorf("live reader after the big one: %v %+v", seqs(evs), gap)
	}
	if _, gap := readNow(t, behind); gap == nil || gap.LastEventID != 0 || gap.OldestAvailable != 2 {
		t.Errorf("reader behind: gap %+v", gap)
	}
	if evs, _ := readNow(t, behind); len(evs) != 1 || evs[0].Seq != 2 {
		t.Errorf("reader behind after its gap: %v", seqs(evs))
	}
	after := uint64(1)
	later := big.Subscribe(&after)
	defer later.Close()
	if _, gap := readNow(t, later); gap == nil || gap.OldestAvailable != 3 {
		t.Errorf("later reader: gap %+v", gap)
	}
	if evs, _ := readNow(t, later); len(evs) != 1 || evs[0].Seq != 3 {
		t.Errorf("later reader after its gap: %v", seqs(evs))
	}
}

// The shared budget: past it, the largest logs lose their oldest events
// first, and the total never stays above it.
func TestReplayPoolTotal(t *testing.T) {
	const per = 100 + eventOverhead
	p := seqring.NewPool(10 * per)
	small, large := newPooledLog(p, 1<<20, nil, nil), newPooledLog(p, 1<<20, nil, nil)
	for range 3 {
		small.Append(evt(100))
	}
	for range 7 {
		large.Append(evt(100))
	}
	if p.Total() != 10*per {
		t.Fatalf("total = %d, want %d", p.Total(), 10*per)
	}
	large.Append(evt(100)) // one over: the largest log pays
	if st := large.Stats(); st.Events != 7 || p.Total() != 10*per {
		t.Fatalf("large %+v, total %d", st, p.Total())
	}
	if st := small.Stats(); st.Events != 3 {
		t.Fatalf("small lost events: %+v", st)
	}
	small.Append(evt(100 * 5)) // both are now large: they shrink together
	if ss, ls := small.Stats(), large.Stats(); p.Total() > 10*per || ls.Events >= 7 || ss.Events >= 4 || ss.Bytes+ls.Bytes != p.Total() {
		t.Fatalf("small %+v, large %+v, total %d", ss, ls, p.Total())
	}
	c := large.Subscribe(new(uint64))
	defer c.Close()
	if _, gap := readNow(t, c); gap == nil {
		t.Fatalf("a reader from the start of an evicted log got no gap")
	}
	small.Release()
	large.Release()
	if p.Total() != 0 || p.Members() != 0 {
		t.Fatalf("after release: total %d, %d logs", p.Total(), p.Members())
	}
}

func TestEventLogSubscribePositions(t *testing.T) {
	newLog := func() *EventLog {
		l := NewEventLog(5 * (10 + eventOverhead))
		for range 8 { // 1..3 evicted, 4..8 buffered
			l.Append(evt(10))
		}
		return l
	}
	u := func(n uint64) *uint64 { return &n }
	tests := []struct {
		name     string
		after    *uint64
		gap      *Gap
		from, to uint64
	}{
		{"none starts at the oldest buffered", nil, nil, 4, 8},
		{"after the oldest", u(4), nil, 5, 8},
		{"just before the oldest", u(3), nil, 4, 8},
		{"after the newest", u(8), nil, 0, 0},
		{"beyond the newest", u(1000), nil, 0, 0},
		{"evicted", u(1), &Gap{LastEventID: 1, OldestAvailable: 4}, 4, 8},
		{"zero with evictions", u(0), &Gap{LastEventID: 0, OldestAvailable: 4}, 4, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLog()
			c := l.Subscribe(tt.after)
			defer c.Close()
			evs, gap := readNow(t, c)
			if tt.gap != nil {
				if gap == nil || *gap != *tt.gap || len(evs) != 0 {
					t.Fatalf("first read: gap %+v, %d events; want gap %+v alone", gap, len(evs), *tt.gap)
				}
				if l.Stats().Gaps != 1 {
					t.Errorf("gaps counted: %d", l.Stats().Gaps)
				}
				evs, gap = readNow(t, c)
			}
			if gap != nil {
				t.Fatalf("unexpected gap %+v", gap)
			}
			wantSeqs(t, evs, tt.from, tt.to)
			// Everyone follows live events from where they are.
			l.Append(evt(10))
			evs, _ = readNow(t, c)
			wantSeqs(t, evs, 9, 9)
		})
	}

	t.Run("empty log", func(t *testing.T) {
		l := NewEventLog(1000)
		for _, after := range []*uint64{nil, u(0), u(5)} {
			c := l.Subscribe(after)
			if evs, gap := readNow(t, c); len(evs) != 0 || gap != nil {
				t.Errorf("after %v: %v %+v", after, seqs(evs), gap)
			}
			defer c.Close()
		}
		l.Append(evt(3))
		for c := range l.cursors {
			if evs, _ := readNow(t, c); len(evs) != 1 || evs[0].Seq != 1 {
				t.Errorf("live event: %v", seqs(evs))
			}
		}
	})
}

// A reader that falls behind the buffer gets one gap naming exactly what it
// missed, then continues from the oldest buffered event; other readers are
// unaffected.
func TestEventLogSlowReader(t *testing.T) {
	l := NewEventLog(4 * (10 + eventOverhead))
	slow := l.Subscribe(nil)
	fast := l.Subscribe(nil)
	defer slow.Close()
	defer fast.Close()
	l.Append(evt(10))
	l.Append(evt(10))
	evs, _ := readNow(t, slow)
	wantSeqs(t, evs, 1, 2)
	for i := 3; i <= 10; i++ {
		l.Append(evt(10))
		evs, gap := readNow(t, fast)
		if gap != nil {
			t.Fatalf("fast reader got a gap %+v", gap)
		}
		if i > 3 {
			wantSeqs(t, evs, uint64(i), uint64(i))
		}
	}
	evs, gap := readNow(t, slow)
	if gap == nil || *gap != (Gap{LastEventID: 2, OldestAvailable: 7}) || len(evs) != 0 {
		t.Fatalf("slow reader: gap %+v, events %v", gap, seqs(evs))
	}
	evs, gap = readNow(t, slow)
	if gap != nil {
		t.Fatalf("second gap %+v", gap)
	}
	wantSeqs(t, evs, 7, 10)
}

func TestEventLogReadMax(t *testing.T) {
	l := NewEventLog(1 << 20)
	for range 10 {
		l.Append(evt(4))
	}
	c := l.Subscribe(nil)
	defer c.Close()
	buf := make([]Event, 0, 4)
	var got []uint64
	for len(got) < 10 {
		evs, _, err := c.Read(context.Background(), buf[:0], 4, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) > 4 || len(evs) == 0 {
			t.Fatalf("read %d events with max 4", len(evs))
		}
		got = append(got, seqs(evs)...)
	}
	if fmt.Sprint(got) != "[1 2 3 4 5 6 7 8 9 10]" {
		t.Errorf("got %v", got)
	}
}

// The ring compacts its dead prefix; positions stay right across it.
func TestEventLogCompaction(t *testing.T) {
	l := NewEventLog(10 * (8 + eventOverhead))
	c := l.Subscribe(nil)
	defer c.Close()
	var last uint64
	for i := 1; i <= 5000; i++ {
		l.Append([]byte(fmt.Sprintf("%8d", i)))
		if i%7 == 0 {
			evs, gap := readNow(t, c)
			if gap != nil {
				last = gap.OldestAvailable - 1
			}
			for _, e := range evs {
				if e.Seq != last+1 || string(e.Data) != fmt.Sprintf("%8d", e.Seq) {
					t.Fatalf("event %d (%q) after %d", e.Seq, e.Data, last)
				}
				last = e.Seq
			}
		}
	}
	if n := l.ring.Slots(); n > 4096 {
		t.Errorf("ring not compacted: %d slots for %d events", n, l.ring.Len())
	}
	after := uint64(4995)
	c2 := l.Subscribe(&after)
	defer c2.Close()
	evs, _ := readNow(t, c2)
	wantSeqs(t, evs, 4996, 5000)
}

func TestEventLogIndependentReaders(t *testing.T) {
	l := NewEventLog(1 << 20)
	a, b := l.Subscribe(nil), l.Subscribe(nil)
	defer a.Close()
	defer b.Close()
	l.Append(evt(3))
	l.Append(evt(3))
	evs, _ := readNow(t, a)
	wantSeqs(t, evs, 1, 2)
	l.Append(evt(3))
	evs, _ = readNow(t, b)
	wantSeqs(t, evs, 1, 3)
	evs, _ = readNow(t, a)
	wantSeqs(t, evs, 3, 3)
	if st := l.Stats(); st.Readers != 2 {
		t.Errorf("readers %d", st.Readers)
	}
	a.Close()
	if st := l.Stats(); st.Readers != 1 {
		t.Errorf("readers after close %d", st.Readers)
	}
}

func TestEventLogReadWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewEventLog(1 << 20)
		c := l.Subscribe(nil)
		defer c.Close()

		// Idle: no events, no error, after exactly the idle time.
		start := time.Now()
		evs, gap, err := c.Read(context.Background(), nil, 10, 15*time.Second)
		if err != nil || gap != nil || len(evs) != 0 {
			t.Fatalf("idle read: %v %+v %v", seqs(evs), gap, err)
		}
		if d := time.Since(start); d != 15*time.Second {
			t.Errorf("idle read returned after %v", d)
		}

		// An append wakes a waiting reader at once.
		type res struct {
			evs []Event
			err error
		}
		got := make(chan res, 1)
		start = time.Now()
		go func() {
			evs, _, err := c.Read(context.Background(), nil, 10, time.Minute)
			got <- res{evs, err}
		}()
		synctest.Wait()
		time.Sleep(time.Second) // fake time: the reader keeps waiting
		l.Append(evt(5))
		r := <-got
		if r.err != nil || len(r.evs) != 1 || r.evs[0].Seq != 1 {
			t.Fatalf("woken read: %v %v", seqs(r.evs), r.err)
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("woken after %v", d)
		}

		// Cancelling the reader's context ends the wait with its error.
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			evs, _, err := c.Read(ctx, nil, 10, time.Minute)
			got <- res{evs, err}
		}()
		synctest.Wait()
		cancel()
		if r := <-got; !errors.Is(r.err, context.Canceled) || len(r.evs) != 0 {
			t.Fatalf("cancelled read: %v %v", seqs(r.evs), r.err)
		}

		// Closing the log ends waiting and later reads.
		go func() {
			evs, _, err := c.Read(context.Background(), nil, 10, time.Minute)
			got <- res{evs, err}
		}()
		synctest.Wait()
		l.Close()
		if r := <-got; !errors.Is(r.err, ErrStreamClosed) {
			t.Fatalf("read on close: %v", r.err)
		}
		l.Append(evt(5)) // harmless
		if _, _, err := c.Read(context.Background(), nil, 10, time.Minute); !errors.Is(err, ErrStreamClosed) {
			t.Fatalf("read after close: %v", err)
		}
		late := l.Subscribe(nil)
		defer late.Close()
		if _, _, err := late.Read(context.Background(), nil, 10, time.Minute); !errors.Is(err, ErrStreamClosed) {
			t.Fatalf("new reader after close: %v", err)
		}
	})
}

func TestEventLogWaitFlushed(t *testing.T) {
	type barrier struct {
		ok   bool
		took time.Duration
	}
	wait := func(l *EventLog, ctx context.Context, seq uint64, timeout time.Duration) <-chan barrier {
		ch := make(chan barrier, 1)
		start := time.Now()
		go func() {
			ok := l.WaitFlushed(ctx, seq, timeout)
			ch <- barrier{ok, time.Since(start)}
		}()
		return ch
	}
	pending := func(t *testing.T, ch <-chan barrier) {
		t.Helper()
		synctest.Wait()
		select {
		case b := <-ch:
			t.Fatalf("barrier returned early: %+v", b)
		default:
		}
	}

	t.Run("waits for every registered reader", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := NewEventLog(1 << 20)
			a, b := l.Subscribe(nil), l.Subscribe(nil)
			defer a.Close()
			defer b.Close()
			for range 3 {
				l.Append(evt(3))
			}
			ch := wait(l, context.Background(), 3, time.Second)
			pending(t, ch)
			a.Ack(3)
			pending(t, ch)
			b.Ack(2)
			pending(t, ch)
			// A reader subscribing now is not waited for.
			late := l.Subscribe(nil)
			defer late.Close()
			b.Ack(3)
			if r := <-ch; !r.ok || r.took != 0 {
				t.Errorf("barrier: %+v", r)
			}
		})
	})

	t.Run("readers already past seq or gone", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := NewEventLog(1 << 20)
			for range 5 {
				l.Append(evt(3))
			}
			if !l.WaitFlushed(context.Background(), 5, time.Second) {
				t.Errorf("no readers: barrier not met")
			}
			after := uint64(5)
			past := l.Subscribe(&after) // flushed up to 5 by definition
			defer past.Close()
			if !l.WaitFlushed(context.Background(), 5, time.Second) {
				t.Errorf("reader past seq: barrier not met")
			}
			behind := l.Subscribe(nil)
			ch := wait(l, context.Background(), 5, time.Second)
			pending(t, ch)
			behind.Close()
			if r := <-ch; !r.ok || r.took != 0 {
				t.Errorf("after the reader left: %+v", r)
			}
		})
	})

	t.Run("bounded by the timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := NewEventLog(1 << 20)
			c := l.Subscribe(nil)
			defer c.Close()
			l.Append(evt(3))
			ch := wait(l, context.Background(), 1, time.Second)
			c.Ack(0) // an ack short of seq does not release it
			if r := <-ch; r.ok || r.took != time.Second {
				t.Errorf("barrier: %+v, want not met after 1s", r)
			}
		})
	})

	t.Run("ends with ctx or close", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := NewEventLog(1 << 20)
			c := l.Subscribe(nil)
			defer c.Close()
			l.Append(evt(3))
			ctx, cancel := context.WithCancel(context.Background())
			ch := wait(l, ctx, 1, time.Minute)
			pending(t, ch)
			cancel()
			if r := <-ch; r.ok {
				t.Errorf("cancelled barrier reported met")
			}
			ch = wait(l, context.Background(), 1, time.Minute)
			pending(t, ch)
			l.Close()
			if r := <-ch; !r.ok || r.took != 0 {
				t.Errorf("barrier on close: %+v", r)
			}
		})
	})
}
