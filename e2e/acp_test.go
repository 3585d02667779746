package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

const initMsg = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`

type problem struct {
	Type      string         `json:"type"`
	Status    int            `json:"status"`
	Detail    string         `json:"detail"`
	Agent     string         `json:"agent"`
	SessionID string         `json:"sessionId"`
	Details   map[string]any `json:"details"`
}

func parseProblem(t *testing.T, b []byte) problem {
	t.Helper()
	var p problem
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("not a problem body: %s", b)
	}
	return p
}

// TestACPChecks walks the checks of docs/api.md 4.1 and 4.3 in their order.
func TestACPChecks(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: []string{"--max-acp-body", "1024"}, Env: []string{"SANDBOX_AGENT_REQUIRE_PREINSTALL=1"}})
	if st, b := d.Post("/v1/acp/a?agent=mock", initMsg); st != 200 {
		t.Fatalf("bootstrap: %d %s", st, b)
	}
	cases := []struct {
		name       string
		path, body string
		headers    []string
		status     int
		kind       string
		detail     string
	}{
		{"no content type", "/v1/acp/a", initMsg, nil, 415, "unsupported_media_type", ""},
		{"text content type", "/v1/acp/a", initMsg, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type", ""},
		{"bad accept", "/v1/acp/a", initMsg, []string{"Content-Type", "application/json", "Accept", "text/html"}, 406, "not_acceptable", ""},
		{"not json", "/v1/acp/a", `{"jsonrpc":`, []string{"Content-Type", "application/json"}, 400, "invalid_request", "invalid request: invalid JSON body"},
		{"array", "/v1/acp/a", `[{"jsonrpc":"2.0","id":1,"method":"x"}]`, []string{"Content-Type", "application/json"}, 400, "invalid_request", "invalid request: request body must be a JSON-RPC object"},
		{"too large", "/v1/acp/a", `{"x":"` + strings.Repeat("a", 2000) + `"}`, []string{"Content-Type", "application/json"}, 413, "payload_too_large", ""},
		{"missing agent", "/v1/acp/new", initMsg, []string{"Content-Type", "application/json"}, 400, "invalid_request", "invalid request: missing required 'agent' query parameter for first POST to /v1/acp/new"},
		{"unknown agent", "/v1/acp/new?agent=nope", initMsg, []string{"Content-Type", "application/json"}, 400, "unsupported_agent", "unsupported agent: nope"},
		{"empty agent", "/v1/acp/new?agent=", initMsg, []string{"Content-Type", "application/json"}, 400, "unsupported_agent", ""},
		{"agent mismatch", "/v1/acp/a?agent=claude", initMsg, []string{"Content-Type", "application/json"}, 409, "conflict", "conflict: server 'a' already exists for agent 'mock'; requested 'claude'"},
		{"known agent not installed", "/v1/acp/c?agent=codex", initMsg, []string{"Content-Type", "application/json; charset=utf-8"}, 404, "agent_not_installed", "agent not installed: codex"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, h, b := d.Do("POST", c.path, []byte(c.body), c.headers...)
			if st != c.status {
				t.Fatalf("status %d, want %d: %s", st, c.status, b)
			}
			if ct := h.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("content type %q", ct)
			}
			p := parseProblem(t, b)
			if p.Type != "urn:sandbox-agent:error:"+c.kind || p.Status != c.status {
				t.Errorf("problem %+v, want kind %s", p, c.kind)
			}
			if c.detail != "" && !strings.HasPrefix(p.Detail, c.detail) {
				t.Errorf("detail %q, want prefix %q", p.Detail, c.detail)
			}
		})
	}
	if got := d.Servers(); len(got) != 1 {
		t.Errorf("failed bootstraps registered instances: %+v", got)
	}

	t.Run("stream checks", func(t *testing.T) {
		st, _, b := d.Do("GET", "/v1/acp/a", nil, "Accept", "application/json")
		if st != 406 {
			t.Errorf("accept json: %d %s", st, b)
		}
		st, _, b = d.Do("GET", "/v1/acp/nope", nil, "Last-Event-ID", "x")
		if p := parseProblem(t, b); st != 400 || p.Detail != "invalid request: Last-Event-ID must be a positive integer" {
			t.Errorf("bad Last-Event-ID checked before lookup: %d %s", st, b)
		}
		st, _, b = d.Do("GET", "/v1/acp/nope", nil)
		if p := parseProblem(t, b); st != 404 || p.SessionID != "nope" || p.Type != "urn:sandbox-agent:error:session_not_found" {
			t.Errorf("unknown id: %d %s", st, b)
		}
		s := d.Stream("/v1/acp/a", "Accept", "text/*") // fails the test unless 200
		s.Close()
	})
	t.Run("delete idempotent", func(t *testing.T) {
		for _, id := range []string{"a", "a", "never-existed"} {
			if st, _, b := d.Do("DELETE", "/v1/acp/"+id, nil); st != 204 || len(b) != 0 {
				t.Errorf("DELETE %s: %d %q", id, st, b)
			}
		}
		if st, b := d.Post("/v1/acp/a?agent=mock", initMsg); st != 200 {
			t.Errorf("id not free after DELETE: %d %s", st, b)
		}
	})
}

// TestACPClassification: requests wait for their answer; everything else
// is written and answered 202.
func TestACPClassification(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t)})
	cases := []struct {
		name, body string
		status     int
		want       string
	}{
		{"request", `{"jsonrpc":"2.0","id":5,"method":"x/y"}`, 200, `{"jsonrpc":"2.0","id":5,"result":{"echoedMethod":"x/y"}}`},
		{"null id is a request", `{"jsonrpc":"2.0","id":null,"method":"x/y"}`, 200, `{"jsonrpc":"2.0","id":null,"result":{"echoedMethod":"x/y"}}`},
		{"zero id is a request", `{"id":0,"method":"x/y","jsonrpc":"2.0"}`, 200, `{"jsonrpc":"2.0","id":0,"result":{"echoedMethod":"x/y"}}`},
		{"notification", `{"jsonrpc":"2.0","method":"note"}`, 202, ""},
		{"response", `{"jsonrpc":"2.0","id":"agent-1","result":{}}`, 202, ""},
		{"empty object", `{}`, 202, ""},
		{"_sandboxagent methods are not special", `{"jsonrpc":"2.0","id":9,"method":"_sandboxagent/session/list"}`, 200, `{"jsonrpc":"2.0","id":9,"result":{"echoedMethod":"_sandboxagent/session/list"}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, b := d.Post("/v1/acp/cls?agent=test", c.body)
			if st != c.status || string(b) != c.want {
				t.Fatalf("got %d %q, want %d %q", st, b, c.status, c.want)
			}
		})
	}
}

