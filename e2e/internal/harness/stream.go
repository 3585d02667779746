package harness

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
)

// Event is one SSE frame of an ACP stream, with its data as a string for
// the tests' comparisons.
type Event struct {
	Event string // the event name; "message" on the ACP stream
	ID    string // empty for frames without id (gap frames)
	Data  string
}

// Stream reads events from a GET of an event stream. It parses with the
// public Go client's SSE reader, so the tests read the wire as Go users of
// the daemon do and there is one SSE parser to get right.
type Stream struct {
	resp   *http.Response
	r      *httpclient.SSEReader
	cancel context.CancelFunc
}

// Stream opens GET path as text/event-stream (headers as name, value
// pairs); anything but 200 fails the test. It is closed at cleanup.
func (d *Daemon) Stream(path string, headers ...string) *Stream {
	d.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.URL+path, nil)
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		d.t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		d.t.Fatalf("GET %s: status %d: %s", path, resp.StatusCode, b)
	}
	s := NewStream(resp, cancel)
	d.t.Cleanup(s.Close)
	return s
}

// NewStream reads a response a test opened itself, for requests Stream
// does not make (a retry on 409, another transport, other headers); cancel
// (may be nil) ends its request on Close. The caller closes it.
func NewStream(resp *http.Response, cancel context.CancelFunc) *Stream {
	if cancel == nil {
		cancel = func() {}
	}
	return &Stream{resp: resp, r: httpclient.NewSSEReader(resp.Body, 0), cancel: cancel}
}

// Close ends the stream (and unblocks a Next in progress).
func (s *Stream) Close() {
	s.cancel()
	s.resp.Body.Close()
}

// Next returns the next event, skipping comments; io.EOF when the stream
// ends.
func (s *Stream) Next() (Event, error) {
	ev, err := s.r.Next()
	if err != nil {
		return Event{}, err
	}
	return Event{Event: ev.Event, ID: ev.ID, Data: string(ev.Data)}, nil
}

// NextWithin is Next with a deadline, failing the test on timeout or at
// the end of the stream.
func (s *Stream) NextWithin(t testing.TB, d time.Duration) Event {
	t.Helper()
	type res struct {
		ev  Event
		err error
	}
	ch := make(chan res, 1)
	go func() { ev, err := s.Next(); ch <- res{ev, err} }()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("stream ended: %v", r.err)
		}
		return r.ev
	case <-time.After(d):
		s.Close()
		t.Fatalf("no event within %v", d)
	}
	return Event{}
}

// Until reads events until pred accepts one, failing after limit.
func (s *Stream) Until(t testing.TB, limit time.Duration, pred func(Event) bool) Event {
	t.Helper()
	timer := time.AfterFunc(limit, s.Close)
	defer timer.Stop()
	for {
		ev, err := s.Next()
		if err != nil {
			t.Fatalf("stream ended before the awaited event (limit %v): %v", limit, err)
		}
		if pred(ev) {
			return ev
		}
	}
}

// HasMethod accepts a JSON-RPC notification or request of method.
func HasMethod(method string) func(Event) bool {
	return func(ev Event) bool { return strings.Contains(ev.Data, `"method":"`+method+`"`) }
}
