package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// serveACP is "testagent -acp [STATE_DIR]": a scripted ACP agent for the
// OpenCode tests, for what the built-in mock agent does not do. It
// advertises session/load when given a state directory, where it records
// the sessions it created, so a later process (after a daemon restart)
// loads them. The first word of a prompt decides the turn:
//
//	tool        a tool call (execute, rawInput {"command":"echo hi"}) pending,
//	            in_progress, then completed with output "hi"; then text "tool done"
//	fail        a tool call (read) that fails with output "no such file"
//	question    elicitation/create (form: color, one of red/green; count, a
//	            number); then text "answer: <content as JSON>" or the action
//	permission  session/request_permission; then text "permission: <outcome>"
//	slow        waits for session/cancel (at most 30 s)
//	stream N    N chunks "c<i> "
//	think       a thought chunk, then text
//	plan        a plan of two entries
//	title T     session_info_update with title T
//	emit FILE   writes each line of FILE to stdout as it is, "$SESSION"
//	            replaced by the session's id (a JSON string's contents),
//	            then text "emitted N lines": a hostile agent's output for
//	            the inspector's tests, written by the test
//	anything    text "echo: <prompt>", prefixed "(loaded) " in a session
//	            this process loaded
func serveACP(stateDir string) {
	a := &acpAgent{stateDir: stateDir, waiting: map[string]chan json.RawMessage{}, cancels: map[string]chan struct{}{}, loaded: map[string]bool{}}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			a.handle(line)
		}
		if err != nil {
			return
		}
	}
}

type acpAgent struct {
	stateDir string

	mu      sync.Mutex
	nextID  int
	waiting map[string]chan json.RawMessage // our requests to the client, by id
	cancels map[string]chan struct{}        // running prompts, by session
	loaded  map[string]bool
}

type acpMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func (a *acpAgent) send(v any) {
	b, _ := json.Marshal(v)
	write(b)
}

func (a *acpAgent) reply(id json.RawMessage, result any) {
	a.send(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func (a *acpAgent) fail(id json.RawMessage, code int, msg string) {
	a.send(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
}

func (a *acpAgent) update(session string, u map[string]any) {
	a.send(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{"sessionId": session, "update": u}})
}

func (a *acpAgent) say(session, text string) {
	a.update(session, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]string{"type": "text", "text": text}})
}

// call sends a request to the client and waits for its result.
func (a *acpAgent) call(method string, params any) json.RawMessage {
	a.mu.Lock()
	a.nextID++
	id := "agent-" + strconv.Itoa(a.nextID)
	ch := make(chan json.RawMessage, 1)
	a.waiting[strconv.Quote(id)] = ch
	a.mu.Unlock()
	a.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return <-ch
}

