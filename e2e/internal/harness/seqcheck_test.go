package harness

import (
	"fmt"
	"strings"
	"testing"
)

// TestSeqChecker pins the rule TestStreamSlowReaderGetsGapFrame checks a
// stream against. The first case is the frame sequence behind its flakes
// ("gap says last 33126, reader had 32521"): two gap frames in a row, which
// the test used to compare with the last event read instead of where the
// first gap ended. The others are real losses it must still catch.
func TestSeqChecker(t *testing.T) {
	ev := func(id uint64) Event {
		return Event{ID: fmt.Sprint(id), Data: fmt.Sprintf(`{"jsonrpc":"2.0","method":"tick","params":{"i":%d}}`, id-1)}
	}
	gap := func(last, oldest uint64) Event {
		return Event{Data: fmt.Sprintf(`{"jsonrpc":"2.0","method":"_adapter/replay_gap","params":{"lastEventId":%d,"oldestAvailable":%d}}`, last, oldest)}
	}
	for _, tc := range []struct {
		name   string
		start  uint64 // the reader's position before the frames
		frames []Event
		err    string // empty: the sequence loses nothing
	}{
		{"consecutive gaps", 32519, []Event{ev(32520), ev(32521), gap(32521, 33127), gap(33126, 33500), ev(33500), ev(33501)}, ""},
		{"gap then oldest", 0, []Event{ev(1), gap(1, 10), ev(10)}, ""},
		{"gap from the start", 0, []Event{gap(0, 7), ev(7)}, ""},
		{"silent skip", 0, []Event{ev(1), ev(3)}, "silent skip from 1 to 3"},
		{"duplicate", 0, []Event{ev(1), ev(2), ev(2)}, "silent skip from 2 to 2"},
		{"gap past what was read", 32520, []Event{ev(32521), gap(33126, 34000)}, "gap says last 33126, reader was at 32521"},
		{"second gap not where the first ended", 0, []Event{ev(1), gap(1, 10), gap(12, 20)}, "gap says last 12, reader was at 9"},
		{"event after gap not the oldest", 0, []Event{ev(1), gap(1, 10), ev(11)}, "silent skip from 9 to 11"},
		{"empty gap", 0, []Event{ev(1), gap(1, 2)}, "loses nothing"},
		{"frame without id", 0, []Event{{Data: `{"jsonrpc":"2.0","method":"tick"}`}}, "not a gap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := SeqChecker{Pos: tc.start}
			var err error
			for _, f := range tc.frames {
				if err = c.Frame(f); err != nil {
					break
				}
			}
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("lossless sequence refused: %v", err)
			case tc.err != "" && err == nil:
				t.Fatalf("loss not caught, want %q", tc.err)
			case tc.err != "" && !strings.Contains(err.Error(), tc.err):
				t.Fatalf("error %q, want %q", err, tc.err)
			}
		})
	}
}
