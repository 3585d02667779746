package acp

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// readStream reads a stream until it has n events.
func readStream(t *testing.T, s *Stream, n int) []Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var all []Event
	for len(all) < n {
		evs, gap, err := s.Read(ctx, make([]Event, 0, 16), 16, time.Minute)
		if err != nil || gap != nil {
			t.Fatalf("read: %+v %v (so far %s)", gap, err, dataOf(all))
		}
		all = append(all, evs...)
		s.Ack(0)
	}
	return all
}

func TestConnRoutesEachMessageOnce(t *testing.T) {
	r := newACPRig(t, Options{})
	ctx := context.Background()
	c, err := r.s.Connect(ctx, "mock", TransportHTTP)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.s.Conn(c.ID(), "mock"); err != nil || got.ID() != c.ID() {
		t.Fatalf("Conn(%s) = %v, %v", c.ID(), got, err)
	}
	for _, bad := range [][2]string{{c.ID(), "other"}, {"nope", "mock"}} {
		_, err := r.s.Conn(bad[0], bad[1])
		if wantKind(t, err, domain.KindInvalidRequest, ""); !errors.Is(err, ErrUnknownConnection) {
			t.Errorf("Conn(%q, %q) = %v, want ErrUnknownConnection (404)", bad[0], bad[1], err)
		}
	}
	// initialize-like: answered in the POST body, carried by no stream.
	resp, err := c.Post(ctx, frame(t, req(1, "echo")), "", true)
	if err != nil || !strings.Contains(string(resp), `"id":1`) {
		t.Fatalf("sync post = %s, %v", resp, err)
	}
	p := r.proc(t, 0)
	connStream, err := c.OpenStream("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer connStream.Close()
	if _, err := c.OpenStream("", nil); !domain.IsKind(err, domain.KindConflict) {
		t.Fatalf("second connection stream: %v, want conflict", err)
	}
	say(p, `{"jsonrpc":"2.0","method":"n","params":{"sessionId":"s1","k":"before-open"}}`)
	// Routed when the daemon reads it: wait for that before opening s1,
	// or the line may still be on its way and go to s1.
	gotConn := dataOf(readStream(t, connStream, 1))
	s1, err := c.OpenStream("s1", nil)
	if err != nil {
		t.Fatal(err)
	}
	say(p, `{"jsonrpc":"2.0","method":"n","params":{"sessionId":"s1","k":"on-s1"}}`)
	say(p, `{"jsonrpc":"2.0","method":"n","params":{"sessionId":"s2","k":"no-s2-stream"}}`)
	if _, err := c.Post(ctx, frame(t, req(2, "hold")), "s1", false); err != nil {
		t.Fatal(err)
	}
	held := r.nextHeld(t)
	say(p, `{"jsonrpc":"2.0","id":`+string(held.ID)+`,"result":{"k":"answer-s1"}}`)
	say(p, `{"jsonrpc":"2.0","method":"n","params":{"k":"no-session"}}`)

	gotConn += dataOf(readStream(t, connStream, 2))
	for _, want := range []string{"before-open", "no-s2-stream", "no-session"} {
		if !strings.Contains(gotConn, want) {
			t.Errorf("connection stream lacks %s:\n%s", want, gotConn)
		}
	}
	gotS1 := dataOf(readStream(t, s1, 2))
	for _, want := range []string{"on-s1", "answer-s1"} {
		if !strings.Contains(gotS1, want) {
			t.Errorf("s1 stream lacks %s:\n%s", want, gotS1)
		}
	}
	if strings.Contains(gotConn, `"echo"`) || strings.Contains(gotS1, `"echo"`) {
		t.Errorf("the response answered in a POST body went out again")
	}

	// A closed session stream: its messages go to the connection stream;
	// a reader that comes back resumes after what was delivered.
	say(p, `{"jsonrpc":"2.0","method":"n","params":{"sessionId":"s1","k":"late-s1"}}`)
	readStream(t, s1, 1)
	s1.Close()
	say(p, `{"jsonrpc":"2.0","method":"n","params":{"sessionId":"s1","k":"s1-closed"}}`)
	if got := dataOf(readStream(t, connStream, 1)); !strings.Contains(got, "s1-closed") {
		t.Errorf("connection stream got %s, want s1-closed", got)
	}
	s1, err = c.OpenStream("s1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	// Async request of session s1 pending when the agent exits: its error
	// response goes to the s1 stream.
	if _, err := c.Post(ctx, frame(t, req(3, "hold")), "s1", false); err != nil {
		t.Fatal(err)
	}
	r.nextHeld(t)
	p.Exit(porttest.ExitCode(1))
	if got := dataOf(readStream(t, s1, 1)); !strings.Contains(got, "agent process stopped") || strings.Contains(got, "late-s1") {
		t.Errorf("s1 after reopen got %s, want only the stopped response", got)
	}
}

func TestConnWebSocketStreamTakesAll(t *testing.T) {
	r := newACPRig(t, Options{})
	ctx := context.Background()
	c, err := r.s.Connect(ctx, "mock", TransportWebSocket)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.OpenStream("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := c.OpenStream("s1", nil); !domain.IsKind(err, domain.KindConflict) {
		t.Fatalf("session stream on a WebSocket: %v, want conflict", err)
	}
	if _, err := c.Post(ctx, frame(t, req(1, "echo")), "", false); err != nil {
		t.Fatal(err)
	}
	say(r.proc(t, 0), `{"jsonrpc":"2.0","method":"n","params":{"sessionId":"s1"}}`)
	got := dataOf(readStream(t, s, 2))
	if !strings.Contains(got, `"echo"`) || !strings.Contains(got, `"s1"`) {
		t.Errorf("WebSocket stream got %s", got)
	}
	c.Close(ctx)
	if _, err := r.s.Conn(c.ID(), "mock"); err == nil {
		t.Error("connection still there after Close")
	}
}

// TestConnHammerExactlyOnce: while the agent writes messages of three
// sessions and of none, session streams open, read a little and close
// again, and the connection stream reads throughout. Across all of them
// every message goes out exactly once (run with -race).
func TestConnHammerExactlyOnce(t *testing.T) {
	r := newACPRig(t, Options{})
	ctx := context.Background()
	c, err := r.s.Connect(ctx, "mock", TransportHTTP)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Post(ctx, frame(t, req(1, "echo")), "", true); err != nil {
		t.Fatal(err)
	}
	p := r.proc(t, 0)
	const n = 6000
	sessions := []string{"", "s1", "s2", "s3"}

	var mu sync.Mutex
	seen := map[uint64]int{}
	total := 0
	done := make(chan struct{})
	record := func(evs []Event) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range evs {
			seen[e.Seq]++
			total++
		}
		if total >= n {
			select {
			case <-done:
			default:
				close(done)
			}
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]Event, 0, 8)
			for round := 0; ; round++ {
				st, err := c.OpenStream(s, nil)
				if err != nil {
					t.Errorf("open %q: %v", s, err)
					return
				}
				// Session readers leave after a few reads; the connection
				// stream's reader stays.
				for reads := 0; s == "" || reads < 3+round%5; reads++ {
					evs, gap, err := st.Read(rctx, buf[:0], 8, 20*time.Millisecond)
					if err != nil || gap != nil {
						st.Close()
						if gap != nil {
							t.Errorf("gap on %q: %+v", s, gap)
						}
						return
					}
					record(evs)
					st.Ack(0)
					select {
					case <-done:
						st.Close()
						return
					default:
					}
				}
				st.Close()
			}
		}()
	}
	for i := 0; i < n; i++ {
		s := sessions[i%len(sessions)]
		if s == "" {
			say(p, `{"jsonrpc":"2.0","method":"n","params":{"i":`+strconv.Itoa(i)+`}}`)
		} else {
			say(p, `{"jsonrpc":"2.0","method":"n","params":{"sessionId":"`+s+`","i":`+strconv.Itoa(i)+`}}`)
		}
	}
	select {
	case <-done:
	case <-rctx.Done():
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for seq, k := range seen {
		if k != 1 {
			t.Errorf("event %d went out %d times", seq, k)
		}
	}
	if total != n {
		t.Errorf("%d events delivered, want %d", total, n)
	}
}

// A connection remembers at most MaxSessionStreams session streams: one
// more new session is refused (409), sessions it knows still open, so a
// client naming endless sessions cannot grow the stream table.
func TestConnSessionStreamsBounded(t *testing.T) {
	r := newACPRig(t, Options{})
	c, err := r.s.Connect(context.Background(), "mock", TransportHTTP)
	if err != nil {
		t.Fatal(err)
	}
	for i := range MaxSessionStreams {
		st, err := c.OpenStream("s"+strconv.Itoa(i), nil)
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		st.Close()
	}
	_, err = c.OpenStream("one-more", nil)
	wantKind(t, err, domain.KindConflict, "too many session streams on this connection")
	st, err := c.OpenStream("s0", nil)
	if err != nil {
		t.Fatalf("a known session: %v", err)
	}
	st.Close()
	if st, err := c.OpenStream("", nil); err != nil {
		t.Fatalf("the connection stream: %v", err)
	} else {
		st.Close()
	}
}
