package route

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
)

// hookWriter is a ResponseWriter whose flushes run a hook in the stream
// writer's goroutine, between two reads of the cursor: a test can make
// things happen at an exact point of the stream. failAfter > 0 makes
// writes fail with a deadline error once that many body bytes were taken,
// the last write partly, as a socket does when its deadline passes.
type hookWriter struct {
	hdr       http.Header
	body      bytes.Buffer
	onFlush   func(body []byte)
	failAfter int
	failed    bool
	lateCalls int // writes and flushes after a write failed
}

func (w *hookWriter) Header() http.Header {
	if w.hdr == nil {
		w.hdr = http.Header{}
	}
	return w.hdr
}

func (w *hookWriter) WriteHeader(int) {}

func (w *hookWriter) Write(p []byte) (int, error) {
	if w.failed {
		w.lateCalls++
		return 0, os.ErrDeadlineExceeded
	}
	if w.failAfter > 0 && w.body.Len()+len(p) > w.failAfter {
		n := w.failAfter - w.body.Len()
		w.body.Write(p[:n])
		w.failed = true
		return n, os.ErrDeadlineExceeded
	}
	return w.body.Write(p)
}

func (w *hookWriter) FlushError() error {
	if w.failed {
		w.lateCalls++
		return os.ErrDeadlineExceeded
	}
	if w.onFlush != nil {
		w.onFlush(w.body.Bytes())
	}
	return nil
}

func (w *hookWriter) SetWriteDeadline(time.Time) error { return nil }

// sseFrame is one parsed frame: an event with its id, or a gap.
type sseFrame struct {
	id          uint64 // 0 for a gap
	gapLast     uint64
	gapOldest   uint64
	data        string
	unterminate bool // cut before its blank line
}

func parseFrames(t *testing.T, body []byte) []sseFrame {
	t.Helper()
	var frames []sseFrame
	for _, raw := range strings.SplitAfter(string(body), "\n\n") {
		if raw == "" {
			continue
		}
		f := sseFrame{unterminate: !strings.HasSuffix(raw, "\n\n")}
		for _, line := range strings.Split(strings.TrimSuffix(raw, "\n\n"), "\n") {
			switch {
			case strings.HasPrefix(line, "id: "):
				f.id, _ = strconv.ParseUint(line[4:], 10, 64)
			case strings.HasPrefix(line, "data: "):
				f.data = line[6:]
			}
		}
		if strings.HasPrefix(raw, ":") {
			continue // heartbeat
		}
		if f.id == 0 && !f.unterminate {
			var g struct {
				Method string
				Params struct {
					LastEventID     uint64 `json:"lastEventId"`
					OldestAvailable uint64 `json:"oldestAvailable"`
				}
			}
			if err := json.Unmarshal([]byte(f.data), &g); err != nil || g.Method != "_adapter/replay_gap" {
				t.Fatalf("frame without id is not a gap: %q", raw)
			}
			f.gapLast, f.gapOldest = g.Params.LastEventID, g.Params.OldestAvailable
		}
		frames = append(frames, f)
	}
	return frames
}

// checkNoLoss walks the complete frames from position pos (the id the
// reader had): each event is the next one, each gap starts where the
// reader is and moves it to just before its oldestAvailable. It returns
// the final position.
func checkNoLoss(t *testing.T, frames []sseFrame, pos uint64) uint64 {
	t.Helper()
	for _, f := range frames {
		switch {
		case f.unterminate:
			// A frame cut by the end of the stream: an SSE client drops it
			// and resumes after the last complete id.
		case f.id == 0:
			if f.gapLast != pos || f.gapOldest <= pos+1 {
				t.Fatalf("gap {last %d, oldest %d} with the reader at %d", f.gapLast, f.gapOldest, pos)
			}
			pos = f.gapOldest - 1
		default:
			if f.id != pos+1 {
				t.Fatalf("silent skip from %d to %d", pos, f.id)
			}
			pos = f.id
		}
	}
	return pos
}

