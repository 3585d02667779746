package opencode

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
)

// ask is a request of the agent waiting for the user: a permission
// (session/request_permission) or a question (elicitation/create, form
// mode). It is answered once: by the client's reply, or "cancelled" when
// the turn ends or is aborted.
type ask struct {
	id      string
	kind    string // "permission" or "question"
	s       *session
	conn    *agentConn
	rpcID   json.RawMessage
	created int64

	perm    *permissionRequest
	options []permOption // permission: the agent's options

	question *questionRequest
	fields   []formField // question: one per question, in order
}

type permOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

// formField is one property of an elicitation form, as a question.
type formField struct {
	name   string
	typ    string            // string, number, integer, boolean, array
	values map[string]any    // option label → the value to send
	labels map[string]string // for multi-select: label → value
}

// maxAsks bounds the permissions and questions waiting at once, over all
// sessions; past it the agent's request is answered cancelled.
const maxAsks = 1024

// askPermission turns session/request_permission into an OpenCode
// permission request (permission.asked, and permission.updated for
// clients of the older API). It runs on the connection's reader.
func (s *session) askPermission(c *agentConn, rpcID json.RawMessage, params json.RawMessage) {
	var p struct {
		ToolCall struct {
			ToolCallID string          `json:"toolCallId"`
			Title      *string         `json:"title"`
			Kind       string          `json:"kind"`
			RawInput   json.RawMessage `json:"rawInput"`
			Locations  []struct {
				Path string `json:"path"`
			} `json:"locations"`
		} `json:"toolCall"`
		Options []permOption `json:"options"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.Options) > 64 {
		c.respond(s.a.ctx, rpcID, nil, &rpcError{Code: -32602, Message: "invalid params"})
		return
	}
	a := s.a
	s.mu.Lock()
	t := s.turn
	if t == nil || t.ended || t.asst == nil || t.cancelled {
		s.mu.Unlock()
		c.respond(a.ctx, rpcID, map[string]any{"outcome": map[string]string{"outcome": "cancelled"}}, nil)
		return
	}
	// The tool call the permission is for: the part it already has, or a
	// pending one made from what the request says of it.
	tc := p.ToolCall
	var ref *toolRef
	if tc.ToolCallID != "" {
		u := sessionUpdate{Kind: "tool_call", ToolCallID: tc.ToolCallID, Title: tc.Title, ToolKind: tc.Kind, RawInput: tc.RawInput}
		if t.tools[tc.ToolCallID] == nil {
			u.Status = "pending"
			s.tool(t, &u)
		}
		ref = &toolRef{MessageID: t.asst.ID, CallID: tc.ToolCallID}
	}
	title := "permission"
	if tc.Title != nil && *tc.Title != "" {
		title = truncate(*tc.Title, 1024)
	}
	patterns := []string{}
	for _, l := range tc.Locations {
		if len(patterns) < 64 {
			patterns = append(patterns, truncate(l.Path, 4096))
		}
	}
	if len(patterns) == 0 {
		patterns = append(patterns, title)
	}
	md := map[string]any{"title": title}
	if tc.Kind != "" {
		md["kind"] = tc.Kind
	}
	if isObject(tc.RawInput) && len(tc.RawInput) <= 64<<10 {
		md["input"] = json.RawMessage(tc.RawInput)
	}
	mdb, _ := json.Marshal(md)
	req := &permissionRequest{
		ID: a.ids.permission(), SessionID: s.id, Permission: permissionName(tc.Kind),
		Patterns: patterns, Metadata: mdb, Always: patterns, Tool: ref,
	}
	k := &ask{id: req.ID, kind: "permission", s: s, conn: c, rpcID: append(json.RawMessage(nil), rpcID...), created: a.now(), perm: req, options: p.Options}
	if !a.addAsk(k) {
		s.mu.Unlock()
		c.respond(a.ctx, rpcID, map[string]any{"outcome": map[string]string{"outcome": "cancelled"}}, nil)
		return
	}
	s.publish("permission.asked", req)
	legacy := map[string]any{
		"id": req.ID, "type": req.Permission, "pattern": req.Patterns, "sessionID": s.id,
		"title": title, "metadata": json.RawMessage(mdb), "time": map[string]int64{"created": k.created},
	}
	if ref != nil {
		legacy["messageID"], legacy["callID"] = ref.MessageID, ref.CallID
	} else {
		legacy["messageID"] = t.asst.ID
	}
	t.lastSeq = s.publish("permission.updated", legacy)
	s.mu.Unlock()
}

// permissionName is OpenCode's permission for an ACP tool kind.
func permissionName(kind string) string {
	switch kind {
	case "edit", "delete", "move":
		return "edit"
	case "execute":
		return "bash"
	case "read":
		return "read"
	case "fetch":
		return "webfetch"
	case "search":
		return "grep"
	case "":
		return "tool"
	}
	return truncate(kind, 64)
}

// askQuestion turns a form elicitation into an OpenCode question: one
// question per property of the requested schema, in the schema's order;
// enums and oneOf become options, booleans Yes/No, arrays multiple
// choice, free text a custom answer.
func (s *session) askQuestion(c *agentConn, rpcID json.RawMessage, params json.RawMessage) {
	var p struct {
		Mode       string          `json:"mode"`
		Message    string          `json:"message"`
		ToolCallID string          `json:"toolCallId"`
		Schema     json.RawMessage `json:"requestedSchema"`
	}
	a := s.a
	if json.Unmarshal(params, &p) != nil {
		c.respond(a.ctx, rpcID, nil, &rpcError{Code: -32602, Message: "invalid params"})
		return
	}
	if p.Mode != "" && p.Mode != "form" {
		c.respond(a.ctx, rpcID, map[string]string{"action": "decline"}, nil)
		return
	}
	questions, fields, ok := formQuestions(truncate(p.Message, 4096), p.Schema)
	if !ok {
		c.respond(a.ctx, rpcID, nil, &rpcError{Code: -32602, Message: "requestedSchema: expected an object schema of at most 32 primitive properties"})
		return
	}
	s.mu.Lock()
	t := s.turn
	if t == nil || t.ended || t.asst == nil || t.cancelled {
		s.mu.Unlock()
		c.respond(a.ctx, rpcID, map[string]string{"action": "cancel"}, nil)
		return
	}
	req := &questionRequest{ID: a.ids.question(), SessionID: s.id, Questions: questions}
	if p.ToolCallID != "" {
		req.Tool = &toolRef{MessageID: t.asst.ID, CallID: truncate(p.ToolCallID, 256)}
	}
	k := &ask{id: req.ID, kind: "question", s: s, conn: c, rpcID: append(json.RawMessage(nil), rpcID...), created: a.now(), question: req, fields: fields}
	if !a.addAsk(k) {
		s.mu.Unlock()
		c.respond(a.ctx, rpcID, map[string]string{"action": "cancel"}, nil)
		return
	}
	t.lastSeq = s.publish("question.asked", req)
	s.mu.Unlock()
}

// formQuestions reads an elicitation schema's properties, keeping their
// order (a Go map would lose it).
func formQuestions(message string, schema json.RawMessage) ([]questionInfo, []formField, bool) {
	var sc struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if len(schema) > 0 && json.Unmarshal(schema, &sc) != nil {
		return nil, nil, false
	}
	names, props, ok := orderedObject(sc.Properties)
	if !ok || len(names) > 32 {
		return nil, nil, false
	}
	if len(names) == 0 {
		custom := true
		return []questionInfo{{Question: firstNonEmpty(message, "Continue?"), Header: truncate(firstNonEmpty(message, "Question"), 30), Options: []questionOption{}, Custom: &custom}}, []formField{{}}, true
	}
	var qs []questionInfo
	var fs []formField
	for i, name := range names {
		var prop struct {
			Type        string   `json:"type"`
			Title       string   `json:"title"`
			Description string   `json:"description"`
			Enum        []string `json:"enum"`
			EnumNames   []string `json:"enumNames"`
			OneOf       []struct {
				Const string `json:"const"`
				Title string `json:"title"`
			} `json:"oneOf"`
			Items struct {
				Enum  []string `json:"enum"`
				AnyOf []struct {
					Const string `json:"const"`
					Title string `json:"title"`
				} `json:"anyOf"`
			} `json:"items"`
		}
		if json.Unmarshal(props[i], &prop) != nil {
			return nil, nil, false
		}
		q := questionInfo{Header: truncate(firstNonEmpty(prop.Title, name), 30), Options: []questionOption{}}
		q.Question = firstNonEmpty(prop.Description, prop.Title, name)
		if len(names) == 1 && message != "" {
			q.Question = message
			if prop.Description != "" && prop.Description != message {
				q.Question += "\n" + prop.Description
			}
		}
		f := formField{name: name, typ: prop.Type, values: map[string]any{}}
		add := func(label string, value any) {
			if len(q.Options) < 64 {
				label = truncate(label, 256)
				q.Options = append(q.Options, questionOption{Label: label, Description: ""})
				f.values[label] = value
			}
		}
		switch {
		case prop.Type == "boolean":
			add("Yes", true)
			add("No", false)
		case len(prop.OneOf) > 0:
			for _, o := range prop.OneOf {
				add(firstNonEmpty(o.Title, o.Const), o.Const)
			}
		case len(prop.Enum) > 0:
			for j, v := range prop.Enum {
				label := v
				if j < len(prop.EnumNames) && prop.EnumNames[j] != "" {
					label = prop.EnumNames[j]
				}
				add(label, v)
			}
		case prop.Type == "array":
			q.Multiple = true
			for _, v := range prop.Items.Enum {
				add(v, v)
			}
			for _, o := range prop.Items.AnyOf {
				add(firstNonEmpty(o.Title, o.Const), o.Const)
			}
		}
		custom := len(q.Options) == 0
		q.Custom = &custom
		qs = append(qs, q)
		fs = append(fs, f)
	}
	return qs, fs, true
}

// orderedObject returns a JSON object's keys and values in their order.
func orderedObject(raw json.RawMessage) ([]string, []json.RawMessage, bool) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil, true
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, false
	}
	var names []string
	var vals []json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, false
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, false
		}
		names = append(names, name)
		vals = append(vals, v)
	}
	return names, vals, true
}

// content is the elicitation answer for OpenCode answers: per question,
// the labels chosen or typed.
func (k *ask) content(answers [][]string) map[string]any {
	out := map[string]any{}
	for i, f := range k.fields {
		if f.name == "" || i >= len(answers) || len(answers[i]) == 0 {
			continue
		}
		ans := answers[i]
		switch f.typ {
		case "array":
			vals := []any{}
			for _, l := range ans {
				if v, ok := f.values[l]; ok {
					vals = append(vals, v)
				} else {
					vals = append(vals, l)
				}
			}
			out[f.name] = vals
		case "boolean":
			if v, ok := f.values[ans[0]]; ok {
				out[f.name] = v
			} else {
				out[f.name] = strings.EqualFold(ans[0], "true") || strings.EqualFold(ans[0], "yes")
			}
		case "number", "integer":
			if n, err := strconv.ParseFloat(strings.TrimSpace(ans[0]), 64); err == nil {
				out[f.name] = n
			} else {
				out[f.name] = ans[0]
			}
		default:
			if v, ok := f.values[ans[0]]; ok {
				out[f.name] = v
			} else {
				out[f.name] = ans[0]
			}
		}
	}
	return out
}

func (a *Adapter) addAsk(k *ask) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.asks) >= maxAsks {
		return false
	}
	a.asks[k.id] = k
	return true
}

// takeAsk removes a pending ask of kind by id.
func (a *Adapter) takeAsk(id, kind string) *ask {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := a.asks[id]
	if k == nil || k.kind != kind {
		return nil
	}
	delete(a.asks, id)
	return k
}

// pendingAsks lists the asks of kind, oldest first.
func (a *Adapter) pendingAsks(kind string) []*ask {
	a.mu.Lock()
	out := make([]*ask, 0, len(a.asks))
	for _, k := range a.asks {
		if k.kind == kind {
			out = append(out, k)
		}
	}
	a.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// replyPermission answers a permission: once, always or reject, mapped
// to the agent's option of that kind.
func (a *Adapter) replyPermission(k *ask, reply string) {
	want := map[string][]string{
		"once":   {"allow_once", "allow_always"},
		"always": {"allow_always", "allow_once"},
		"reject": {"reject_once", "reject_always"},
	}[reply]
	outcome := map[string]string{"outcome": "cancelled"}
	for _, kind := range want {
		for _, o := range k.options {
			if o.Kind == kind {
				outcome = map[string]string{"outcome": "selected", "optionId": o.OptionID}
				break
			}
		}
		if outcome["outcome"] == "selected" {
			break
		}
	}
	// Published before the agent hears it, so the event comes before
	// anything the agent does next.
	k.s.publish("permission.replied", map[string]any{
		"sessionID": k.s.id, "requestID": k.id, "reply": reply, "permissionID": k.id, "response": reply,
	})
	k.conn.respond(a.ctx, k.rpcID, map[string]any{"outcome": outcome}, nil)
}

// replyQuestion answers a question with the labels chosen per question.
func (a *Adapter) replyQuestion(k *ask, answers [][]string) {
	content := k.content(answers)
	if answers == nil {
		answers = [][]string{}
	}
	k.s.publish("question.replied", map[string]any{"sessionID": k.s.id, "requestID": k.id, "answers": answers})
	k.conn.respond(a.ctx, k.rpcID, map[string]any{"action": "accept", "content": content}, nil)
}

// rejectQuestion declines a question.
func (a *Adapter) rejectQuestion(k *ask) {
	k.s.publish("question.rejected", map[string]any{"sessionID": k.s.id, "requestID": k.id})
	k.conn.respond(a.ctx, k.rpcID, map[string]string{"action": "decline"}, nil)
}

// cancelAsks answers every pending ask of s as cancelled (the turn ended
// or was aborted). The answers are written in the background: this runs
// with s.mu held, and a write to the agent may wait.
func (a *Adapter) cancelAsks(s *session, _ string) {
	a.mu.Lock()
	var mine []*ask
	for id, k := range a.asks {
		if k.s == s {
			mine = append(mine, k)
			delete(a.asks, id)
		}
	}
	a.mu.Unlock()
	if len(mine) == 0 {
		return
	}
	for _, k := range mine {
		if k.kind == "permission" {
			s.publish("permission.replied", map[string]any{"sessionID": s.id, "requestID": k.id, "reply": "reject", "permissionID": k.id, "response": "reject"})
		} else {
			s.publish("question.rejected", map[string]any{"sessionID": s.id, "requestID": k.id})
		}
	}
	a.spawn(func() {
		for _, k := range mine {
			if k.kind == "permission" {
				k.conn.respond(a.ctx, k.rpcID, map[string]any{"outcome": map[string]string{"outcome": "cancelled"}}, nil)
			} else {
				k.conn.respond(a.ctx, k.rpcID, map[string]string{"action": "cancel"}, nil)
			}
		}
	})
}
