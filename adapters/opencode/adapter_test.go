package opencode

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestPromptAnswersTheAssistantMessage(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	id := h.newSession()
	m := h.prompt(id, "hello")
	if got := m.text(); got != "echo: hello" {
		t.Errorf("reply text %q, want %q", got, "echo: hello")
	}
	if m.Info["role"] != "assistant" || m.Info["finish"] != "stop" || m.Info["providerID"] != "fake" {
		t.Errorf("info %v", m.Info)
	}
	if tm := m.Info["time"].(map[string]any); tm["completed"] == nil {
		t.Errorf("no time.completed: %v", m.Info)
	}
	// OpenCode's CLI prints a text part once it has time.end.
	text := m.part("text")
	if tm, _ := text["time"].(map[string]any); tm == nil || tm["end"] == nil {
		t.Errorf("text part without time.end: %v", text)
	}
	if m.part("step-start") == nil || m.part("step-finish") == nil {
		t.Errorf("parts %v: want step-start and step-finish around the text", m.Parts)
	}

	var list []wireMessage
	h.ok("GET", "/session/"+id+"/message", "", &list)
	if len(list) != 2 || list[0].Info["role"] != "user" || list[1].Info["id"] != m.Info["id"] {
		t.Fatalf("message list %v", list)
	}
	if list[0].text() != "hello" || list[1].Info["parentID"] != list[0].Info["id"] {
		t.Errorf("user message %v, assistant parent %v", list[0], list[1].Info["parentID"])
	}
	var one wireMessage
	h.ok("GET", "/session/"+id+"/message/"+m.Info["id"].(string), "", &one)
	if one.text() != "echo: hello" {
		t.Errorf("GET message: %v", one)
	}
	var s sessionInfo
	h.ok("GET", "/session/"+id, "", &s)
	if s.Title != "hello" {
		t.Errorf("title %q: the first prompt names a session that has none", s.Title)
	}
}

func TestEventsOfATurnInOrder(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ev := h.events("/event")
	id := h.newSession()
	if code, b := h.do("POST", "/session/"+id+"/prompt_async", promptBody("stream 3")); code != http.StatusNoContent {
		t.Fatalf("prompt_async: %d %s", code, b)
	}
	var kinds []string
	var deltas []string
	var texts []string
	for _, e := range ev.until("session.idle") {
		kind := e.Type
		if e.Type == "message.part.updated" {
			var p struct {
				Part  part   `json:"part"`
				Delta string `json:"delta"`
			}
			var raw struct {
				Part struct {
					Type string `json:"type"`
					Text string `json:"text"`
					Time *struct {
						End int64 `json:"end"`
					} `json:"time"`
				} `json:"part"`
				Delta *string `json:"delta"`
			}
			e.prop(&raw)
			_ = p
			kind += ":" + raw.Part.Type
			if raw.Part.Type == "text" && raw.Delta != nil {
				deltas = append(deltas, *raw.Delta)
				texts = append(texts, raw.Part.Text)
			}
			if raw.Part.Type == "text" && raw.Part.Time != nil && raw.Part.Time.End > 0 {
				kind += ":end"
			}
		}
		kinds = append(kinds, kind)
	}
	want := []string{
		"session.created", "session.updated",
		"message.updated", "message.part.updated:text", "session.updated", "session.status",
		"message.updated", "message.part.updated:step-start",
		"message.part.updated:text", "message.part.updated:text", "message.part.updated:text",
		"message.part.updated:text:end", "message.part.updated:step-finish", "message.updated",
		"session.status", "session.idle",
	}
	// The user's text part comes with its message; the assistant's text
	// part streams (the user text has no delta, so 3 deltas only).
	if strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Errorf("events:\n got %v\nwant %v", kinds, want)
	}
	if got := strings.Join(deltas, "|"); got != "c1 |c2 |c3 " {
		t.Errorf("deltas %q", got)
	}
	if got := strings.Join(texts, "|"); got != "c1 |c1 c2 |c1 c2 c3 " {
		t.Errorf("text with each delta %q: the part carries the text so far, never doubled", got)
	}
}

