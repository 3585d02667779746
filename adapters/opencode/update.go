package opencode

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// sessionUpdate is the part of an ACP session/update that is read.
type sessionUpdate struct {
	Kind    string          `json:"sessionUpdate"`
	Content json.RawMessage `json:"content"` // a block (chunks) or a list (tool calls)

	ToolCallID string          `json:"toolCallId"`
	Title      *string         `json:"title"`
	ToolKind   string          `json:"kind"`
	Status     string          `json:"status"`
	RawInput   json.RawMessage `json:"rawInput"`
	RawOutput  json.RawMessage `json:"rawOutput"`
	Locations  []struct {
		Path string `json:"path"`
	} `json:"locations"`

	Entries []struct {
		Content  string `json:"content"`
		Priority string `json:"priority"`
		Status   string `json:"status"`
	} `json:"entries"`
	AvailableCommands []command `json:"availableCommands"`
}

// applyUpdate projects one session/update of the agent onto the session:
// streamed text and thoughts become text and reasoning parts (with delta),
// tool calls tool parts through their states, a plan the todo list, a
// title the session's. It runs on the connection's reader, in order.
func (s *session) applyUpdate(raw json.RawMessage) {
	var u sessionUpdate
	if err := json.Unmarshal(raw, &u); err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loading || s.gone {
		return // session/load replays history the store already has
	}
	t := s.turn
	if t != nil && (t.ended || t.asst == nil) {
		t = nil
	}
	switch u.Kind {
	case "agent_message_chunk":
		if t != nil {
			s.stream(t, "text", blockText(u.Content))
		}
	case "agent_thought_chunk":
		if t != nil {
			s.stream(t, "reasoning", blockText(u.Content))
		}
	case "tool_call", "tool_call_update":
		if t != nil && u.ToolCallID != "" {
			s.tool(t, &u)
		}
	case "plan":
		todos := make([]todo, 0, len(u.Entries))
		for i, e := range u.Entries {
			todos = append(todos, todo{ID: strconv.Itoa(i + 1), Content: e.Content, Status: e.Status, Priority: firstNonEmpty(e.Priority, "medium")})
		}
		b, _ := json.Marshal(todos)
		s.persist(s.a.store.putTodos(dbctx, s.id, b))
		s.publish("todo.updated", map[string]any{"sessionID": s.id, "todos": json.RawMessage(b)})
	case "available_commands_update":
		if len(u.AvailableCommands) <= 256 {
			s.commands = u.AvailableCommands
		}
	case "session_info_update":
		if u.Title != nil && *u.Title != "" {
			s.info.Title = truncate(*u.Title, 256)
			s.touched()
		}
	}
}

// stream appends a chunk of text or thought to the turn's open part of
// that type, opening one when the last part is of another type (a tool
// call between two texts makes two text parts, in order).
func (s *session) stream(t *turn, typ, chunk string) {
	if chunk == "" {
		return
	}
	if t.open != nil && t.open.Type != typ {
		s.closeOpen(t)
	}
	p := t.open
	if p == nil {
		p = &part{ID: s.a.ids.part(), SessionID: s.id, MessageID: t.asst.ID, Type: typ, Start: s.a.now()}
		t.parts = append(t.parts, p)
		t.open = p
	}
	if room := s.a.cfg.MaxPartBytes - len(p.Text); len(chunk) > room {
		if room <= 0 {
			return
		}
		chunk = truncate(chunk, room)
	}
	p.Text += chunk
	s.putPart(t, p, chunk)
}

