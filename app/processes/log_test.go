package processes

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestOutputLogBoundsAndGaps(t *testing.T) {
	l := newOutputLog(3*(10+chunkOverhead), nil)
	for i := 0; i < 10; i++ {
		l.append(Chunk{Data: []byte("0123456789")})
	}
	if got := l.Size(); got != 3*(10+chunkOverhead) {
		t.Errorf("size %d", got)
	}
	// A reader at 0 was evicted: one gap, then the three kept chunks.
	c := l.cursorAfter(new(uint64))
	got, gap, err := c.next(canceled, nil, 100, 0)
	if err != nil || len(got) != 0 || gap == nil || gap.LastSequence != 0 || gap.OldestAvailable != 8 {
		t.Fatalf("first read: %v %+v %v", got, gap, err)
	}
	got, gap, err = c.next(canceled, nil, 2, 0)
	if err != nil || gap != nil || len(got) != 2 || got[0].Seq != 8 || got[1].Seq != 9 {
		t.Fatalf("second read: %+v %+v %v", got, gap, err)
	}
	got, _, _ = c.next(canceled, nil, 100, 0)
	if len(got) != 1 || got[0].Seq != 10 {
		t.Fatalf("third read: %+v", got)
	}
	if _, _, err := c.next(canceled, nil, 100, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("read at the end with a done ctx: %v", err)
	}
	if l.gaps.Load() != 1 {
		t.Errorf("gaps %d", l.gaps.Load())
	}
	// Without a position: the oldest kept chunk; beyond the newest: the next.
	if got, _, _ := l.cursorAfter(nil).next(canceled, nil, 100, 0); len(got) != 3 || got[0].Seq != 8 {
		t.Errorf("no position: %+v", got)
	}
	far := uint64(1000)
	fc := l.cursorAfter(&far)
	l.append(Chunk{Data: []byte("x")})
	if got, _, _ := fc.next(canceled, nil, 100, 0); len(got) != 1 || got[0].Seq != 11 {
		t.Errorf("beyond the newest: %+v", got)
	}
	// A single chunk larger than the budget is still kept.
	big := newOutputLog(10, nil)
	big.append(Chunk{Data: make([]byte, 100)})
	if got, _, _ := big.cursorAfter(nil).next(canceled, nil, 100, 0); len(got) != 1 {
		t.Errorf("oversized chunk dropped")
	}
}

func TestOutputLogWaitsAndCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newOutputLog(1<<20, nil)
		c := l.cursorAfter(nil)
		start := time.Now()
		got, gap, err := c.next(context.Background(), nil, 10, 15*time.Second)
		if len(got) != 0 || gap != nil || err != nil || time.Since(start) != 15*time.Second {
			t.Fatalf("idle read: %v %v %v after %v", got, gap, err, time.Since(start))
		}
		time.AfterFunc(time.Second, func() { l.append(Chunk{Data: []byte("a")}) })
		got, _, _ = c.next(context.Background(), nil, 10, time.Minute)
		if len(got) != 1 || time.Since(start) != 16*time.Second {
			t.Fatalf("woken read: %v after %v", got, time.Since(start))
		}
		time.AfterFunc(time.Second, l.close)
		if _, _, err := c.next(context.Background(), nil, 10, time.Minute); !errors.Is(err, errLogClosed) {
			t.Errorf("after close: %v", err)
		}
	})
}
