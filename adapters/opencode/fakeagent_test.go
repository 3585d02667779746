package opencode

import (
	"bufio"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// fakeAgent plays a scripted ACP agent on a FakeProcess's pipes (as the
// FakeRunner's Agent). The first word of a prompt decides the turn, as in
// e2e/testagent's -acp mode, plus:
//
//	exit    the process exits at once (code 3)
//	big N   N bytes of text, in chunks of 1 KiB
type fakeAgent struct {
	loadSession  bool // advertise session/load
	ignoreCancel bool // session/cancel does nothing
	models       bool // offer the model as a config option
	// loadGate, when set, holds each session/load's answer until it can
	// receive.
	loadGate chan struct{}
	// received, when set, hears each method the agent reads (buffered by
	// the test; the agent blocks on a full channel).
	received chan string

	mu       sync.Mutex
	known    map[string]bool // sessions it created or loaded, over all its processes
	loads    []string        // session/load calls
	methods  []string        // every method received
	models_  []string        // models set
	prompts  int
	sessions int
}

func (f *fakeAgent) record(method string) {
	f.mu.Lock()
	f.methods = append(f.methods, method)
	f.mu.Unlock()
	if f.received != nil {
		f.received <- method
	}
}

// await waits until the agent has read method.
func (f *fakeAgent) await(t interface {
	Helper()
	Fatalf(string, ...any)
}, method string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case m := <-f.received:
			if m == method {
				return
			}
		case <-timeout:
			t.Fatalf("the agent never read %s", method)
		}
	}
}

func (f *fakeAgent) seen(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range f.methods {
		if m == method {
			n++
		}
	}
	return n
}

