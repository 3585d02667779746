package opencode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

func TestEscapedSlashesInAnIDAreNotAPath(t *testing.T) {
	// An id with encoded slashes and dots ("..%2F..%2Fetc") is an id that
	// does not exist: 404 in OpenCode's shape. It was decoded, cleaned
	// and answered with a redirect to the cleaned path without the
	// /opencode prefix (Location: /etc).
	h := newHarness(t, harnessOptions{})
	id := h.newSession()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct{ method, path string }{
		{"GET", "/session/..%2F..%2Fetc"},
		{"GET", "/session/" + id + "/message/..%2F..%2F"},
		{"POST", "/session/" + id + "%2F..%2F..%2Fsession"},
		{"DELETE", "/session/" + id + "%2F..%2F" + id},
	} {
		req, _ := http.NewRequest(tc.method, h.srv.URL+"/opencode"+tc.path, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Name string }
		if resp.StatusCode != http.StatusNotFound || json.Unmarshal(b, &e) != nil || e.Name != "NotFoundError" {
			t.Errorf("%s %s: %d (Location %q) %s, want 404 NotFoundError", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Location"), b)
		}
	}
	h.ok("GET", "/session/"+id, "", nil) // still there
}

func TestEveryAcceptedAsyncPromptRuns(t *testing.T) {
	// prompt_async answers 204 only for a prompt that has its place in the
	// session's queue. The place was taken later, by the goroutine running
	// the prompt: while the first prompt of an agent read the catalogue
	// (its default model), any number of prompts were accepted, and those
	// past the queue's bound were then dropped with a session.error.
	gate := make(chan struct{})
	h := newHarness(t, harnessOptions{cfg: func(c *Config) {
		c.Agents = func(ctx context.Context) []domain.AgentInfo {
			select {
			case <-gate:
			case <-ctx.Done():
			}
			return nil
		}
	}})
	ev := h.events("/event")
	id := h.newSession()
	accepted := 0
	for i := range maxQueued + 4 {
		switch code, b := h.do("POST", "/session/"+id+"/prompt_async", promptBody(fmt.Sprintf("prompt %d", i))); code {
		case http.StatusNoContent:
			accepted++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("prompt %d: %d %s", i, code, b)
		}
	}
	close(gate)
	if accepted > maxQueued+1 {
		t.Errorf("%d prompts accepted, want at most %d", accepted, maxQueued+1)
	}
	// Each accepted prompt ends idle, or (the bug) with a session.error.
	for ended := 0; ended < accepted; {
		e := ev.next()
		switch e.Type {
		case "session.idle":
			ended++
		case "session.error":
			ended++
			t.Errorf("an accepted prompt failed: %s", e.Raw)
		}
	}
	var list []wireMessage
	h.ok("GET", "/session/"+id+"/message", "", &list)
	if len(list) != 2*accepted {
		t.Errorf("%d messages for %d accepted prompts", len(list), accepted)
	}
}

func TestSessionDeletedUnderASynchronousPrompt(t *testing.T) {
	// A synchronous prompt (or command) whose session is deleted while it
	// runs is answered 404 in OpenCode's shape. It was answered 200 with
	// {"info":,"parts":[]}, not JSON: its message was deleted with the
	// session.
	for _, route := range []string{"message", "command"} {
		t.Run(route, func(t *testing.T) {
			agent := &fakeAgent{received: make(chan string, 64)}
			h := newHarness(t, harnessOptions{agent: agent})
			id := h.newSession()
			body := promptBody("slow")
			if route == "command" {
				body = `{"command":"slow"}`
			}
			type answer struct {
				code int
				body []byte
			}
			done := make(chan answer, 1)
			go func() {
				code, b := h.do("POST", "/session/"+id+"/"+route, body)
				done <- answer{code, b}
			}()
			agent.await(t, "session/prompt")
			h.ok("DELETE", "/session/"+id, "", nil)
			got := <-done
			var e struct{ Name string }
			if got.code != http.StatusNotFound || json.Unmarshal(got.body, &e) != nil || e.Name != "NotFoundError" {
				t.Errorf("%d %s, want 404 NotFoundError", got.code, got.body)
			}
		})
	}
}

func TestHeadOfAnEventStreamEnds(t *testing.T) {
	// HEAD /event answers the stream's headers and ends. It ran the
	// stream with its body discarded (HEAD writes always succeed) until
	// the client hung up, which it may never see: the next request on the
	// keep-alive connection was never read, and the stream held one of
	// the MaxSubscribers places until the daemon stopped.
	h := newHarness(t, harnessOptions{cfg: func(c *Config) { c.MaxSubscribers = 1 }})
	t.Cleanup(func() {
		if t.Failed() {
			h.a.bus.Close() // ends a stream left running, so the server can close
		}
	})
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}, Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	for _, path := range []string{"/event", "/global/event", "/global/health"} {
		req, _ := http.NewRequest("HEAD", h.srv.URL+"/opencode"+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("HEAD %s: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("HEAD %s: %d", path, resp.StatusCode)
		}
	}
}

func TestUnknownProvidersLeaveNothingBehind(t *testing.T) {
	// A prompt naming a provider no agent answers to fails its turn; it
	// left an entry for that agent in the adapter's connections, one per
	// name for as long as the daemon ran: a client naming new providers
	// grew the daemon's memory without bound.
	h := newHarness(t, harnessOptions{launch: porttest.LaunchOnly("fake")})
	for i := range 20 {
		id := h.newSession()
		body := fmt.Sprintf(`{"model":{"providerID":"nope%d","modelID":"m"},"parts":[{"type":"text","text":"hi"}]}`, i)
		var m wireMessage
		h.ok("POST", "/session/"+id+"/message", body, &m)
		if m.Info["error"] == nil {
			t.Fatalf("a prompt to agent nope%d: %v", i, m.Info)
		}
	}
	if got := h.prompt(h.newSession(), "hi").text(); got != "echo: hi" {
		t.Errorf("the default agent after: %q", got)
	}
	h.a.mu.Lock()
	n := len(h.a.conns)
	h.a.mu.Unlock()
	if n > 1 {
		t.Errorf("%d agent connection entries, want at most 1 (the agent that runs)", n)
	}
}

func TestConfigPatchKeepsTheDefaults(t *testing.T) {
	// PATCH /config merges into the configuration GET /config answers, as
	// native OpenCode's (whose configuration always has agent, mode,
	// plugin and command). The first PATCH was merged into nothing, so a
	// client setting one key lost the others (and PATCH null cleared
	// them).
	h := newHarness(t, harnessOptions{})
	for _, body := range []string{`null`, `{"theme":"dark"}`} {
		h.ok("PATCH", "/config", body, nil)
	}
	var cfg map[string]json.RawMessage
	h.ok("GET", "/config", "", &cfg)
	for _, k := range []string{"agent", "mode", "plugin", "command", "provider", "mcp", "theme"} {
		if cfg[k] == nil {
			t.Errorf("GET /config after PATCH has no %q: %v", k, cfg)
		}
	}
}

func TestPromptNamesAreBounded(t *testing.T) {
	// A prompt's agent and model name are copied into the user and the
	// assistant message, each written and published more than once: a
	// 30 MiB agent name took 380 MB of the daemon's memory and 220 MB of
	// database for one request. They are names: past 256 bytes, 400.
	h := newHarness(t, harnessOptions{})
	id := h.newSession()
	long := strings.Repeat("x", maxNameBytes+1)
	for name, body := range map[string]string{
		"agent":   `{"agent":"` + long + `","parts":[{"type":"text","text":"hi"}]}`,
		"modelID": `{"model":{"providerID":"fake","modelID":"` + long + `"},"parts":[{"type":"text","text":"hi"}]}`,
	} {
		for _, route := range []string{"message", "prompt_async"} {
			if code, b := h.do("POST", "/session/"+id+"/"+route, body); code != http.StatusBadRequest {
				t.Errorf("%s of %d bytes to %s: %d %.200s, want 400", name, len(long), route, code, b)
			}
		}
	}
	if code, b := h.do("POST", "/session/"+id+"/command", `{"command":"x","agent":"`+long+`"}`); code != http.StatusBadRequest {
		t.Errorf("command with a long agent: %d %.200s, want 400", code, b)
	}
	ok := strings.Repeat("x", maxNameBytes)
	h.ok("POST", "/session/"+id+"/message", `{"agent":"`+ok+`","model":{"providerID":"fake","modelID":"`+ok+`"},"parts":[{"type":"text","text":"hi"}]}`, nil)
}

func TestHeartbeatWhileOtherDirectoriesAreBusy(t *testing.T) {
	// A stream of one directory gets server.heartbeat after Heartbeat
	// without an event of its own. It got one only when no event of any
	// directory came for that long: while another directory was busy, it
	// got nothing at all (and a proxy's idle timeout cut it).
	h := newHarness(t, harnessOptions{cfg: func(c *Config) { c.Heartbeat = 50 * time.Millisecond }})
	ev := h.events("/event?directory=/mine")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				h.a.publishIn("/other", "test.busy", map[string]string{})
			}
		}
	}()
	defer func() { close(stop); <-done }()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case e, ok := <-ev.events:
			if !ok {
				t.Fatal("the stream ended")
			}
			if e.Type == "server.heartbeat" {
				return
			}
			t.Errorf("an event of another directory: %s", e.Raw)
		case <-deadline:
			t.Fatal("no heartbeat within 5 s while another directory was busy")
		}
	}
}

