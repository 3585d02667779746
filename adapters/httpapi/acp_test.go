package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// acpFixture is the HTTP adapter over real ACP use cases whose agents are
// fakes: requests with method "echo" are answered with
// {"jsonrpc":"2.0","id":<id>,"result":"echo"}; the test writes anything else
// through the process's AgentStdout.
type acpFixture struct {
	srv       *httptest.Server
	instances *acp.Instances
	runner    *porttest.FakeRunner
}

func newACPFixture(t *testing.T, opts acp.Options, cfg Config) *acpFixture {
	t.Helper()
	f := &acpFixture{runner: &porttest.FakeRunner{Agent: echoAgent}}
	f.instances = acp.NewInstances(opts, f.runner, porttest.LaunchAny)
	cfg.Instances = f.instances
	f.srv = httptest.NewServer(New(cfg))
	t.Cleanup(func() {
		f.srv.CloseClientConnections()
		f.srv.Close()
		_ = f.instances.Close(context.Background())
	})
	return f
}

func echoAgent(_ domain.LaunchSpec, p *porttest.FakeProcess) {
	in := bufio.NewReader(p.AgentStdin)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			p.Exit(porttest.ExitCode(0))
			return
		}
		f, perr := domain.ParseFrame(bytes.TrimSuffix(line, []byte("\n")))
		if perr == nil && f.Kind == domain.FrameRequest && f.Method == "echo" {
			fmt.Fprintf(p.AgentStdout, `{"jsonrpc":"2.0","id":%s,"result":"echo"}`+"\n", f.ID)
		}
	}
}

const jsonCTHeader = "application/json"

// bootstrap starts server id s with agent a and returns its process.
func (f *acpFixture) bootstrap(t *testing.T, id string) *porttest.FakeProcess {
	t.Helper()
	resp, body := doHTTP(t, "POST", f.srv.URL+"/v1/acp/"+id+"?agent=a", `{"jsonrpc":"2.0","method":"hello"}`, map[string]string{"Content-Type": jsonCTHeader})
	if resp.StatusCode != 202 || len(body) != 0 {
		t.Fatalf("bootstrap: %d %s", resp.StatusCode, body)
	}
	ps := f.runner.Processes()
	return ps[len(ps)-1]
}

// sse is an open event stream.
type sse struct {
	resp *http.Response
	r    *bufio.Reader
}

// stream opens GET /v1/acp/{id}; the request ends with the test.
func (f *acpFixture) stream(t *testing.T, id string, hdr map[string]string) *sse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/v1/acp/"+id, nil)
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %d %s", resp.StatusCode, b)
	}
	return &sse{resp: resp, r: bufio.NewReader(resp.Body)}
}

// next reads one frame, up to and including its blank line.
func (s *sse) next(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for {
		line, err := s.r.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			t.Fatalf("stream ended: %v after %q", err, b.String())
		}
		if line == "\n" {
			return b.String()
		}
	}
}

// nextEvent reads frames until one that is not a heartbeat.
func (s *sse) nextEvent(t *testing.T) string {
	t.Helper()
	for {
		if fr := s.next(t); fr != ": heartbeat\n\n" {
			return fr
		}
	}
}

func event(seq int, data string) string {
	return fmt.Sprintf("event: message\nid: %d\ndata: %s\n\n", seq, data)
}

