package opencode

import (
	"strings"
	"testing"
	"time"
)

// Ids ascend (sessions' descend) whatever the wall clock does: stepped
// back by an hour, a new message's id still sorts after the last one.
func TestIDsFollowNoClockStepBack(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	g := &idGen{now: func() time.Time { return now }}
	hex := func(id string) string { _, rest, _ := strings.Cut(id, "_"); return rest[:12] }
	prevMsg, prevSes := hex(g.message()), hex(g.session())
	for _, step := range []time.Duration{0, time.Millisecond, -time.Hour, 0, -time.Millisecond, 2 * time.Hour} {
		now = now.Add(step)
		msg, ses := hex(g.message()), hex(g.session())
		if msg <= prevMsg {
			t.Fatalf("after a step of %v: message id %s not after %s", step, msg, prevMsg)
		}
		if ses >= prevSes {
			t.Fatalf("after a step of %v: session id %s not before %s", step, ses, prevSes)
		}
		prevMsg, prevSes = msg, ses
	}
	// With the clock moving on, ids carry its milliseconds again.
	want := uint64(now.UnixMilli()) * 0x1000
	var v uint64
	for _, c := range prevMsg {
		v = v*16 + uint64(strings.IndexRune("0123456789abcdef", c))
	}
	if v < want&(1<<48-1) {
		t.Fatalf("id %s behind the clock", prevMsg)
	}
}