func (a *acpAgent) handle(line []byte) {
	var m acpMsg
	if err := json.Unmarshal(line, &m); err != nil {
		fmt.Fprintln(os.Stderr, "testagent: bad line:", err)
		return
	}
	if m.Method == "" { // a response to one of our requests
		a.mu.Lock()
		ch := a.waiting[string(m.ID)]
		delete(a.waiting, string(m.ID))
		a.mu.Unlock()
		if ch != nil {
			if m.Error != nil {
				ch <- json.RawMessage(`{"error":true}`)
			} else {
				ch <- m.Result
			}
		}
		return
	}
	var p struct {
		SessionID string `json:"sessionId"`
		Prompt    []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"prompt"`
	}
	_ = json.Unmarshal(m.Params, &p)
	switch m.Method {
	case "initialize":
		a.reply(m.ID, map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{"loadSession": a.stateDir != ""}, "authMethods": []any{}})
	case "session/new":
		id := fmt.Sprintf("ta-%d-%d", os.Getpid(), time.Now().UnixNano())
		if a.stateDir != "" {
			_ = os.WriteFile(filepath.Join(a.stateDir, id), nil, 0o644)
		}
		a.reply(m.ID, map[string]any{"sessionId": id})
	case "session/load":
		if a.stateDir == "" {
			a.fail(m.ID, -32601, "method not found")
			return
		}
		if _, err := os.Stat(filepath.Join(a.stateDir, filepath.Base(p.SessionID))); err != nil {
			a.fail(m.ID, -32002, "unknown session "+p.SessionID)
			return
		}
		a.mu.Lock()
		a.loaded[p.SessionID] = true
		a.mu.Unlock()
		// History replays before the answer, as the protocol has it.
		a.update(p.SessionID, map[string]any{"sessionUpdate": "user_message_chunk", "content": map[string]string{"type": "text", "text": "(history)"}})
		a.say(p.SessionID, "(history reply)")
		a.reply(m.ID, map[string]any{})
	case "session/cancel":
		a.mu.Lock()
		if c := a.cancels[p.SessionID]; c != nil {
			close(c)
			delete(a.cancels, p.SessionID)
		}
		a.mu.Unlock()
	case "session/prompt":
		var text []string
		for _, b := range p.Prompt {
			if b.Type == "text" {
				text = append(text, b.Text)
			}
		}
		cancel := make(chan struct{})
		a.mu.Lock()
		a.cancels[p.SessionID] = cancel
		a.mu.Unlock()
		go func() {
			stop := a.turn(p.SessionID, strings.Join(text, " "), cancel)
			a.mu.Lock()
			if a.cancels[p.SessionID] == cancel {
				delete(a.cancels, p.SessionID)
			}
			a.mu.Unlock()
			a.reply(m.ID, map[string]string{"stopReason": stop})
		}()
	default:
		if m.ID != nil {
			a.fail(m.ID, -32601, "method not found: "+m.Method)
		}
	}
}

func (a *acpAgent) turn(sid, text string, cancel chan struct{}) string {
	word, rest, _ := strings.Cut(strings.TrimSpace(text), " ")
	switch word {
	case "tool":
		a.update(sid, map[string]any{"sessionUpdate": "tool_call", "toolCallId": "call-1", "title": "echo hi", "kind": "execute", "status": "pending", "rawInput": map[string]string{"command": "echo hi"}})
		a.update(sid, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "in_progress"})
		a.update(sid, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "completed",
			"content": []any{map[string]any{"type": "content", "content": map[string]string{"type": "text", "text": "hi"}}}, "rawOutput": map[string]any{"exitCode": 0}})
		a.say(sid, "tool done")
		return "end_turn"
	case "fail":
		a.update(sid, map[string]any{"sessionUpdate": "tool_call", "toolCallId": "call-2", "title": "read /nope", "kind": "read", "status": "in_progress", "rawInput": map[string]string{"filePath": "/nope"}})
		a.update(sid, map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call-2", "status": "failed",
			"content": []any{map[string]any{"type": "content", "content": map[string]string{"type": "text", "text": "no such file"}}}})
		a.say(sid, "fail done")
		return "end_turn"
	case "question":
		res := a.call("elicitation/create", map[string]any{
			"sessionId": sid, "mode": "form", "message": "Pick a color",
			"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{
				"color": map[string]any{"type": "string", "title": "Color", "enum": []string{"red", "green"}},
			}, "required": []string{"color"}},
		})
		var r struct {
			Action  string          `json:"action"`
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(res, &r)
		if r.Action == "accept" {
			a.say(sid, "answer: "+string(r.Content))
		} else {
			a.say(sid, "answer: "+r.Action)
		}
		return "end_turn"
	case "permission":
		res := a.call("session/request_permission", map[string]any{
			"sessionId": sid,
			"toolCall":  map[string]any{"toolCallId": "call-3", "title": "write notes.txt", "kind": "edit", "status": "pending", "rawInput": map[string]string{"filePath": "notes.txt"}, "locations": []any{map[string]string{"path": "notes.txt"}}},
			"options": []any{
				map[string]string{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
				map[string]string{"optionId": "always", "name": "Always", "kind": "allow_always"},
				map[string]string{"optionId": "no", "name": "Reject", "kind": "reject_once"},
			},
		})
		var r struct {
			Outcome struct {
				Outcome  string `json:"outcome"`
				OptionID string `json:"optionId"`
			} `json:"outcome"`
		}
		_ = json.Unmarshal(res, &r)
		a.say(sid, "permission: "+strings.TrimSpace(r.Outcome.Outcome+" "+r.Outcome.OptionID))
		return "end_turn"
	case "slow":
		select {
		case <-cancel:
			return "cancelled"
		case <-time.After(30 * time.Second):
		}
	case "stream":
		n, _ := strconv.Atoi(strings.TrimSpace(rest))
		for i := 1; i <= n; i++ {
			a.say(sid, "c"+strconv.Itoa(i)+" ")
		}
		return "end_turn"
	case "think":
		a.update(sid, map[string]any{"sessionUpdate": "agent_thought_chunk", "content": map[string]string{"type": "text", "text": "thinking " + rest}})
	case "plan":
		a.update(sid, map[string]any{"sessionUpdate": "plan", "entries": []any{
			map[string]string{"content": "read", "priority": "high", "status": "completed"},
			map[string]string{"content": "write", "priority": "low", "status": "pending"},
		}})
	case "title":
		a.update(sid, map[string]any{"sessionUpdate": "session_info_update", "title": rest})
		return "end_turn"
	case "emit":
		b, err := os.ReadFile(strings.TrimSpace(rest))
		if err != nil {
			a.say(sid, "emit: "+err.Error())
			return "end_turn"
		}
		n := 0
		for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
			write([]byte(strings.ReplaceAll(line, "$SESSION", sid)))
			n++
		}
		a.say(sid, "emitted "+strconv.Itoa(n)+" lines")
		return "end_turn"
	}
	a.mu.Lock()
	loaded := a.loaded[sid]
	a.mu.Unlock()
	prefix := ""
	if loaded {
		prefix = "(loaded) "
	}
	a.say(sid, prefix+"echo: "+text)
	return "end_turn"
}