func TestSSEFrames(t *testing.T) {
	f := newACPFixture(t, acp.Options{}, Config{Heartbeat: time.Hour})
	p := f.bootstrap(t, "s")
	first := `{"jsonrpc":"2.0","method":"session/update","params":{"text":"é \u00e9 \"q\""}}`
	second := `{"jsonrpc":"2.0","id":"x","result":{ "spaced" : true }}`
	fmt.Fprintln(p.AgentStdout, first)
	fmt.Fprintln(p.AgentStdout, second)

	s := f.stream(t, "s", nil)
	for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := s.resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if got := s.next(t); got != event(1, first) {
		t.Errorf("frame 1 = %q", got)
	}
	if got := s.next(t); got != event(2, second) {
		t.Errorf("frame 2 = %q", got)
	}
	// Live events follow the replay with no gap and no duplicate.
	third := `{"jsonrpc":"2.0","method":"live"}`
	fmt.Fprintln(p.AgentStdout, third)
	if got := s.next(t); got != event(3, third) {
		t.Errorf("frame 3 = %q", got)
	}

	// Resuming after 1 starts at 2; resuming at the newest waits for live.
	r := f.stream(t, "s", map[string]string{"Last-Event-ID": "1"})
	if got := r.next(t); got != event(2, second) {
		t.Errorf("resumed frame = %q", got)
	}
	live := f.stream(t, "s", map[string]string{"Last-Event-ID": "3"})
	fmt.Fprintln(p.AgentStdout, `{"n":4}`)
	if got := live.next(t); got != event(4, `{"n":4}`) {
		t.Errorf("live frame = %q", got)
	}
	// Empty Last-Event-ID means none.
	if got := f.stream(t, "s", map[string]string{"Last-Event-ID": ""}).next(t); got != event(1, first) {
		t.Errorf("empty Last-Event-ID: %q", got)
	}
}

func TestSSEHeartbeat(t *testing.T) {
	f := newACPFixture(t, acp.Options{}, Config{Heartbeat: 20 * time.Millisecond})
	f.bootstrap(t, "s")
	s := f.stream(t, "s", nil)
	if got := s.next(t); got != ": heartbeat\n\n" {
		t.Errorf("idle stream sent %q", got)
	}
	if got := s.next(t); got != ": heartbeat\n\n" {
		t.Errorf("second idle frame %q", got)
	}
}

// A reader whose position was evicted gets one gap frame, without an id,
// naming what it missed, then the oldest buffered events.
func TestSSEGap(t *testing.T) {
	const size = 30
	f := newACPFixture(t, acp.Options{ReplayBytes: 3 * (size + 64)}, Config{Heartbeat: time.Hour})
	p := f.bootstrap(t, "s")
	watch := f.stream(t, "s", nil)
	line := func(n int) string { return fmt.Sprintf(`{"n":%d,"pad":"%s"}`, n, strings.Repeat("x", size-17)) }
	for n := 1; n <= 10; n++ {
		fmt.Fprintln(p.AgentStdout, line(n))
	}
	// Read up to event 10 (perhaps over a gap): then all ten are in the log.
	for watch.next(t) != event(10, line(10)) {
	}

	s := f.stream(t, "s", map[string]string{"Last-Event-ID": "2"})
	want := "event: message\ndata: " + `{"jsonrpc":"2.0","method":"_adapter/replay_gap","params":{"lastEventId":2,"oldestAvailable":8}}` + "\n\n"
	if got := s.next(t); got != want {
		t.Fatalf("first frame %q, want %q", got, want)
	}
	for n := 8; n <= 10; n++ {
		if got := s.next(t); got != event(n, line(n)) {
			t.Errorf("frame %q, want event %d", got, n)
		}
	}
}

// DELETE ends the streams of the instance; an agent exiting does not.
func TestSSELifetime(t *testing.T) {
	f := newACPFixture(t, acp.Options{}, Config{Heartbeat: 20 * time.Millisecond})
	p := f.bootstrap(t, "s")
	s := f.stream(t, "s", nil)
	p.Exit(porttest.ExitCode(0))
	if got := s.nextEvent(t); got != event(1, string(domain.AgentExitedMessage(true, func() *int { z := 0; return &z }()))) {
		t.Errorf("exit frame %q", got)
	}
	if got := s.next(t); got != ": heartbeat\n\n" {
		t.Errorf("after the exit: %q", got)
	}

	resp, body := doHTTP(t, "DELETE", f.srv.URL+"/v1/acp/s", "", nil)
	if resp.StatusCode != 204 || len(body) != 0 {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, body)
	}
	rest, err := io.ReadAll(s.r)
	if err != nil {
		t.Fatalf("stream did not end cleanly: %v", err)
	}
	if strings.Trim(strings.ReplaceAll(string(rest), ": heartbeat\n\n", ""), "\n") != "" {
		t.Errorf("after DELETE the stream sent %q", rest)
	}
	for _, id := range []string{"s", "never-existed"} {
		if resp, _ := doHTTP(t, "DELETE", f.srv.URL+"/v1/acp/"+id, "", nil); resp.StatusCode != 204 {
			t.Errorf("DELETE %s again: %d", id, resp.StatusCode)
		}
	}
}