// TestACPByteForByte sends 10 MiB messages both ways and checks they arrive
// unchanged, and that a pretty-printed body is compacted to one line.
func TestACPByteForByte(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t)})
	blob := strings.Repeat("0123456789abcdef", (10<<20)/16)

	t.Run("10 MiB request", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":"big","method":"hash","params":{"blob":"` + blob + `","u":"\u00e9\n"}}`
		st, b := d.Post("/v1/acp/bytes?agent=test", body)
		sum := sha256.Sum256([]byte(body))
		want := fmt.Sprintf(`{"jsonrpc":"2.0","id":"big","result":{"bytes":%d,"sha256":"%s"}}`, len(body), hex.EncodeToString(sum[:]))
		if st != 200 || string(b) != want {
			t.Fatalf("got %d %.200s, want %s", st, b, want)
		}
	})
	t.Run("10 MiB notification echoed on the stream", func(t *testing.T) {
		s := d.Stream("/v1/acp/bytes")
		for { // skip what the previous subtest left in the buffer
			if ev := s.NextWithin(t, 10*time.Second); strings.Contains(ev.Data, `"id":"big"`) {
				break
			}
		}
		body := `{"jsonrpc":"2.0","method":"echo","params":{"blob":"` + blob + `"}}`
		if st, b := d.Post("/v1/acp/bytes", body); st != 202 {
			t.Fatalf("post: %d %s", st, b)
		}
		ev := s.NextWithin(t, 20*time.Second)
		if ev.Data != body {
			t.Fatalf("echo differs: got %d bytes, want %d", len(ev.Data), len(body))
		}
	})
	t.Run("multi-line body is compacted", func(t *testing.T) {
		body := "{\n  \"jsonrpc\": \"2.0\",\r\n  \"id\": 3,\n  \"method\": \"hash\"\n}"
		st, b := d.Post("/v1/acp/bytes", body)
		compact := `{"jsonrpc":"2.0","id":3,"method":"hash"}`
		sum := sha256.Sum256([]byte(compact))
		if st != 200 || !strings.Contains(string(b), hex.EncodeToString(sum[:])) {
			t.Fatalf("got %d %s", st, b)
		}
	})
}