// Two evictions in a row, the second while the first gap frame is being
// flushed: the stream has two gap frames with no event between them, and
// the second starts exactly where the first ended (its lastEventId is the
// first's oldestAvailable-1, not the last event the reader got). This is
// the sequence behind the flakes of e2e TestStreamSlowReaderGetsGapFrame
// ("gap says last 33126, reader had 32521"): nothing was lost, the test
// compared the second gap with the wrong position.
func TestStreamSSEConsecutiveGapsAreContiguous(t *testing.T) {
	const size = 40
	data := func(n int) []byte { return fmt.Appendf(nil, `{"n":%06d,"pad":"%s"}`, n, strings.Repeat("x", size-21)) }
	log := acp.NewEventLog(5 * (size + 64)) // five events
	cur := log.Subscribe(nil)               // at 1, before any event
	defer cur.Close()
	appendN := func(from, to int) {
		for n := from; n <= to; n++ {
			log.Append(data(n))
		}
	}
	appendN(1, 20) // 1..15 evicted: the first Read is a gap to 16

	w := &hookWriter{}
	evicted := false
	w.onFlush = func(body []byte) {
		switch {
		case !evicted && bytes.Contains(body, []byte("_adapter/replay_gap")):
			// The first gap frame is on its way; the agent goes on and
			// 16..35 are evicted before the writer reads again.
			evicted = true
			appendN(21, 40)
		case bytes.HasSuffix(body, []byte("id: 40\ndata: "+string(data(40))+"\n\n")):
			log.Close()
		}
	}
	e := &Env{Heartbeat: time.Hour, StreamWriteTimeout: time.Minute}
	e.StreamSSE(context.Background(), w, httptest.NewRequest("GET", "/", nil), cur)

	frames := parseFrames(t, w.body.Bytes())
	if len(frames) < 2 || frames[0].id != 0 || frames[1].id != 0 {
		t.Fatalf("want two gap frames first, got %+v", frames)
	}
	if g := frames[0]; g.gapLast != 0 || g.gapOldest != 16 {
		t.Fatalf("first gap {%d, %d}, want {0, 16}", g.gapLast, g.gapOldest)
	}
	if g := frames[1]; g.gapLast != 15 || g.gapOldest != 36 {
		t.Fatalf("second gap {%d, %d}, want {15, 36}: it must start where the first ended", g.gapLast, g.gapOldest)
	}
	if pos := checkNoLoss(t, frames, 0); pos != 40 {
		t.Fatalf("stream ended at %d, want 40", pos)
	}
	for _, f := range frames[2:] {
		if f.data != string(data(int(f.id))) {
			t.Fatalf("event %d carries %s", f.id, f.data)
		}
	}
}

// A write that fails partway (its deadline passed mid-batch) ends the
// stream at once: no later write or flush, no ack of the batch, and the
// handler does not wait for another event. What reached the peer is a
// prefix of the stream, possibly ending in a cut frame that an SSE client
// drops before it resumes with Last-Event-ID.
func TestStreamSSEWriteFailureEndsStream(t *testing.T) {
	log := acp.NewEventLog(64 << 20)
	cur := log.Subscribe(nil)
	defer cur.Close()
	for n := range 2000 {
		log.Append(fmt.Appendf(nil, `{"n":%d}`, n+1))
	}
	// Past the first batch's 64 KiB buffer, inside a frame.
	w := &hookWriter{failAfter: 70001}
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&Env{Heartbeat: time.Hour, StreamWriteTimeout: time.Minute}).StreamSSE(context.Background(), w, httptest.NewRequest("GET", "/", nil), cur)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		log.Close()
		<-done
		t.Fatal("StreamSSE went on after a failed write")
	}
	if !w.failed {
		t.Fatal("the writer never reached its failure point")
	}
	if w.lateCalls != 0 {
		t.Fatalf("%d writes/flushes after the failed one", w.lateCalls)
	}
	frames := parseFrames(t, w.body.Bytes())
	if last := frames[len(frames)-1]; !last.unterminate {
		t.Fatalf("want the stream cut inside a frame, last frame %+v", last)
	}
	pos := checkNoLoss(t, frames, 0)
	if pos == 0 || pos >= 2000 {
		t.Fatalf("complete events up to %d", pos)
	}
	// The batch that failed was not acked: a flush barrier on the cut
	// event is not met (a cancelled context makes it answer at once).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if log.WaitFlushed(ctx, pos+1, time.Hour) {
		t.Fatalf("event %d, cut by the failed write, was acked", pos+1)
	}
	if !log.WaitFlushed(ctx, 1, time.Hour) {
		t.Fatal("batches written before the failure were not acked")
	}
}

// Over a real socket, a reader that takes nothing for longer than the
// stream write timeout is dropped: net/http does not go on with the
// response after the deadline error, so the peer reads a contiguous prefix
// and then the end of the connection, never a stream that continues past
// missing bytes.
func TestStreamSSEWriteTimeoutOverSocket(t *testing.T) {
	const total = 100000 // ~9 MiB of frames: more than loopback buffers hold
	log := acp.NewEventLog(64 << 20)
	defer log.Close()
	for n := range total {
		log.Append(fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"tick","params":{"i":%d}}`, n+1))
	}
	e := &Env{Heartbeat: time.Hour, StreamWriteTimeout: 200 * time.Millisecond}
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		cur := log.Subscribe(nil)
		defer cur.Close()
		e.StreamSSE(r.Context(), w, r, cur)
	}))
	defer srv.Close()

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(16 << 10)
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// The stream writer returns only on a write error here: the log stays
	// open and the client stays connected.
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the stream writer did not give up on a reader that reads nothing")
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("body ended cleanly (%v) after %d bytes: a dropped stream must not look complete", err, len(body))
	}
	pos := checkNoLoss(t, parseFrames(t, body), 0)
	if pos == 0 || pos >= total {
		t.Fatalf("complete events up to %d of %d", pos, total)
	}
	t.Logf("reader got events 1..%d, then the connection ended (%v)", pos, err)
}
