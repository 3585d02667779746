package seqring

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// kept is a payload the model says the spool must still return.
type kept struct {
	pos int64
	b   []byte
}

// payload is n bytes that name their own position, so a read of the wrong
// place shows.
func payload(pos int64, n int) []byte {
	b := bytes.Repeat([]byte{byte(pos)}, n)
	copy(b, fmt.Sprintf("<%d>", pos))
	return b
}

// flushAll runs the flush jobs as a log does, outside any lock.
func flushAll(s *Spool) {
	for {
		j, ok := s.TakeFlush()
		if !ok {
			return
		}
		s.Flushed(j, j.Write())
	}
}

// read returns a kept payload from memory or the file.
func read(t *testing.T, s *Spool, k kept) []byte {
	t.Helper()
	if b, ok := s.Slice(k.pos, len(k.b)); ok {
		return b
	}
	b := make([]byte, len(k.b))
	if err := s.Reader().ReadSpilled(b, k.pos); err != nil {
		t.Fatalf("read %d bytes at %d: %v", len(k.b), k.pos, err)
	}
	return b
}

// A spool under a budget, with and without a file that wraps many times:
// every payload still needed reads back exactly, whether it is in memory
// or in the file, and what is held in memory stays near a segment.
func TestSpoolKeepsWhatIsNeeded(t *testing.T) {
	for _, withFile := range []bool{false, true} {
		t.Run(fmt.Sprintf("file=%v", withFile), func(t *testing.T) {
			const budget = 300 << 10
			spill := &porttest.MemSpill{}
			s := NewSpool(nil, budget, nil)
			if withFile {
				s = NewSpool(spill, budget, func(err error) { t.Fatalf("spill failed: %v", err) })
			}
			rng := rand.New(rand.NewPCG(1, 2))
			var model []kept
			var bytesKept int64
			for i := range 5000 {
				n := 1 + rng.IntN(2000)
				if i%97 == 0 {
					n = maxSegment + 1 + rng.IntN(50<<10) // larger than a segment
				}
				want := s.Head()
				p := payload(want, n)
				pos, stored := s.Append(p, false)
				if pos != want || !bytes.Equal(stored, p) {
					t.Fatalf("append %d: pos %d, stored equal %v", i, pos, bytes.Equal(stored, p))
				}
				model = append(model, kept{pos, p})
				bytesKept += int64(n)
				for bytesKept > budget {
					bytesKept -= int64(len(model[0].b))
					model = model[1:]
				}
				s.Drop(model[0].pos)
				flushAll(&s)
				if i%50 == 0 || i > 4990 {
					for _, k := range model {
						if got := read(t, &s, k); !bytes.Equal(got, k.b) {
							t.Fatalf("step %d: payload at %d reads %q…, want %q…", i, k.pos, got[:min(12, len(got))], k.b[:12])
						}
					}
				}
			}
			if withFile {
				if !s.Spilled() || spill.Files != 1 {
					t.Fatalf("spilled %v, %d files", s.Spilled(), spill.Files)
				}
				// In memory: the segment being filled, at most one waiting,
				// and the large payloads still kept.
				var large int64
				for _, k := range model {
					if len(k.b) > maxSegment {
						large += int64(cap(k.b))
					}
				}
				if m := s.Memory(); m > 2*maxSegment+large {
					t.Fatalf("memory %d with %d of large payloads", m, large)
				}
			} else if m := s.Memory(); m > budget+2*maxSegment {
				t.Fatalf("memory %d past the budget and two segments", m)
			}
			s.Reset()
			if spill.OpenFiles() != 0 || s.Memory() != 0 {
				t.Fatalf("after Reset: %d files open, %d bytes in memory", spill.OpenFiles(), s.Memory())
			}
		})
	}
}