func TestToolCallThroughItsStates(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ev := h.events("/event")
	id := h.newSession()
	m := h.prompt(id, "tool")
	var states []string
	for _, e := range ev.until("session.idle") {
		if e.Type != "message.part.updated" {
			continue
		}
		var p struct {
			Part struct {
				Type  string `json:"type"`
				Tool  string `json:"tool"`
				State struct {
					Status string         `json:"status"`
					Input  map[string]any `json:"input"`
					Output *string        `json:"output"`
				} `json:"state"`
			} `json:"part"`
		}
		e.prop(&p)
		if p.Part.Type != "tool" {
			continue
		}
		if p.Part.Tool != "bash" || p.Part.State.Input["command"] != "echo hi" {
			t.Errorf("tool %q input %v: the name and input stay across states", p.Part.Tool, p.Part.State.Input)
		}
		states = append(states, p.Part.State.Status)
		if p.Part.State.Status == "completed" && (p.Part.State.Output == nil || *p.Part.State.Output != "hi") {
			t.Errorf("completed without output: %s", e.Raw)
		}
	}
	if strings.Join(states, ",") != "pending,running,completed" {
		t.Errorf("states %v", states)
	}
	tool := m.part("tool")
	if tool == nil || tool["callID"] != "call-1" {
		t.Fatalf("stored tool part %v", tool)
	}
	// The text after the tool is its own part, after the tool.
	if m.Parts[len(m.Parts)-2]["type"] != "text" || m.Parts[1]["type"] != "tool" {
		t.Errorf("part order %v", m.Parts)
	}
}

func TestFailedToolKeepsItsOutput(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	m := h.prompt(h.newSession(), "fail")
	st := m.part("tool")["state"].(map[string]any)
	if st["status"] != "error" || st["output"] != "no such file" || st["error"] != "no such file" {
		t.Errorf("state %v: output in output (as native OpenCode), error for the SDK's type", st)
	}
	if in := st["input"].(map[string]any); in["filePath"] != "/nope" {
		t.Errorf("input %v", in)
	}
}

func TestPermissionAnswered(t *testing.T) {
	for _, tc := range []struct {
		name, path, body, want string
	}{
		{"once", "/permission/%s/reply", `{"reply":"once"}`, "permission: selected yes"},
		{"always", "/permission/%s/reply", `{"reply":"always"}`, "permission: selected always"},
		{"reject", "/permission/%s/reply", `{"reply":"reject"}`, "permission: selected no"},
		{"legacy", "/session/{session}/permissions/%s", `{"response":"once"}`, "permission: selected yes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{})
			ev := h.events("/event")
			id := h.newSession()
			h.ok("POST", "/session/"+id+"/prompt_async", promptBody("permission"), nil)
			asked := ev.until("permission.asked")
			var req permissionRequest
			asked[len(asked)-1].prop(&req)
			if req.SessionID != id || req.Permission != "edit" || len(req.Patterns) != 1 || req.Patterns[0] != "notes.txt" || req.Tool == nil || req.Tool.CallID != "call-3" {
				t.Fatalf("permission.asked %s", asked[len(asked)-1].Raw)
			}
			var pending []permissionRequest
			h.ok("GET", "/permission", "", &pending)
			if len(pending) != 1 || pending[0].ID != req.ID {
				t.Fatalf("GET /permission %v", pending)
			}
			path := strings.Replace(fmt.Sprintf(tc.path, req.ID), "{session}", id, 1)
			h.ok("POST", path, tc.body, nil)
			if code, _ := h.do("POST", path, tc.body); code != http.StatusNotFound {
				t.Errorf("second reply: %d, want 404 (answered once)", code)
			}
			evs := ev.until("session.idle")
			var text string
			var replied bool
			for _, e := range evs {
				if e.Type == "permission.replied" {
					replied = true
				}
				if e.Type == "message.part.updated" {
					var p struct {
						Part struct {
							Type, Text string
						} `json:"part"`
					}
					e.prop(&p)
					if p.Part.Type == "text" {
						text = p.Part.Text
					}
				}
			}
			if !replied || text != tc.want {
				t.Errorf("replied %v, text %q, want %q", replied, text, tc.want)
			}
			h.ok("GET", "/permission", "", &pending)
			if len(pending) != 0 {
				t.Errorf("still pending: %v", pending)
			}
		})
	}
}