func TestSSERequestChecks(t *testing.T) {
	f := newACPFixture(t, acp.Options{}, Config{Heartbeat: time.Hour})
	f.bootstrap(t, "s")
	tests := []struct {
		name   string
		id     string
		hdr    map[string]string
		status int
		kind   string
		detail string
	}{
		{"json only", "s", map[string]string{"Accept": "application/json"}, 406, "not_acceptable", "not acceptable: this endpoint only produces text/event-stream"},
		{"bad Last-Event-ID", "s", map[string]string{"Last-Event-ID": "abc"}, 400, "invalid_request", "invalid request: Last-Event-ID must be a positive integer"},
		{"negative Last-Event-ID", "s", map[string]string{"Last-Event-ID": "-1"}, 400, "invalid_request", "invalid request: Last-Event-ID must be a positive integer"},
		{"Last-Event-ID checked before lookup", "nope", map[string]string{"Last-Event-ID": "x"}, 400, "invalid_request", ""},
		{"unknown id", "nope", nil, 404, "session_not_found", "session not found: nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := doHTTP(t, "GET", f.srv.URL+"/v1/acp/"+tt.id, "", tt.hdr)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			m := problemOf(t, resp, body)
			wantProblem(t, m, tt.kind, tt.detail)
			if tt.kind == "session_not_found" && m["sessionId"] != tt.id {
				t.Errorf("sessionId %v", m["sessionId"])
			}
		})
	}
	for _, accept := range []string{"text/event-stream", "text/*", "*/*", "application/json;q=0.5, text/event-stream"} {
		req, _ := http.NewRequest("GET", f.srv.URL+"/v1/acp/s", nil)
		req.Header.Set("Accept", accept)
		ctx, cancel := context.WithCancel(context.Background())
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Errorf("Accept %q: %d", accept, resp.StatusCode)
		}
		cancel()
		resp.Body.Close()
	}
}