// tool moves a tool part through its states. The tool's name is decided
// at its first update and kept; its input is kept from the update that
// gave it; output goes to output whatever the outcome (as native
// OpenCode does).
func (s *session) tool(t *turn, u *sessionUpdate) {
	s.closeOpen(t)
	now := s.a.now()
	p := t.tools[u.ToolCallID]
	if p == nil {
		if len(t.tools) >= 4096 {
			return
		}
		p = &part{ID: s.a.ids.part(), SessionID: s.id, MessageID: t.asst.ID, Type: "tool", CallID: truncate(u.ToolCallID, 256),
			Tool: toolName(u.ToolKind, u.Title), State: toolState{Status: "pending", Input: emptyObject}}
		t.tools[u.ToolCallID] = p
		t.parts = append(t.parts, p)
	}
	st := &p.State
	if u.Title != nil {
		st.Title = truncate(*u.Title, 1024)
	}
	if len(u.RawInput) > 0 && !bytes.Equal(u.RawInput, []byte("null")) {
		st.Raw = truncate(string(u.RawInput), s.a.cfg.MaxPartBytes)
		if isObject(u.RawInput) && len(u.RawInput) <= s.a.cfg.MaxPartBytes {
			st.Input = append(json.RawMessage(nil), u.RawInput...)
		}
	}
	if out := toolOutput(u.Content, u.RawOutput); out != "" {
		st.Output = truncate(out, s.a.cfg.MaxPartBytes)
	}
	st.Metadata = toolMetadata(st.Metadata, u, st.Output)
	switch u.Status {
	case "in_progress":
		st.Status = "running"
	case "completed":
		st.Status = "completed"
	case "failed":
		st.Status = "error"
		st.Error = firstNonEmpty(st.Output, "the tool failed")
	case "pending":
		if st.Status == "" {
			st.Status = "pending"
		}
	}
	if st.Status != "pending" && st.Start == 0 {
		st.Start = now
	}
	if (st.Status == "completed" || st.Status == "error") && st.End == 0 {
		st.End = now
	}
	if st.Status == "completed" && st.Title == "" {
		st.Title = p.Tool
	}
	s.putPart(t, p, "")
}

// toolName is the OpenCode tool a call is shown as, from its ACP kind:
// the names OpenCode's clients know (bash, read, edit, grep, webfetch)
// where one fits, else the kind itself.
func toolName(kind string, title *string) string {
	switch kind {
	case "execute":
		return "bash"
	case "read":
		return "read"
	case "edit", "delete", "move":
		return "edit"
	case "search":
		return "grep"
	case "fetch":
		return "webfetch"
	case "":
		if title != nil && *title != "" {
			return truncate(*title, 64)
		}
		return "tool"
	}
	return truncate(kind, 64)
}

// toolOutput is the text a tool call produced: its content's text blocks
// and diffs, else its raw output.
func toolOutput(content, rawOutput json.RawMessage) string {
	var items []struct {
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
		Path    string          `json:"path"`
		NewText *string         `json:"newText"`
	}
	var b strings.Builder
	if json.Unmarshal(content, &items) == nil {
		for _, it := range items {
			switch it.Type {
			case "content":
				if txt := blockText(it.Content); txt != "" {
					if b.Len() > 0 {
						b.WriteByte('\n')
					}
					b.WriteString(txt)
				}
			case "diff":
				if b.Len() > 0 {
					b.WriteByte('\n')
				}
				b.WriteString("edited " + it.Path)
			}
		}
	}
	if b.Len() > 0 {
		return b.String()
	}
	if len(rawOutput) == 0 || bytes.Equal(rawOutput, []byte("null")) {
		return ""
	}
	var str string
	if json.Unmarshal(rawOutput, &str) == nil {
		return str
	}
	var obj struct {
		Output string `json:"output"`
		Stdout string `json:"stdout"`
	}
	if json.Unmarshal(rawOutput, &obj) == nil && firstNonEmpty(obj.Output, obj.Stdout) != "" {
		return firstNonEmpty(obj.Output, obj.Stdout)
	}
	return string(rawOutput)
}

// toolMetadata merges into a tool's metadata what OpenCode clients read
// there (output, as bash's does) and the ACP kind and locations, keeping
// what earlier updates gave.
func toolMetadata(prev json.RawMessage, u *sessionUpdate, output string) json.RawMessage {
	md := map[string]any{}
	if len(prev) > 0 {
		_ = json.Unmarshal(prev, &md)
	}
	if output != "" {
		md["output"] = output
	}
	if u.ToolKind != "" {
		md["kind"] = u.ToolKind
	}
	if len(u.Locations) > 0 && len(u.Locations) <= 64 {
		paths := make([]string, 0, len(u.Locations))
		for _, l := range u.Locations {
			paths = append(paths, truncate(l.Path, 4096))
		}
		md["locations"] = paths
	}
	if len(md) == 0 {
		return nil
	}
	b, _ := json.Marshal(md)
	return b
}

// blockText is the text of an ACP content block ("" for other kinds).
func blockText(raw json.RawMessage) string {
	var b struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &b) != nil || b.Type != "text" {
		return ""
	}
	return b.Text
}

func isObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{'
}

// truncate cuts s to at most n bytes without splitting a character.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