func TestQuestionAnswered(t *testing.T) {
	for _, tc := range []struct {
		name, path, body, want string
	}{
		{"reply", "/question/%s/reply", `{"answers":[["green"],["Yes"]]}`, `answer: accept {"color":"green","ok":true}`},
		{"custom", "/question/%s/reply", `{"answers":[["blue"]]}`, `answer: accept {"color":"blue"}`},
		{"reject", "/question/%s/reject", ``, "answer: decline "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{})
			ev := h.events("/event")
			id := h.newSession()
			h.ok("POST", "/session/"+id+"/prompt_async", promptBody("question"), nil)
			asked := ev.until("question.asked")
			var q questionRequest
			asked[len(asked)-1].prop(&q)
			if len(q.Questions) != 2 || q.Questions[0].Header != "Color" || len(q.Questions[0].Options) != 2 ||
				q.Questions[0].Options[1].Label != "green" || q.Questions[1].Options[0].Label != "Yes" {
				t.Fatalf("question.asked %s", asked[len(asked)-1].Raw)
			}
			var pending []questionRequest
			h.ok("GET", "/question", "", &pending)
			if len(pending) != 1 {
				t.Fatalf("GET /question %v", pending)
			}
			h.ok("POST", fmt.Sprintf(tc.path, q.ID), tc.body, nil)
			m := lastAssistant(t, h, id)
			if got := m.text(); got != tc.want {
				t.Errorf("reply %q, want %q", got, tc.want)
			}
		})
	}
}

// lastAssistant waits for the session to go idle and returns its last
// message.
func lastAssistant(t *testing.T, h *harness, id string) wireMessage {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var st map[string]any
		h.ok("GET", "/session/status", "", &st)
		if st[id] == nil {
			var list []wireMessage
			h.ok("GET", "/session/"+id+"/message", "", &list)
			return list[len(list)-1]
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the session did not go idle")
	return wireMessage{}
}

func TestAbortCancelsTheTurn(t *testing.T) {
	agent := &fakeAgent{received: make(chan string, 64)}
	h := newHarness(t, harnessOptions{agent: agent})
	ev := h.events("/event")
	id := h.newSession()
	h.ok("POST", "/session/"+id+"/prompt_async", promptBody("slow"), nil)
	agent.await(t, "session/prompt")
	h.ok("POST", "/session/"+id+"/abort", "", nil)
	evs := ev.until("session.idle")
	var aborted bool
	for _, e := range evs {
		if e.Type == "session.error" && strings.Contains(string(e.Raw), "MessageAbortedError") {
			aborted = true
		}
	}
	if !aborted {
		t.Errorf("no session.error MessageAbortedError among %d events", len(evs))
	}
	if n := h.agent.seen("session/cancel"); n != 1 {
		t.Errorf("session/cancel sent %d times", n)
	}
	m := lastAssistant(t, h, id)
	if e, _ := m.Info["error"].(map[string]any); e["name"] != "MessageAbortedError" {
		t.Errorf("assistant message %v", m.Info)
	}
	// The session takes the next prompt.
	if got := h.prompt(id, "again").text(); got != "echo: again" {
		t.Errorf("after abort: %q", got)
	}
}

func TestAbortOfAnAgentThatIgnoresIt(t *testing.T) {
	h := newHarness(t, harnessOptions{agent: &fakeAgent{ignoreCancel: true}, cfg: func(c *Config) { c.AbortGrace = 50 * time.Millisecond }})
	ev := h.events("/event")
	id := h.newSession()
	h.ok("POST", "/session/"+id+"/prompt_async", promptBody("slow"), nil)
	ev.until("message.updated")
	ev.until("message.updated")
	h.ok("POST", "/session/"+id+"/abort", "", nil)
	ev.until("session.idle") // ended here, after the grace
}

func TestAgentExitEndsTheTurnAndTheNextPromptRestartsIt(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	id := h.newSession()
	m := h.prompt(id, "exit")
	e, _ := m.Info["error"].(map[string]any)
	if msg := fmt.Sprint(e["data"]); e == nil || !(strings.Contains(msg, "exited") || strings.Contains(msg, "stopped")) {
		t.Errorf("turn of an exiting agent: %v", m.Info)
	}
	if got := h.prompt(id, "back").text(); got != "echo: back" {
		t.Errorf("after the exit: %q", got)
	}
	if n := len(h.runner.Processes()); n != 2 {
		t.Errorf("%d agent processes, want 2 (restarted on the next prompt)", n)
	}
}

func TestSessionsShareOneAgentInstance(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := h.newSession()
			if got := h.prompt(id, fmt.Sprint("hi ", i)).text(); got != fmt.Sprint("echo: hi ", i) {
				t.Errorf("session %d: %q", i, got)
			}
		}()
	}
	wg.Wait()
	if n := len(h.runner.Processes()); n != 1 {
		t.Errorf("%d agent processes for 4 sessions of one agent, want 1", n)
	}
	if n := h.agent.seen("session/new"); n != 4 {
		t.Errorf("%d session/new, want 4", n)
	}
	if n := len(h.instances.List()); n != 1 {
		t.Errorf("%d instances listed, want 1 (visible under /v1/acp)", n)
	}
}