func TestACPPostChecks(t *testing.T) {
	f := newACPFixture(t, acp.Options{}, Config{MaxACPBody: 64})
	f.bootstrap(t, "s")
	note := `{"jsonrpc":"2.0","method":"n"}`
	tests := []struct {
		name    string
		path    string
		body    string
		hdr     map[string]string
		status  int
		kind    string
		detail  string // exact, or a prefix when it ends with "..."
		details map[string]any
	}{
		{"no content type", "/v1/acp/s", note, nil, 415, "unsupported_media_type", "unsupported media type: expected Content-Type: application/json", nil},
		{"text/plain", "/v1/acp/s", note, map[string]string{"Content-Type": "text/plain"}, 415, "unsupported_media_type", "", nil},
		{"content type first", "/v1/acp/s", "[", map[string]string{"Content-Type": "text/plain", "Accept": "text/html"}, 415, "unsupported_media_type", "", nil},
		{"charset allowed", "/v1/acp/s", note, map[string]string{"Content-Type": "application/json; charset=utf-8"}, 202, "", "", nil},
		{"accept html", "/v1/acp/s", note, map[string]string{"Content-Type": jsonCTHeader, "Accept": "text/html"}, 406, "not_acceptable", "not acceptable: this endpoint only produces application/json", nil},
		{"accept q=0", "/v1/acp/s", note, map[string]string{"Content-Type": jsonCTHeader, "Accept": "application/json;q=0"}, 406, "not_acceptable", "", nil},
		{"accept wildcard", "/v1/acp/s", note, map[string]string{"Content-Type": jsonCTHeader, "Accept": "application/*"}, 202, "", "", nil},
		{"accept before body", "/v1/acp/s", "[", map[string]string{"Content-Type": jsonCTHeader, "Accept": "text/html"}, 406, "not_acceptable", "", nil},
		{"batch", "/v1/acp/s", `[` + note + `]`, map[string]string{"Content-Type": jsonCTHeader}, 400, "invalid_request", "invalid request: request body must be a JSON-RPC object", nil},
		{"scalar", "/v1/acp/s", `7`, map[string]string{"Content-Type": jsonCTHeader}, 400, "invalid_request", "invalid request: request body must be a JSON-RPC object", nil},
		{"invalid JSON", "/v1/acp/s", `{"a":`, map[string]string{"Content-Type": jsonCTHeader}, 400, "invalid_request", "invalid request: invalid JSON body: ...", nil},
		{"empty body", "/v1/acp/s", ``, map[string]string{"Content-Type": jsonCTHeader}, 400, "invalid_request", "invalid request: invalid JSON body: ...", nil},
		{"too large", "/v1/acp/s", `{"pad":"` + strings.Repeat("x", 64) + `"}`, map[string]string{"Content-Type": jsonCTHeader}, 413, "payload_too_large",
			"payload too large: request body exceeds 64 bytes", map[string]any{"limitBytes": float64(64)}},
		{"first POST without agent", "/v1/acp/new", note, map[string]string{"Content-Type": jsonCTHeader}, 400, "invalid_request",
			"invalid request: missing required 'agent' query parameter for first POST to /v1/acp/new", nil},
		{"empty agent", "/v1/acp/new?agent=", note, map[string]string{"Content-Type": jsonCTHeader}, 400, "unsupported_agent", "", nil},
		{"other agent", "/v1/acp/s?agent=b", note, map[string]string{"Content-Type": jsonCTHeader}, 409, "conflict",
			"conflict: server 's' already exists for agent 'a'; requested 'b'", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := doHTTP(t, "POST", f.srv.URL+tt.path, tt.body, tt.hdr)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if tt.kind == "" {
				if len(body) != 0 {
					t.Errorf("202 with a body: %s", body)
				}
				return
			}
			m := problemOf(t, resp, body)
			detail := tt.detail
			if prefix, ok := strings.CutSuffix(detail, "..."); ok {
				if d, _ := m["detail"].(string); !strings.HasPrefix(d, prefix) {
					t.Errorf("detail %q, want prefix %q", d, prefix)
				}
				detail = ""
			}
			wantProblem(t, m, tt.kind, detail)
			if tt.details != nil && fmt.Sprint(m["details"]) != fmt.Sprint(tt.details) {
				t.Errorf("details %v, want %v", m["details"], tt.details)
			}
		})
	}
	if n := len(f.runner.Processes()); n != 1 {
		t.Errorf("%d processes: a rejected POST started an agent", n)
	}
}

func TestACPPostAndList(t *testing.T) {
	f := newACPFixture(t, acp.Options{}, Config{})
	f.bootstrap(t, "b")
	f.bootstrap(t, "a")
	resp, body := doHTTP(t, "POST", f.srv.URL+"/v1/acp/a", `{"jsonrpc":"2.0","id":"k[1]","method":"echo"}`, map[string]string{"Content-Type": jsonCTHeader})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || string(body) != `{"jsonrpc":"2.0","id":"k[1]","result":"echo"}` {
		t.Errorf("sync request: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	resp, body = doHTTP(t, "GET", f.srv.URL+"/v1/acp", "", nil)
	var list struct {
		Servers []map[string]any `json:"servers"`
	}
	if err := json.Unmarshal(body, &list); err != nil || resp.StatusCode != 200 {
		t.Fatalf("list: %d %s", resp.StatusCode, body)
	}
	if len(list.Servers) != 2 || list.Servers[0]["serverId"] != "a" || list.Servers[1]["serverId"] != "b" {
		t.Fatalf("servers %v", list.Servers)
	}
	for _, k := range []string{"serverId", "agent", "createdAtMs", "pid", "state", "pendingRequests", "subscribers", "lastEventId", "bufferedEvents", "bufferedBytes"} {
		if _, ok := list.Servers[0][k]; !ok {
			t.Errorf("server entry lacks %s: %v", k, list.Servers[0])
		}
	}
	if list.Servers[0]["agent"] != "a" || list.Servers[0]["state"] != "running" || list.Servers[0]["lastEventId"] != float64(1) {
		t.Errorf("entry %v", list.Servers[0])
	}
}
