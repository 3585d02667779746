package opencode

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// harness is an adapter over real ACP instances whose agent is a
// fakeAgent, served on a loopback test server.
type harness struct {
	t         testing.TB
	a         *Adapter
	store     *Store
	instances *acp.Instances
	runner    *porttest.FakeRunner
	agent     *fakeAgent
	srv       *httptest.Server
}

type harnessOptions struct {
	agent  *fakeAgent
	dbPath string // "" in memory
	cfg    func(*Config)
	store  StoreOptions
	launch porttest.LaunchFunc // nil: porttest.LaunchAny
}

func newHarness(t testing.TB, o harnessOptions) *harness {
	t.Helper()
	if o.agent == nil {
		o.agent = &fakeAgent{}
	}
	o.store.Path = o.dbPath
	store, err := OpenStore(context.Background(), o.store)
	if err != nil {
		t.Fatal(err)
	}
	runner := &porttest.FakeRunner{Agent: o.agent.run}
	launch := porttest.LaunchAny
	if o.launch != nil {
		launch = o.launch
	}
	instances := acp.NewInstances(acp.Options{StopGrace: time.Second}, runner, launch)
	cfg := Config{Instances: instances, Store: store, DefaultAgent: "fake", Directory: "/work", Version: "test", AnswerDelay: -1}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, a: a, store: store, instances: instances, runner: runner, agent: o.agent}
	h.srv = httptest.NewServer(a)
	t.Cleanup(h.close)
	return h
}

// close stops the server, the adapter, the agents and the store, in the
// daemon's order. It is idempotent.
func (h *harness) close() {
	if h.srv == nil {
		return
	}
	h.srv.CloseClientConnections()
	h.srv.Close()
	h.srv = nil
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = h.instances.Close(ctx)
	if err := h.a.Close(ctx); err != nil {
		h.t.Errorf("adapter close: %v", err)
	}
	h.store.Close()
}

func (h *harness) do(method, path, body string) (int, []byte) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+"/opencode"+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// ok is do, failing the test unless the answer is 2xx; it decodes the
// body into out when out is not nil.
func (h *harness) ok(method, path, body string, out any) []byte {
	h.t.Helper()
	code, b := h.do(method, path, body)
	if code/100 != 2 {
		h.t.Fatalf("%s %s: %d %s", method, path, code, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			h.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return b
}

func (h *harness) newSession() string {
	h.t.Helper()
	var s struct{ ID string }
	h.ok("POST", "/session", "{}", &s)
	return s.ID
}

func promptBody(text string) string {
	b, _ := json.Marshal(map[string]any{"parts": []any{map[string]string{"type": "text", "text": text}}})
	return string(b)
}

// wireMessage is {info, parts} as the API answers it.
type wireMessage struct {
	Info  map[string]any   `json:"info"`
	Parts []map[string]any `json:"parts"`
}

func (m wireMessage) text() string {
	var b strings.Builder
	for _, p := range m.Parts {
		if p["type"] == "text" {
			b.WriteString(p["text"].(string))
		}
	}
	return b.String()
}

func (m wireMessage) part(typ string) map[string]any {
	for _, p := range m.Parts {
		if p["type"] == typ {
			return p
		}
	}
	return nil
}

func (h *harness) prompt(id, text string) wireMessage {
	h.t.Helper()
	var m wireMessage
	h.ok("POST", "/session/"+id+"/message", promptBody(text), &m)
	return m
}

// sseEvent is one event of /event.
type sseEvent struct {
	ID         string
	Type       string          `json:"type"`
	Properties json.RawMessage `json:"properties"`
	Raw        []byte
}

func (e sseEvent) prop(v any) {
	_ = json.Unmarshal(e.Properties, v)
}

// stream reads an event stream.
type stream struct {
	t      testing.TB
	events chan sseEvent
	cancel context.CancelFunc
}

func (h *harness) events(path string, header ...string) *stream {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", h.srv.URL+"/opencode"+path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		h.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		cancel()
		h.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	s := &stream{t: h.t, events: make(chan sseEvent, 4096), cancel: cancel}
	go func() {
		defer close(s.events)
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		var id string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasPrefix(line, "id: "):
				id = line[4:]
			case strings.HasPrefix(line, "data: "):
				e := sseEvent{ID: id, Raw: []byte(line[6:])}
				_ = json.Unmarshal(e.Raw, &e)
				s.events <- e
				id = ""
			}
		}
	}()
	first := s.next()
	if !strings.Contains(string(first.Raw), `"server.connected"`) {
		h.t.Fatalf("first event %s, want server.connected", first.Raw)
	}
	h.t.Cleanup(cancel)
	return s
}

func (s *stream) next() sseEvent {
	s.t.Helper()
	select {
	case e, ok := <-s.events:
		if !ok {
			s.t.Fatal("the event stream ended")
		}
		return e
	case <-time.After(20 * time.Second):
		s.t.Fatal("no event within 20 s")
	}
	return sseEvent{}
}

// until reads events until one of type typ (for session, when not "") and
// returns every event read, that one last.
func (s *stream) until(typ string) []sseEvent {
	s.t.Helper()
	var out []sseEvent
	for {
		e := s.next()
		if e.Type == "server.heartbeat" {
			continue
		}
		out = append(out, e)
		if e.Type == typ {
			return out
		}
	}
}

func tempDB(t *testing.T) string { return filepath.Join(t.TempDir(), "opencode.db") }