// A payload larger than a segment that the caller gives up is kept as it
// is; a quiet spool whose payloads are all dropped lets its segment go.
func TestSpoolOwnedAndQuiet(t *testing.T) {
	s := NewSpool(nil, 1<<20, nil)
	big := make([]byte, maxSegment+1)
	if _, stored := s.Append(big, true); &stored[0] != &big[0] {
		t.Fatal("an owned large payload was copied")
	}
	small := []byte("x")
	if _, stored := s.Append(small, true); &stored[0] == &small[0] {
		t.Fatal("a small payload was kept in the caller's buffer")
	}
	s.Drop(s.Head())
	if s.Memory() != 0 {
		t.Fatalf("a spool with nothing needed holds %d bytes", s.Memory())
	}
	if _, stored := s.Append([]byte("again"), false); string(stored) != "again" || s.Memory() != minSegment {
		t.Fatalf("after dropping everything: %q, memory %d", stored, s.Memory())
	}
}

// A file that cannot be made, or fails a write, leaves the spool in memory
// with nothing lost; one that fails a read loses what it held, and says
// where that ends. The owner hears of the first failure only.
func TestSpoolFileFailures(t *testing.T) {
	for _, op := range []string{"create", "write"} {
		t.Run(op, func(t *testing.T) {
			spill := &porttest.MemSpill{Fail: func(o string) error {
				if o == op {
					return errors.New("no space left on device")
				}
				return nil
			}}
			var failures []error
			s := NewSpool(spill, 1<<20, func(err error) { failures = append(failures, err) })
			var model []kept
			for range 100 {
				p := payload(s.Head(), 1000)
				pos, _ := s.Append(p, false)
				model = append(model, kept{pos, p})
				flushAll(&s)
			}
			for _, k := range model {
				b, ok := s.Slice(k.pos, len(k.b))
				if !ok || !bytes.Equal(b, k.b) {
					t.Fatalf("payload at %d: in memory %v", k.pos, ok)
				}
			}
			if len(failures) != 1 || s.Spilled() {
				t.Fatalf("failures %v, spilled %v", failures, s.Spilled())
			}
		})
	}
	t.Run("read", func(t *testing.T) {
		var fail bool
		spill := &porttest.MemSpill{Fail: func(o string) error {
			if fail && o == "read" {
				return errors.New("input/output error")
			}
			return nil
		}}
		s := NewSpool(spill, 1<<20, nil)
		for range 100 {
			s.Append(payload(s.Head(), 1000), false)
			flushAll(&s)
		}
		fail = true
		if err := s.Reader().ReadSpilled(make([]byte, 10), 0); err == nil {
			t.Fatal("a failing read succeeded")
		}
		lost := s.Lose(errors.New("input/output error"))
		if lost == 0 || lost >= s.Head() {
			t.Fatalf("lost up to %d of %d", lost, s.Head())
		}
		if _, ok := s.Slice(lost, 10); !ok {
			t.Fatal("what was never written is not in memory")
		}
		s.Drop(lost)
		if spill.OpenFiles() != 0 {
			t.Fatal("a lost file is still open once nothing needs it")
		}
	})
}

// Storage no longer needed is given back in batches, never a byte still
// needed: the file's discarded ranges read as zeros, kept ones as written.
func TestSpoolDiscards(t *testing.T) {
	var discards int
	spill := &porttest.MemSpill{Fail: func(o string) error {
		if o == "discard" {
			discards++
		}
		return nil
	}}
	const size = 4 << 20
	s := NewSpool(spill, size, nil)
	var model []kept
	seen := 0
	for range 3000 {
		p := payload(s.Head(), 1000)
		pos, _ := s.Append(p, false)
		model = append(model, kept{pos, p})
		if len(model) > 500 { // a log shrunk well below its file
			model = model[1:]
		}
		s.Drop(model[0].pos)
		flushAll(&s)
		if discards == seen {
			continue
		}
		seen = discards
		for _, k := range model {
			if got := read(t, &s, k); !bytes.Equal(got, k.b) {
				t.Fatalf("payload at %d damaged by a discard", k.pos)
			}
		}
	}
	if discards == 0 {
		t.Fatal("nothing was given back")
	}
}