func TestRestartKeepsSessionsAndLoadsThem(t *testing.T) {
	for _, load := range []bool{true, false} {
		t.Run(fmt.Sprint("loadSession=", load), func(t *testing.T) {
			db := tempDB(t)
			agent := &fakeAgent{loadSession: load}
			h1 := newHarness(t, harnessOptions{dbPath: db, agent: agent})
			id := h1.newSession()
			h1.prompt(id, "first")
			h1.close()

			h2 := newHarness(t, harnessOptions{dbPath: db, agent: agent})
			var sessions []sessionInfo
			h2.ok("GET", "/session", "", &sessions)
			if len(sessions) != 1 || sessions[0].ID != id || sessions[0].Title != "first" {
				t.Fatalf("sessions after restart: %v", sessions)
			}
			var list []wireMessage
			h2.ok("GET", "/session/"+id+"/message", "", &list)
			if len(list) != 2 || list[1].text() != "echo: first" {
				t.Fatalf("messages after restart: %v", list)
			}
			got := h2.prompt(id, "second").text()
			want := "echo: second"
			if load {
				want = "(loaded) echo: second"
			}
			if got != want {
				t.Errorf("prompt after restart: %q, want %q", got, want)
			}
			if load && (len(agent.loads) != 1 || agent.loads[0] != "s1") {
				t.Errorf("session/load calls %v, want [s1]", agent.loads)
			}
			h2.ok("GET", "/session/"+id+"/message", "", &list)
			if len(list) != 4 {
				t.Errorf("%d messages, want 4 (the replayed history is not added)", len(list))
			}
		})
	}
}

func TestFirstPromptChoosesTheAgent(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	id := h.newSession()
	body := `{"model":{"providerID":"other","modelID":"m1"},"parts":[{"type":"text","text":"hi"}]}`
	var m wireMessage
	h.ok("POST", "/session/"+id+"/message", body, &m)
	if m.Info["providerID"] != "other" || m.Info["modelID"] != "m1" {
		t.Errorf("info %v", m.Info)
	}
	if p := h.runner.Processes(); len(p) != 1 || p[0].Spec.Agent != "other" {
		t.Errorf("processes %v", p)
	}
	code, b := h.do("POST", "/session/"+id+"/message", `{"model":{"providerID":"fake","modelID":"m"},"parts":[{"type":"text","text":"hi"}]}`)
	if code != http.StatusBadRequest || !strings.Contains(string(b), "runs agent") {
		t.Errorf("switching agents: %d %s", code, b)
	}
}

func TestModelIsSetOnTheAgent(t *testing.T) {
	agent := &fakeAgent{models: true}
	h := newHarness(t, harnessOptions{agent: agent})
	id := h.newSession()
	for range 2 {
		h.ok("POST", "/session/"+id+"/message", `{"model":{"providerID":"fake","modelID":"large"},"parts":[{"type":"text","text":"hi"}]}`, nil)
	}
	if len(agent.models_) != 1 || agent.models_[0] != "large" {
		t.Errorf("models set %v, want [large] (once)", agent.models_)
	}
}

func TestRequestsRefused(t *testing.T) {
	h := newHarness(t, harnessOptions{cfg: func(c *Config) { c.MaxBody = 1024 }})
	id := h.newSession()
	for _, tc := range []struct {
		name, method, path, body string
		want                     int
	}{
		{"unknown session", "GET", "/session/ses_nope", "", 404},
		{"unknown message", "GET", "/session/" + id + "/message/msg_nope", "", 404},
		{"unknown route", "GET", "/nope", "", 404},
		{"no parts", "POST", "/session/" + id + "/message", `{"parts":[]}`, 400},
		{"bad part type", "POST", "/session/" + id + "/message", `{"parts":[{"type":"bogus"}]}`, 400},
		{"bad message id", "POST", "/session/" + id + "/message", `{"messageID":"../x","parts":[{"type":"text","text":"a"}]}`, 400},
		{"bad json", "POST", "/session/" + id + "/message", `{`, 400},
		{"too large", "POST", "/session/" + id + "/message", promptBody(strings.Repeat("x", 2048)), 413},
		{"relative directory", "POST", "/session?directory=rel", `{}`, 400},
		{"bad reply", "POST", "/permission/per_x/reply", `{"reply":"maybe"}`, 400},
		{"unknown permission", "POST", "/permission/per_x/reply", `{"reply":"once"}`, 404},
		{"unknown question", "POST", "/question/que_x/reject", ``, 404},
		{"shell", "POST", "/session/" + id + "/shell", `{}`, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := h.do(tc.method, tc.path, tc.body)
			if code != tc.want {
				t.Errorf("%d %s, want %d", code, b, tc.want)
			}
			if !json.Valid(b) {
				t.Errorf("body is not JSON: %s", b)
			}
		})
	}
}