// TestACPSameIDs: 7 and "7" are different ids and may be in flight
// together; a second in-flight 7 is a conflict instead of a hang.
func TestACPSameIDs(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t)})
	if st, b := d.Post("/v1/acp/ids?agent=test", initMsg); st != 200 {
		t.Fatalf("bootstrap: %d %s", st, b)
	}
	var wg sync.WaitGroup
	results := make([]string, 2)
	for i, id := range []string{`7`, `"7"`} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, b := d.Post("/v1/acp/ids", `{"jsonrpc":"2.0","id":`+id+`,"method":"slow","params":{"delayMs":800}}`)
			results[i] = fmt.Sprintf("%d %s", st, b)
		}()
	}
	// While both are pending, a duplicate 7 conflicts.
	harness.WaitUntil(5*time.Second, func() bool { return d.Server("ids").PendingRequests >= 2 })
	st, b := d.Post("/v1/acp/ids", `{"jsonrpc":"2.0","id":7,"method":"slow"}`)
	if p := parseProblem(t, b); st != 409 || p.Type != "urn:sandbox-agent:error:conflict" {
		t.Errorf("duplicate in-flight id: %d %s", st, b)
	}
	wg.Wait()
	if results[0] != `200 {"jsonrpc":"2.0","id":7,"result":{"echoedMethod":"slow"}}` ||
		results[1] != `200 {"jsonrpc":"2.0","id":"7","result":{"echoedMethod":"slow"}}` {
		t.Errorf("results: %q", results)
	}
}

// TestACPTimeoutKeepsLateResponse: a request that times out answers 504 and
// its late response still reaches the stream.
func TestACPTimeoutKeepsLateResponse(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t), Env: []string{"SANDBOX_AGENT_ACP_REQUEST_TIMEOUT_MS=200"}})
	if st, b := d.Post("/v1/acp/to?agent=test", initMsg); st != 200 {
		t.Fatalf("bootstrap: %d %s", st, b)
	}
	s := d.Stream("/v1/acp/to")
	s.NextWithin(t, 5*time.Second) // the initialize response
	st, b := d.Post("/v1/acp/to", `{"jsonrpc":"2.0","id":"late","method":"slow","params":{"delayMs":700}}`)
	p := parseProblem(t, b)
	if st != 504 || p.Type != "urn:sandbox-agent:error:timeout" || p.Details["message"] != "timed out waiting for agent response" {
		t.Fatalf("got %d %s", st, b)
	}
	ev := s.NextWithin(t, 5*time.Second)
	if ev.Data != `{"jsonrpc":"2.0","id":"late","result":{"echoedMethod":"slow"}}` {
		t.Fatalf("late response not on stream: %+v", ev)
	}
	// The id is free again, and the instance still works.
	if st, b := d.Post("/v1/acp/to", `{"jsonrpc":"2.0","id":"late","method":"quick"}`); st != 200 {
		t.Fatalf("after timeout: %d %s", st, b)
	}
}

// TestACPAgentExit: pending requests fail at once when the agent exits, the
// async ones with a JSON-RPC error on the stream, and the stream reports
// the exit.
func TestACPAgentExit(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t, "--async-methods", "async/hang")})
	if st, b := d.Post("/v1/acp/ex?agent=test", initMsg); st != 200 {
		t.Fatalf("bootstrap: %d %s", st, b)
	}
	s := d.Stream("/v1/acp/ex")
	s.NextWithin(t, 5*time.Second)
	if st, b := d.Post("/v1/acp/ex", `{"jsonrpc":"2.0","id":"a1","method":"async/hang"}`); st != 202 {
		t.Fatalf("async: %d %s", st, b)
	}
	type res struct {
		st int
		b  []byte
		at time.Time
	}
	pending := make(chan res, 1)
	go func() {
		st, b := d.Post("/v1/acp/ex", `{"jsonrpc":"2.0","id":2,"method":"hang"}`)
		pending <- res{st, b, time.Now()}
	}()
	harness.WaitUntil(5*time.Second, func() bool { return d.Server("ex").PendingRequests >= 2 })
	if st, _ := d.Post("/v1/acp/ex", `{"jsonrpc":"2.0","method":"exit","params":{"code":3}}`); st != 202 {
		t.Fatalf("exit: %d", st)
	}
	var r res
	select {
	case r = <-pending:
	case <-time.After(10 * time.Second): // the request timeout is 120 s
		t.Fatal("pending request not failed after agent exit")
	}
	p := parseProblem(t, r.b)
	if r.st != 500 || p.Type != "urn:sandbox-agent:error:agent_process_exited" || p.Details["exitCode"] != float64(3) ||
		!strings.Contains(fmt.Sprint(p.Details["stderr"]), "testagent: exiting with 3") {
		t.Fatalf("pending POST: %d %s", r.st, r.b)
	}
	got := []string{s.NextWithin(t, 5*time.Second).Data, s.NextWithin(t, 5*time.Second).Data}
	want := []string{
		`{"jsonrpc":"2.0","id":"a1","error":{"code":-32603,"message":"agent process stopped before responding"}}`,
		`{"jsonrpc":"2.0","method":"_adapter/agent_exited","params":{"success":false,"code":3}}`,
	}
	if got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("stream after exit:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	info := d.Server("ex")
	if info.State != "exited" || info.ExitCode == nil || *info.ExitCode != 3 {
		t.Errorf("listing after exit: %+v", info)
	}
	// Later POSTs say the agent is gone, and the stderr tail is available.
	if st, b := d.Post("/v1/acp/ex", `{"jsonrpc":"2.0","id":3,"method":"x"}`); st != 500 {
		t.Errorf("post to exited agent: %d %s", st, b)
	}
	if st, _, b := d.Do("GET", "/v1/acp/ex/stderr", nil); st != 200 || !strings.Contains(string(b), "exiting with 3") {
		t.Errorf("stderr route: %d %q", st, b)
	}
}