// run plays one process.
func (f *fakeAgent) run(_ domain.LaunchSpec, p *porttest.FakeProcess) {
	var wmu sync.Mutex
	send := func(v any) {
		b, _ := json.Marshal(v)
		wmu.Lock()
		defer wmu.Unlock()
		_, _ = p.AgentStdout.Write(append(b, '\n'))
	}
	var mu sync.Mutex
	nextID := 0
	waiting := map[string]chan json.RawMessage{}
	cancels := map[string]chan struct{}{}
	loaded := map[string]bool{}
	update := func(sid string, u map[string]any) {
		send(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{"sessionId": sid, "update": u}})
	}
	say := func(sid, text string) {
		update(sid, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]string{"type": "text", "text": text}})
	}
	call := func(method string, params any) json.RawMessage {
		mu.Lock()
		nextID++
		id := "a" + strconv.Itoa(nextID)
		ch := make(chan json.RawMessage, 1)
		waiting[strconv.Quote(id)] = ch
		mu.Unlock()
		send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		return <-ch
	}
	turn := func(sid, text string, cancel chan struct{}) string {
		word, rest, _ := strings.Cut(strings.TrimSpace(text), " ")
		switch word {
		case "exit":
			p.Exit(porttest.ExitCode(3))
			return ""
		case "tool":
			update(sid, map[string]any{"sessionUpdate": "tool_call", "toolCallId": "call-1", "title": "echo hi", "kind": "execute", "status": "pending", "rawInput": map[string]string{"command": "echo hi"}})
			update(sid, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "in_progress"})
			update(sid, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "completed",
				"content": []any{map[string]any{"type": "content", "content": map[string]string{"type": "text", "text": "hi"}}}})
			say(sid, "tool done")
			return "end_turn"
		case "fail":
			update(sid, map[string]any{"sessionUpdate": "tool_call", "toolCallId": "call-2", "title": "read /nope", "kind": "read", "status": "in_progress", "rawInput": map[string]string{"filePath": "/nope"}})
			update(sid, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call-2", "status": "failed",
				"content": []any{map[string]any{"type": "content", "content": map[string]string{"type": "text", "text": "no such file"}}}})
			return "end_turn"
		case "question":
			res := call("elicitation/create", map[string]any{"sessionId": sid, "mode": "form", "message": "Pick a color",
				"requestedSchema": map[string]any{"type": "object", "properties": json.RawMessage(`{"color":{"type":"string","title":"Color","enum":["red","green"]},"ok":{"type":"boolean","title":"Sure?"}}`)}})
			var r struct {
				Action  string          `json:"action"`
				Content json.RawMessage `json:"content"`
			}
			_ = json.Unmarshal(res, &r)
			say(sid, "answer: "+r.Action+" "+string(r.Content))
			return "end_turn"
		case "permission":
			res := call("session/request_permission", map[string]any{"sessionId": sid,
				"toolCall": map[string]any{"toolCallId": "call-3", "title": "write notes.txt", "kind": "edit", "rawInput": map[string]string{"filePath": "notes.txt"}, "locations": []any{map[string]string{"path": "notes.txt"}}},
				"options": []any{
					map[string]string{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
					map[string]string{"optionId": "always", "name": "Always", "kind": "allow_always"},
					map[string]string{"optionId": "no", "name": "Reject", "kind": "reject_once"},
				}})
			var r struct {
				Outcome struct {
					Outcome  string `json:"outcome"`
					OptionID string `json:"optionId"`
				} `json:"outcome"`
			}
			_ = json.Unmarshal(res, &r)
			say(sid, "permission: "+strings.TrimSpace(r.Outcome.Outcome+" "+r.Outcome.OptionID))
			return "end_turn"
		case "slow", "/slow": // "/slow" as a command sends it
			select {
			case <-cancel:
				return "cancelled"
			case <-time.After(time.Minute):
				return "end_turn"
			}
		case "stream":
			n, _ := strconv.Atoi(rest)
			for i := 1; i <= n; i++ {
				say(sid, "c"+strconv.Itoa(i)+" ")
			}
			return "end_turn"
		case "big":
			n, _ := strconv.Atoi(rest)
			chunk := strings.Repeat("x", 1024)
			for ; n > 0; n -= 1024 {
				say(sid, chunk[:min(n, 1024)])
			}
			return "end_turn"
		case "think":
			update(sid, map[string]any{"sessionUpdate": "agent_thought_chunk", "content": map[string]string{"type": "text", "text": "hmm"}})
		case "plan":
			update(sid, map[string]any{"sessionUpdate": "plan", "entries": []any{map[string]string{"content": "read", "priority": "high", "status": "completed"}}})
		case "title":
			update(sid, map[string]any{"sessionUpdate": "session_info_update", "title": rest})
			return "end_turn"
		}
		mu.Lock()
		prefix := ""
		if loaded[sid] {
			prefix = "(loaded) "
		}
		mu.Unlock()
		say(sid, prefix+"echo: "+text)
		return "end_turn"
	}
	defer p.Exit(porttest.ExitCode(0))
	r := bufio.NewReader(p.AgentStdin)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		if m.Method == "" {
			mu.Lock()
			ch := waiting[string(m.ID)]
			delete(waiting, string(m.ID))
			mu.Unlock()
			if ch != nil {
				ch <- m.Result
			}
			continue
		}
		f.record(m.Method)
		var prm struct {
			SessionID string `json:"sessionId"`
			Value     string `json:"value"`
			Prompt    []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"prompt"`
		}
		_ = json.Unmarshal(m.Params, &prm)
		reply := func(result any) { send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result}) }
		fail := func(code int, msg string) {
			send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": code, "message": msg}})
		}
		switch m.Method {
		case "initialize":
			reply(map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{"loadSession": f.loadSession}})
		case "session/new":
			f.mu.Lock()
			f.sessions++
			sid := "s" + strconv.Itoa(f.sessions)
			if f.known == nil {
				f.known = map[string]bool{}
			}
			f.known[sid] = true
			f.mu.Unlock()
			res := map[string]any{"sessionId": sid}
			if f.models {
				res["configOptions"] = []any{map[string]any{"id": "model", "category": "model", "type": "select", "currentValue": "small", "options": []any{}}}
			}
			reply(res)
		case "session/load":
			f.mu.Lock()
			ok := f.known[prm.SessionID]
			f.loads = append(f.loads, prm.SessionID)
			f.mu.Unlock()
			if !ok {
				fail(-32002, "unknown session")
				continue
			}
			mu.Lock()
			loaded[prm.SessionID] = true
			mu.Unlock()
			update(prm.SessionID, map[string]any{"sessionUpdate": "user_message_chunk", "content": map[string]string{"type": "text", "text": "(history)"}})
			say(prm.SessionID, "(history)")
			if f.loadGate != nil {
				<-f.loadGate
			}
			reply(map[string]any{})
		case "session/set_config_option":
			f.mu.Lock()
			f.models_ = append(f.models_, prm.Value)
			f.mu.Unlock()
			reply(map[string]any{})
		case "session/cancel":
			if f.ignoreCancel {
				continue
			}
			mu.Lock()
			if c := cancels[prm.SessionID]; c != nil {
				close(c)
				delete(cancels, prm.SessionID)
			}
			mu.Unlock()
		case "session/prompt":
			f.mu.Lock()
			f.prompts++
			f.mu.Unlock()
			var text []string
			for _, b := range prm.Prompt {
				text = append(text, b.Text)
			}
			cancel := make(chan struct{})
			mu.Lock()
			cancels[prm.SessionID] = cancel
			mu.Unlock()
			go func(id json.RawMessage, sid string) {
				stop := turn(sid, strings.Join(text, " "), cancel)
				if stop != "" {
					send(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]string{"stopReason": stop}})
				}
			}(m.ID, prm.SessionID)
		default:
			if m.ID != nil {
				fail(-32601, "method not found")
			}
		}
	}
}
