package e2e

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/proc"
)

// TestStreamBurstNoLoss: a 100 000-update burst reaches a fast reader
// complete, in order, with no gap.
func TestStreamBurstNoLoss(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	d.Post("/v1/acp/burst?agent=mock", initMsg)
	st, b := d.Post("/v1/acp/burst", `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	if st != 200 {
		t.Fatalf("session/new: %d %s", st, b)
	}
	var sess struct {
		Result struct{ SessionID string } `json:"result"`
	}
	_ = json.Unmarshal(b, &sess)
	s := d.Stream("/v1/acp/burst", "Last-Event-ID", "2")

	const n = 100000
	prompt := fmt.Sprintf(`{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"stream %d"}]}}`, sess.Result.SessionID, n)
	if st, b := d.Post("/v1/acp/burst", prompt); st != 202 {
		t.Fatalf("prompt: %d %s", st, b)
	}
	next, lastID := 1, uint64(2)
	for {
		ev := s.NextWithin(t, 60*time.Second)
		id, err := strconv.ParseUint(ev.ID, 10, 64)
		if err != nil {
			t.Fatalf("frame without id (gap?) after %d chunks: %s", next-1, ev.Data)
		}
		if id != lastID+1 {
			t.Fatalf("sequence jumped from %d to %d", lastID, id)
		}
		lastID = id
		if strings.Contains(ev.Data, `"id":"p"`) {
			break
		}
		want := fmt.Sprintf(`"text":"mock: chunk %d"`, next)
		if strings.Contains(ev.Data, `"mock: chunk `) {
			if !strings.Contains(ev.Data, want) {
				t.Fatalf("chunk out of order: want %d, got %s", next, ev.Data)
			}
			next++
		}
	}
	if next-1 != n {
		t.Fatalf("got %d chunks, want %d", next-1, n)
	}
}

// TestStreamSlowReaderGetsGapFrame: a reader that stops reading while the
// agent writes more than the buffer holds, then goes on, gets every event
// still buffered and a gap frame for each evicted stretch, never a silent
// skip. A stretch evicted while the reader was already behind after a gap
// gets a second gap frame right after the first, starting where it ended.
func TestStreamSlowReaderGetsGapFrame(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t, "--replay-bytes", "262144")})
	if st, b := d.Post("/v1/acp/slow?agent=test", initMsg); st != 200 {
		t.Fatalf("bootstrap: %d %s", st, b)
	}
	s := d.Stream("/v1/acp/slow")
	s.NextWithin(t, 5*time.Second) // id 1, the initialize response

	const n = 300000 // ~25 MiB of SSE: far more than socket buffers absorb
	d.Post("/v1/acp/slow", fmt.Sprintf(`{"jsonrpc":"2.0","method":"burst","params":{"n":%d}}`, n))
	final := uint64(n + 1)
	deadline := time.Now().Add(60 * time.Second)
	for d.Server("slow").LastEventID < final {
		if time.Now().After(deadline) {
			t.Fatalf("agent did not finish the burst: %+v", d.Server("slow"))
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The position is checked frame by frame (see harness.SeqChecker): a gap must
	// start where the reader is, which after another gap is where that one
	// ended, not the last event read.
	seq := harness.SeqChecker{Pos: 1}
	for seq.Pos < final {
		ev := s.NextWithin(t, 30*time.Second)
		if err := seq.Frame(ev); err != nil {
			t.Fatal(err)
		}
		if ev.ID == "" {
			continue
		}
		if want := fmt.Sprintf(`"i":%d}`, seq.Pos-1); !strings.Contains(ev.Data, want) {
			t.Fatalf("event %d has wrong data %s", seq.Pos, ev.Data)
		}
	}
	if seq.Gaps == 0 {
		t.Fatal("reader never fell behind the buffer; the test proves nothing")
	}
	t.Logf("%d gap frame(s), %d right after another", seq.Gaps, seq.BackToBack)

	// Reconnecting with an evicted id: a gap first, then the oldest event.
	r := d.Stream("/v1/acp/slow", "Last-Event-ID", "5")
	ev := r.NextWithin(t, 5*time.Second)
	if ev.ID != "" || !strings.Contains(ev.Data, `"lastEventId":5,`) {
		t.Fatalf("reconnect with evicted id: %+v", ev)
	}
	// Reconnecting with a buffered id resumes right after it.
	r = d.Stream("/v1/acp/slow", "Last-Event-ID", strconv.FormatUint(final-3, 10))
	for want := final - 2; want <= final; want++ {
		if ev := r.NextWithin(t, 5*time.Second); ev.ID != strconv.FormatUint(want, 10) {
			t.Fatalf("resume: got id %q, want %d", ev.ID, want)
		}
	}
}

// TestDeleteKillsProcessGroup: DELETE leaves no process of the instance,
// grandchildren that ignore SIGTERM included, and returns promptly even
// when the agent itself ignores SIGTERM (SIGKILL after the grace period).
func TestDeleteKillsProcessGroup(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t, "--stop-grace", "500ms")})
	for _, ignoreTerm := range []bool{false, true} {
		t.Run(fmt.Sprintf("agent ignores TERM=%v", ignoreTerm), func(t *testing.T) {
			id := fmt.Sprintf("grp-%v", ignoreTerm)
			d.Post("/v1/acp/"+id+"?agent=test", initMsg)
			s := d.Stream("/v1/acp/" + id)
			s.NextWithin(t, 5*time.Second)
			if ignoreTerm {
				d.Post("/v1/acp/"+id, `{"jsonrpc":"2.0","method":"ignore-term"}`)
			}
			d.Post("/v1/acp/"+id, `{"jsonrpc":"2.0","method":"spawn"}`)
			grandchild := spawnedPID(t, s)
			pgid := d.Server(id).PID
			start := time.Now()
			if got := liveGroupMembers(pgid); len(got) < 2 {
				t.Fatalf("group %d members before DELETE: %v", pgid, got)
			}
			if st, _, _ := d.Do("DELETE", "/v1/acp/"+id, nil); st != 204 {
				t.Fatalf("DELETE: %d", st)
			}
			t.Logf("DELETE returned after %v", time.Since(start))
			if got := liveGroupMembers(pgid); len(got) != 0 {
				t.Fatalf("processes left in group %d after DELETE: %v", pgid, got)
			}
			if proc.Alive(grandchild) {
				t.Fatalf("grandchild %d survived", grandchild)
			}
		})
	}
}