func TestClientMessageIDIsKept(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	id := h.newSession()
	body := `{"messageID":"msg_client1","parts":[{"id":"prt_client1","type":"text","text":"hi"}]}`
	h.ok("POST", "/session/"+id+"/message", body, nil)
	var list []wireMessage
	h.ok("GET", "/session/"+id+"/message", "", &list)
	if list[0].Info["id"] != "msg_client1" || list[0].Parts[0]["id"] != "prt_client1" {
		t.Errorf("user message %v", list[0])
	}
	if code, _ := h.do("POST", "/session/"+id+"/message", body); code != http.StatusBadRequest {
		t.Errorf("a second message with the same id: %d, want 400", code)
	}
}

func TestDeleteSession(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	id := h.newSession()
	h.prompt(id, "hi")
	h.ok("DELETE", "/session/"+id, "", nil)
	if code, _ := h.do("GET", "/session/"+id, ""); code != http.StatusNotFound {
		t.Errorf("deleted session: %d", code)
	}
	var list []sessionInfo
	h.ok("GET", "/session", "", &list)
	if len(list) != 0 {
		t.Errorf("sessions %v", list)
	}
}

func TestTodosFromAPlan(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	id := h.newSession()
	h.prompt(id, "plan")
	var todos []todo
	h.ok("GET", "/session/"+id+"/todo", "", &todos)
	if len(todos) != 1 || todos[0].Content != "read" || todos[0].Status != "completed" {
		t.Errorf("todos %v", todos)
	}
}

func TestLongTextStreamsDeltasAndIsStoredWhole(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ev := h.events("/event")
	id := h.newSession()
	const n = 200 << 10
	m := h.prompt(id, fmt.Sprint("big ", n))
	if got := len(m.text()); got != n {
		t.Errorf("stored text %d bytes, want %d", got, n)
	}
	var updates, deltas int
	for _, e := range ev.until("session.idle") {
		switch e.Type {
		case "message.part.updated":
			updates++
		case "message.part.delta":
			deltas++
		}
	}
	// Up to 64 KiB the whole part goes with each chunk; then deltas.
	if deltas < 100 || updates > 80 {
		t.Errorf("%d part updates, %d deltas", updates, deltas)
	}
}

func TestProviders(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	var p struct {
		All []struct {
			ID     string
			Models map[string]map[string]any
		} `json:"all"`
		Default   map[string]string `json:"default"`
		Connected []string          `json:"connected"`
	}
	h.ok("GET", "/provider", "", &p)
	if len(p.All) != 1 || p.All[0].ID != "fake" || p.Default["fake"] != "default" || len(p.Connected) != 1 {
		t.Errorf("providers %+v", p)
	}
	var c struct {
		Providers []map[string]any  `json:"providers"`
		Default   map[string]string `json:"default"`
	}
	h.ok("GET", "/config/providers", "", &c)
	if len(c.Providers) != 1 || c.Default["fake"] == "" {
		t.Errorf("config providers %+v", c)
	}
}

func TestQueuedPrompts(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ev := h.events("/event")
	id := h.newSession()
	h.ok("POST", "/session/"+id+"/prompt_async", promptBody("slow"), nil)
	ev.until("session.status")
	for range maxQueued {
		h.ok("POST", "/session/"+id+"/prompt_async", promptBody("next"), nil)
	}
	if code, b := h.do("POST", "/session/"+id+"/prompt_async", promptBody("one too many")); code != http.StatusTooManyRequests {
		t.Errorf("prompt past the queue: %d %s", code, b)
	}
	h.ok("POST", "/session/"+id+"/abort", "", nil)
	for range maxQueued + 1 {
		ev.until("session.idle")
	}
	var list []wireMessage
	h.ok("GET", "/session/"+id+"/message", "", &list)
	if len(list) != 2*(maxQueued+1) {
		t.Errorf("%d messages, want %d", len(list), 2*(maxQueued+1))
	}
}