func TestClientLeavingAQueuedPromptIsNoError(t *testing.T) {
	// A synchronous prompt whose client leaves while it waits behind
	// another turn gives its place back quietly. It was logged as a
	// failed request ("request failed … context canceled", level ERROR),
	// as if the daemon had failed.
	var logs syncBuffer
	agent := &fakeAgent{received: make(chan string, 64)}
	h := newHarness(t, harnessOptions{agent: agent, cfg: func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}})
	id := h.newSession()
	h.ok("POST", "/session/"+id+"/prompt_async", promptBody("slow"), nil)
	agent.await(t, "session/prompt")
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", h.srv.URL+"/opencode/session/"+id+"/message", strings.NewReader(promptBody("queued")))
	req.Header.Set("Content-Type", "application/json")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	for !h.a.busyWaiting(id) {
		runtime.Gosched()
	}
	cancel()
	<-done
	h.ok("POST", "/session/"+id+"/abort", "", nil)
	h.prompt(id, "after") // the place was given back; the session runs on
	h.close()
	if s := logs.String(); strings.Contains(s, "request failed") {
		t.Errorf("a client leaving was logged as a failure:\n%s", s)
	}
}

// busyWaiting reports whether a prompt of session id waits for its turn.
func (a *Adapter) busyWaiting(id string) bool {
	a.mu.Lock()
	s := a.sessions[id]
	a.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting > 0
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestSessionDeletedWhileItsAgentLoadsIt(t *testing.T) {
	// A session deleted while its agent answers session/load (its first
	// prompt after a restart) leaves no binding on the connection. The
	// load's answer bound it again: the connection kept routing the ACP
	// session to the deleted runtime for as long as the agent ran.
	db := tempDB(t)
	agent := &fakeAgent{loadSession: true} // it knows its sessions across processes
	h1 := newHarness(t, harnessOptions{dbPath: db, agent: agent})
	id := h1.newSession()
	h1.prompt(id, "first")
	h1.close()

	agent.received, agent.loadGate = make(chan string, 64), make(chan struct{})
	h := newHarness(t, harnessOptions{dbPath: db, agent: agent})
	ev := h.events("/event")
	h.ok("POST", "/session/"+id+"/prompt_async", promptBody("second"), nil)
	agent.await(t, "session/load")
	h.ok("DELETE", "/session/"+id, "", nil)
	close(agent.loadGate)
	ev.until("session.deleted")
	// Another session's prompt on the same connection: the load's answer,
	// read before it, has been handled.
	h.prompt(h.newSession(), "hi")
	h.a.mu.Lock()
	slot := h.a.conns["fake"]
	h.a.mu.Unlock()
	slot.conn.mu.Lock()
	defer slot.conn.mu.Unlock()
	for acpID, s := range slot.conn.sessions {
		if s.id == id {
			t.Errorf("ACP session %s still routed to the deleted session %s", acpID, id)
		}
	}
}

// An error answer repeats at most a kilobyte of what the client sent: an
// unknown id of 200 KB in the path was echoed whole in its 404.
func TestErrorsRepeatLittleOfTheRequest(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	long := strings.Repeat("a", 200<<10)
	resp, err := http.Get(h.srv.URL + "/opencode/session/" + long)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e struct {
		Name string
		Data struct{ Message string }
	}
	if resp.StatusCode != http.StatusNotFound || json.Unmarshal(b, &e) != nil || e.Name != "NotFoundError" {
		t.Fatalf("%d %.200s", resp.StatusCode, b)
	}
	if len(b) > 2048 || !strings.HasSuffix(e.Data.Message, "…") {
		t.Errorf("a %d-byte answer (message %.80s…)", len(b), e.Data.Message)
	}
}

// Nothing written for a session after its DELETE brings it back: a PATCH
// that found the session before the DELETE and wrote after it put its row
// back in the database (it reappeared in listings and after a restart).
func TestNoWriteAfterDelete(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	id := h.newSession()
	s, err := h.a.sessionFor(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	h.ok("DELETE", "/session/"+id, "", nil)
	// What a PATCH that had found s before the DELETE does next.
	s.mu.Lock()
	s.info.Title = "late"
	s.touched()
	s.putMessage(&messageInfo{ID: "msg_late", SessionID: id, Role: "user"})
	s.mu.Unlock()
	if _, err := h.store.session(context.Background(), id); !errors.Is(err, errNoSession) {
		t.Errorf("the deleted session's row after a late write: %v", err)
	}
	if ok, err := h.store.hasMessage(context.Background(), id, "msg_late"); ok || err != nil {
		t.Errorf("a message row of the deleted session: %v %v", ok, err)
	}
}

// A DELETE whose client has left still deletes the session's row: the
// session was gone from memory but its row stayed, and it came back at
// the next start.
func TestDeleteOfAClientThatLeft(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	id := h.newSession()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequestWithContext(ctx, "DELETE", "/opencode/session/"+id, nil)
	h.a.ServeHTTP(httptest.NewRecorder(), req)
	if _, err := h.store.session(context.Background(), id); !errors.Is(err, errNoSession) {
		t.Errorf("the session's row after a DELETE whose client left: %v", err)
	}
}

func TestPromptStartsAnAgentOnlyIfAllowedTo(t *testing.T) {
	// A prompt whose agent does not run starts it: the chain must see
	// acp.start, which a read-only token lacks (on /v1 it may only talk
	// to a running instance). It was described as acp.send alone, so a
	// viewer started agents through /opencode. A prompt judged without
	// acp.start (its agent ran then) must not start the agent either if
	// it stopped meanwhile.
	h := newHarness(t, harnessOptions{})
	id := h.newSession()
	describe := func() domain.AuthRequest {
		var req domain.AuthRequest
		h.a.Describe(httptest.NewRequest("POST", "/opencode/session/"+id+"/message", nil), nil, &req)
		return req
	}
	starts := func(req domain.AuthRequest) bool {
		return slices.Contains(req.AllActions(), domain.ActionACPStart)
	}
	if req := describe(); req.Action != domain.ActionACPSend || !starts(req) {
		t.Errorf("a prompt to an agent not running: %s %v, want acp.send implying acp.start", req.Action, req.Implies)
	}
	h.prompt(id, "hi")
	if req := describe(); req.Action != domain.ActionACPSend || starts(req) {
		t.Errorf("a prompt to a running agent: %s %v, want acp.send alone", req.Action, req.Implies)
	}
	h.prompt(id, "exit") // the agent exits: the next prompt would start it
	for _, route := range []string{"message", "command"} {
		body := promptBody("again")
		if route == "command" {
			body = `{"command":"again"}`
		}
		req := httptest.NewRequest("POST", "/opencode/session/"+id+"/"+route, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req = req.WithContext(h.a.StartAllowed(req.Context(), false))
		rec := httptest.NewRecorder()
		h.a.ServeHTTP(rec, req)
		var m wireMessage
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &m) != nil {
			t.Fatalf("%s: %d %s", route, rec.Code, rec.Body)
		}
		if e := fmt.Sprint(m.Info["error"]); !strings.Contains(e, "acp.start") {
			t.Errorf("%s judged without acp.start, its agent stopped: error %s, want one naming acp.start", route, e)
		}
	}
	if n := len(h.runner.Processes()); n != 1 {
		t.Errorf("%d agent processes, want 1: a prompt not allowed to start the agent started it", n)
	}
	if got := h.prompt(id, "back").text(); got != "echo: back" { // allowed (no policy): starts it
		t.Errorf("after: %q", got)
	}
}

func TestIdleSessionsAreNotAllKeptInMemory(t *testing.T) {
	// Every session created or read since start stayed in memory, each
	// with up to 70 KiB (permission, directory, title): the heap grew with
	// the database (--opencode-max-db, 512 MiB), outside every memory
	// budget (3,000 sessions with a 60 KB permission: +340 MB of heap).
	// Idle sessions are now forgotten past maxResident and loaded from the
	// store again when asked for.
	h := newHarness(t, harnessOptions{})
	busy := h.newSession()
	h.prompt(busy, "hi") // bound to its agent: stays
	perm := `{"permission":[{"permission":"` + strings.Repeat("x", 4096) + `","pattern":"*","action":"allow"}]}`
	ids := make([]string, 0, maxResident+300)
	for range cap(ids) {
		var s struct{ ID string }
		h.ok("POST", "/session", perm, &s)
		ids = append(ids, s.ID)
	}
	h.a.mu.Lock()
	n := len(h.a.sessions)
	h.a.mu.Unlock()
	if n > maxResident+1 {
		t.Errorf("%d sessions in memory, want at most %d", n, maxResident+1)
	}
	var info struct{ ID, Title string }
	h.ok("GET", "/session/"+ids[0], "", &info)
	if info.ID != ids[0] {
		t.Errorf("a forgotten session read back as %+v", info)
	}
	h.ok("PATCH", "/session/"+ids[1], `{"title":"renamed"}`, nil)
	h.ok("GET", "/session/"+ids[1], "", &info)
	if info.Title != "renamed" {
		t.Errorf("title %q after a PATCH of a forgotten session", info.Title)
	}
	if got := h.prompt(ids[2], "later").text(); got != "echo: later" {
		t.Errorf("a forgotten session's prompt: %q", got)
	}
	if got := h.prompt(busy, "again").text(); got != "echo: again" {
		t.Errorf("the bound session: %q", got)
	}
	if n := h.agent.seen("session/new"); n != 2 {
		t.Errorf("%d session/new, want 2 (the bound session kept its ACP session)", n)
	}
}

func TestWrongTypesAreNamedByTheirJSONPath(t *testing.T) {
	// A body field of the wrong type was answered with the decoder's
	// message, naming the adapter's Go types ("Go struct field
	// createInput.model of type struct { ProviderID string …").
	h := newHarness(t, harnessOptions{})
	id := h.newSession()
	for _, tc := range []struct{ method, path, body, want string }{
		{"POST", "/session", `{"model":5}`, "model has the wrong type (number)"},
		{"POST", "/session/" + id + "/message", `{"parts":"x"}`, "parts has the wrong type (string)"},
		{"POST", "/session/" + id + "/message", `{"parts":[{"type":1}]}`, "parts.type has the wrong type (number)"},
		{"PATCH", "/session/" + id, `{"time":{"archived":"x"}}`, "time.archived has the wrong type (string)"},
		{"POST", "/session", `[]`, "the body has the wrong type (array)"},
	} {
		code, b := h.do(tc.method, tc.path, tc.body)
		var e struct {
			Errors []struct{ Message string }
		}
		if code != http.StatusBadRequest || json.Unmarshal(b, &e) != nil || len(e.Errors) != 1 {
			t.Errorf("%s %s %s: %d %s", tc.method, tc.path, tc.body, code, b)
			continue
		}
		if msg := e.Errors[0].Message; !strings.Contains(msg, tc.want) || strings.Contains(msg, "Go ") || strings.Contains(msg, "opencode.") {
			t.Errorf("%s %s %s: %q, want %q and no Go type", tc.method, tc.path, tc.body, msg, tc.want)
		}
	}
}
