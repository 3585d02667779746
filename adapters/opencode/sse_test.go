package opencode

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestGlobalEventsAreWrappedWithTheirDirectory(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ev := h.events("/global/event")
	h.ok("POST", "/session?directory=/elsewhere", `{}`, nil)
	e := ev.next()
	var g struct {
		Directory string `json:"directory"`
		Payload   struct {
			Type string `json:"type"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(e.Raw, &g); err != nil || g.Directory != "/elsewhere" || g.Payload.Type != "session.created" {
		t.Errorf("global event %s", e.Raw)
	}
}

func TestEventsOfOneDirectory(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ev := h.events("/event", "X-Opencode-Directory", "%2Fmine")
	h.ok("POST", "/session?directory=/theirs", `{}`, nil)
	h.ok("POST", "/session?directory=/mine", `{}`, nil)
	e := ev.next()
	var p struct {
		Info sessionInfo `json:"info"`
	}
	e.prop(&p)
	if e.Type != "session.created" || p.Info.Directory != "/mine" {
		t.Errorf("first event %s: another directory's events leaked", e.Raw)
	}
}

func TestEventsResumeAfterLastEventID(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ev := h.events("/event")
	id := h.newSession()
	first := ev.next()
	n, err := strconv.ParseUint(first.ID, 10, 64)
	if err != nil {
		t.Fatalf("event without id: %q", first.ID)
	}
	h.prompt(id, "hi")
	again := h.events("/event", "Last-Event-ID", strconv.FormatUint(n, 10))
	e := again.next()
	if e.ID != strconv.FormatUint(n+1, 10) {
		t.Errorf("resumed at %s, want %d", e.ID, n+1)
	}
}

func TestEventStreamsAreBounded(t *testing.T) {
	h := newHarness(t, harnessOptions{cfg: func(c *Config) { c.MaxSubscribers = 2 }})
	h.events("/event")
	h.events("/global/event")
	if code, b := h.do("GET", "/event", ""); code != http.StatusServiceUnavailable {
		t.Errorf("a third stream: %d %s", code, b)
	}
}

func TestReaderLeftBehindIsDisconnected(t *testing.T) {
	// The stream's buffer holds 64 KiB; a reader that takes nothing while
	// more goes by has its stream ended (it reconnects and resyncs, as
	// OpenCode's clients do) rather than holding the daemon's memory.
	h := newHarness(t, harnessOptions{cfg: func(c *Config) { c.EventBytes = 64 << 10 }})
	w := &stalledWriter{header: http.Header{}, release: make(chan struct{}), wrote: make(chan struct{}, 1)}
	done := make(chan error, 1)
	r := httptest.NewRequest("GET", "/opencode/event", nil)
	go func() { done <- h.a.serveEvents(w, r, false) }()
	<-w.wrote // server.connected is out; the next write stalls
	h.a.publish("test.one", map[string]string{})
	<-w.wrote
	for range 200 {
		h.a.publish("test.pad", map[string]string{"pad": strings.Repeat("x", 1024)})
	}
	close(w.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// stalledWriter is a ResponseWriter whose writes after the first flush
// wait for release, as a peer that reads nothing.
type stalledWriter struct {
	header  http.Header
	mu      sync.Mutex
	flushes int
	release chan struct{}
	wrote   chan struct{}
}

func (w *stalledWriter) Header() http.Header { return w.header }
func (w *stalledWriter) WriteHeader(int)     {}
func (w *stalledWriter) Write(b []byte) (int, error) {
	return len(b), nil
}

// Flush stalls from the second flush on: the first writes the stream's
// opening, the second the first event.
func (w *stalledWriter) Flush() {
	w.mu.Lock()
	w.flushes++
	n := w.flushes
	w.mu.Unlock()
	if n >= 2 {
		select {
		case w.wrote <- struct{}{}:
		default:
		}
		if n == 3 {
			<-w.release
		}
		return
	}
	select {
	case w.wrote <- struct{}{}:
	default:
	}
}