func spawnedPID(t *testing.T, s *harness.Stream) int {
	t.Helper()
	for {
		ev := s.NextWithin(t, 5*time.Second)
		var m struct {
			Method string
			Params struct{ PID int }
		}
		if json.Unmarshal([]byte(ev.Data), &m) == nil && m.Method == "spawned" {
			return m.Params.PID
		}
	}
}

// TestShutdownStopsEverything: SIGTERM stops every instance, in parallel,
// within the grace period, and ends open streams.
func TestShutdownStopsEverything(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t, "--stop-grace", "1s")})
	var pgids, grandchildren []int
	var streams []*harness.Stream
	for i := 0; i < 4; i++ {
		id := fmt.Sprintf("sd-%d", i)
		d.Post("/v1/acp/"+id+"?agent=test", initMsg)
		s := d.Stream("/v1/acp/" + id)
		s.NextWithin(t, 5*time.Second)
		d.Post("/v1/acp/"+id, `{"jsonrpc":"2.0","method":"ignore-term"}`)
		d.Post("/v1/acp/"+id, `{"jsonrpc":"2.0","method":"spawn"}`)
		grandchildren = append(grandchildren, spawnedPID(t, s))
		pgids = append(pgids, d.Server(id).PID)
		streams = append(streams, s)
	}
	start := time.Now()
	_ = d.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("daemon did not exit after SIGTERM")
	}
	t.Logf("daemon exited %v after SIGTERM (grace 1s, 4 agents ignoring TERM)", time.Since(start))
	for _, p := range pgids {
		if got := liveGroupMembers(p); len(got) != 0 {
			t.Errorf("group %d still has %v", p, got)
		}
	}
	waitGone(t, 2*time.Second, grandchildren...)
	for _, s := range streams {
		if _, err := s.Next(); err == nil {
			// Drain whatever was in flight; the stream must end.
			for err == nil {
				_, err = s.Next()
			}
		}
	}
}