// Prompts running or waiting over all sessions are bounded (MaxTurns):
// sessions are as many as a client creates, and each turn is a goroutine
// and a prompt on the agent. One past it is 429, synchronous or not, and
// leaves no message behind; a turn that ends frees its place.
func TestTurnsOverAllSessionsAreBounded(t *testing.T) {
	h := newHarness(t, harnessOptions{cfg: func(c *Config) { c.MaxTurns = 3 }})
	ev := h.events("/event")
	ids := []string{h.newSession(), h.newSession(), h.newSession(), h.newSession()}
	h.ok("POST", "/session/"+ids[0]+"/prompt_async", promptBody("slow"), nil)
	h.ok("POST", "/session/"+ids[1]+"/prompt_async", promptBody("slow"), nil)
	h.ok("POST", "/session/"+ids[1]+"/prompt_async", promptBody("queued"), nil)
	for _, req := range [][2]string{{ids[2], "prompt_async"}, {ids[3], "message"}, {ids[0], "prompt_async"}} {
		code, b := h.do("POST", "/session/"+req[0]+"/"+req[1], promptBody("one too many"))
		if code != http.StatusTooManyRequests || !strings.Contains(string(b), "3 prompts are running or waiting") {
			t.Fatalf("%s past the bound: %d %s", req[1], code, b)
		}
	}
	var list []wireMessage
	h.ok("GET", "/session/"+ids[2]+"/message", "", &list)
	if len(list) != 0 {
		t.Errorf("a refused prompt left %d messages", len(list))
	}
	idle := func(id string) {
		for {
			if e := ev.until("session.idle"); strings.Contains(string(e[len(e)-1].Raw), id) {
				return
			}
		}
	}
	h.ok("POST", "/session/"+ids[0]+"/abort", "", nil)
	idle(ids[0])
	if got := h.prompt(ids[3], "after").text(); got != "echo: after" {
		t.Errorf("a prompt once a turn ended: %q", got)
	}
	h.ok("POST", "/session/"+ids[1]+"/abort", "", nil)
	idle(ids[1])
	idle(ids[1])
	if n := h.a.turns.Load(); n != 0 {
		t.Errorf("%d turns still counted", n)
	}
}

func TestBodiesInFlightAreBounded(t *testing.T) {
	// A body larger than all bodies may hold together is refused as it
	// arrives (503), not buffered.
	h := newHarness(t, harnessOptions{cfg: func(c *Config) { c.InflightBytes = 4 << 10 }})
	id := h.newSession()
	code, b := h.do("POST", "/session/"+id+"/message", promptBody(strings.Repeat("x", 8<<10)))
	if code != http.StatusServiceUnavailable {
		t.Errorf("%d %s, want 503", code, b)
	}
	if got := h.a.inflight.Used(); got != 0 {
		t.Errorf("%d bytes still charged", got)
	}
	if got := h.prompt(id, "small").text(); got != "echo: small" {
		t.Errorf("a small prompt after: %q", got)
	}
}

func TestPartTextIsBounded(t *testing.T) {
	h := newHarness(t, harnessOptions{cfg: func(c *Config) { c.MaxPartBytes = 10 << 10 }})
	m := h.prompt(h.newSession(), "big 50000")
	if got := len(m.text()); got != 10<<10 {
		t.Errorf("text of %d bytes, want the 10 KiB bound", got)
	}
	if m.Info["finish"] != "stop" {
		t.Errorf("info %v", m.Info)
	}
}

func TestListingsAreBudgeted(t *testing.T) {
	// A listing larger than the memory budget (its rows and the answer:
	// twice their size) is refused (503), not built.
	h := newHarness(t, harnessOptions{cfg: func(c *Config) { c.InflightBytes = 100 << 10 }})
	id := h.newSession()
	h.prompt(id, "big 30000")
	h.prompt(id, "big 30000")
	if code, b := h.do("GET", "/session/"+id+"/message", ""); code != http.StatusServiceUnavailable {
		t.Errorf("%d %.200s, want 503", code, b)
	}
	if got := h.a.inflight.Used(); got != 0 {
		t.Errorf("%d bytes still charged", got)
	}
	var last []wireMessage
	h.ok("GET", "/session/"+id+"/message?limit=1", "", &last)
	if len(last) != 1 || len(last[0].text()) != 30000 {
		t.Errorf("limit=1: %d messages", len(last))
	}
}