// TestACPInvalidStdout: a non-JSON line becomes _adapter/invalid_stdout.
func TestACPInvalidStdout(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t)})
	if st, b := d.Post("/v1/acp/g?agent=test", `{"jsonrpc":"2.0","id":1,"method":"garbage"}`); st != 200 {
		t.Fatalf("%d %s", st, b)
	}
	s := d.Stream("/v1/acp/g")
	ev := s.NextWithin(t, 5*time.Second)
	want := `{"jsonrpc":"2.0","method":"_adapter/invalid_stdout","params":{"error":"agent wrote a line that is not JSON","raw":"this is not json"}}`
	if ev.Data != want || ev.ID != "1" {
		t.Fatalf("got %+v", ev)
	}
}

// TestACPConcurrentBootstrap: simultaneous first POSTs create one instance.
func TestACPConcurrentBootstrap(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	var wg sync.WaitGroup
	statuses := make([]int, 16)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], _ = d.Post("/v1/acp/race?agent=mock", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":1}}`, i))
		}()
	}
	wg.Wait()
	for i, st := range statuses {
		if st != 200 {
			t.Errorf("post %d: %d", i, st)
		}
	}
	if n := strings.Count(d.Logs(), "agent started"); n != 1 {
		t.Errorf("%d agents started, want 1", n)
	}
	if s := d.Servers(); len(s) != 1 {
		t.Errorf("servers: %+v", s)
	}
}

// TestACPSpawnFailure: a command that cannot start is a 502 and leaves
// nothing registered.
func TestACPSpawnFailure(t *testing.T) {
	t.Parallel()
	f := t.TempDir() + "/agents.json"
	writeFile(t, f, `{"agents":[{"id":"broken","command":"/nonexistent/agent"}]}`)
	d := harness.Start(t, harness.Options{Args: []string{"--agents-file", f}})
	st, b := d.Post("/v1/acp/x?agent=broken", initMsg)
	p := parseProblem(t, b)
	if st != 502 || !strings.HasPrefix(p.Detail, "stream error: failed to start agent process") {
		t.Fatalf("%d %s", st, b)
	}
	if s := d.Servers(); len(s) != 0 {
		t.Errorf("registered after failure: %+v", s)
	}
}

// TestACPMultiInstanceIsolation: two ids running the same agent have their
// own process, sequence numbers and streams.
func TestACPMultiInstanceIsolation(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	for _, id := range []string{"server-a", "server-b"} {
		if st, b := d.Post("/v1/acp/"+id+"?agent=mock", initMsg); st != 200 {
			t.Fatalf("%s: %d %s", id, st, b)
		}
	}
	d.Post("/v1/acp/server-a", `{"jsonrpc":"2.0","id":2,"method":"other"}`)
	a, b := d.Server("server-a"), d.Server("server-b")
	if a.PID == b.PID || a.LastEventID != 2 || b.LastEventID != 1 {
		t.Errorf("not isolated: %+v %+v", a, b)
	}
	ev := d.Stream("/v1/acp/server-b").NextWithin(t, 5*time.Second)
	if ev.ID != "1" || !strings.Contains(ev.Data, `"id":1`) {
		t.Errorf("server-b stream: %+v", ev)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}
