package opencode

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// turn is one prompt and its answer: the user message, the assistant
// message the agent's updates fill, and how it ended.
type turn struct {
	user  *messageInfo
	asst  *messageInfo
	parts []*part          // the assistant's parts, in order
	open  *part            // the text or reasoning part being streamed
	saved map[*part]int    // bytes of text last written to the store
	tools map[string]*part // by ACP toolCallId

	conn      *agentConn // set once the prompt is sent
	acpID     string
	cancelled bool
	ended     bool
	lastSeq   uint64        // the last event published for the turn
	lost      error         // the first write of the turn the database refused (persist)
	done      chan struct{} // closed when the turn has ended
	watchdog  *time.Timer   // ends an aborted turn the agent does not end
}

// promptInput is the body of POST /session/{id}/message and prompt_async.
type promptInput struct {
	MessageID string      `json:"messageID"`
	Model     *modelRef   `json:"model"`
	Agent     string      `json:"agent"`
	NoReply   bool        `json:"noReply"`
	Parts     []inputPart `json:"parts"`

	defaultModel string // the agent's default model, when the prompt names none
	mayStart     bool   // the request may start the agent (StartAllowed)
}

type inputPart struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Text      string `json:"text"`
	Synthetic bool   `json:"synthetic"`
	Mime      string `json:"mime"`
	Filename  string `json:"filename"`
	URL       string `json:"url"`
	// agent and subtask parts carry a name / prompt
	Name   string `json:"name"`
	Prompt string `json:"prompt"`
}

// maxInputParts bounds the parts of one prompt.
const maxInputParts = 256

// maxNameBytes bounds the names a prompt gives (its agent, its model's
// id): each is copied into both messages of the turn, written and
// published more than once.
const maxNameBytes = 256

func (in *promptInput) validate() error {
	if len(in.Parts) == 0 {
		return errBadRequest("parts: a prompt needs at least one part")
	}
	if len(in.Parts) > maxInputParts {
		return errBadRequest("parts: at most 256 parts per prompt")
	}
	if len(in.Agent) > maxNameBytes || in.Model != nil && len(in.Model.ModelID) > maxNameBytes {
		return errBadRequest("agent and model.modelID must be names of at most %d bytes", maxNameBytes)
	}
	if in.MessageID != "" && !validClientID(in.MessageID, "msg") {
		return errBadRequest("messageID must be msg_ followed by up to 60 letters, digits, '_' or '-'")
	}
	seen := map[string]bool{}
	for i, p := range in.Parts {
		switch p.Type {
		case "text", "file", "agent", "subtask":
		default:
			return errBadRequest("parts[%d].type must be text, file, agent or subtask", i)
		}
		if p.ID != "" && (!validClientID(p.ID, "prt") || seen[p.ID]) {
			return errBadRequest("parts[%d].id must be a unique prt_ id of up to 64 letters, digits, '_' or '-'", i)
		}
		seen[p.ID] = true
		if p.Type == "file" && p.URL == "" {
			return errBadRequest("parts[%d]: a file part needs a url", i)
		}
	}
	if in.Model != nil && in.Model.ProviderID != "" && !domain.ValidAgentID(in.Model.ProviderID) {
		return errBadRequest("model.providerID must name an agent (letters, digits, '.', '_' or '-')")
	}
	return nil
}

// errBusy answers a prompt while maxQueued others wait.
var errBusy = errTooMany("this session already has 8 prompts waiting; wait for its turns to end")

// startTurn waits for the session's turn slot, records the prompt (the
// user message, and the assistant message the answer goes into) and runs
// the turn in the background. The returned turn's done closes when it
// ends, whatever happens to ctx.
func (a *Adapter) startTurn(ctx context.Context, s *session, in *promptInput) (*turn, error) {
	if err := s.reserve(); err != nil {
		return nil, err
	}
	return a.startReserved(ctx, s, in)
}

// reserve takes a place in the session's queue (errBusy when maxQueued
// prompts wait): prompt_async takes it before answering 204, so every
// prompt it accepts runs. startReserved gives it back.
// It also takes one of the adapter's MaxTurns places, which the prompt
// holds until its turn ends (finishLocked) or it will not run.
func (s *session) reserve() error {
	a := s.a
	if n := a.turns.Add(1); n > int64(a.cfg.MaxTurns) {
		a.turns.Add(-1)
		return errTooMany(fmt.Sprintf("%d prompts are running or waiting over all sessions; wait for turns to end", a.cfg.MaxTurns))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiting >= maxQueued {
		a.turns.Add(-1)
		return errBusy
	}
	s.waiting++
	return nil
}

// unreserve gives back a place reserve took, for a prompt that will not
// run.
func (s *session) unreserve() {
	s.mu.Lock()
	s.waiting--
	s.mu.Unlock()
	s.a.turns.Add(-1)
}

// startReserved is startTurn for a prompt that has its place in the queue
// (reserve).
func (a *Adapter) startReserved(ctx context.Context, s *session, in *promptInput) (*turn, error) {
	if in.Model == nil || in.Model.ModelID == "" {
		// The model the agent starts with, to name it on the messages.
		s.mu.Lock()
		agent := s.agent
		s.mu.Unlock()
		if in.Model != nil && in.Model.ProviderID != "" {
			agent = in.Model.ProviderID
		}
		in.defaultModel = a.defaultModel(ctx, agent)
	}
	select {
	case s.slot <- struct{}{}:
	case <-ctx.Done():
		s.unreserve()
		return nil, ctx.Err()
	}
	s.mu.Lock()
	s.waiting--
	t, err := s.beginLocked(ctx, in)
	s.mu.Unlock()
	if err != nil {
		<-s.slot
		a.turns.Add(-1)
		return nil, err
	}
	if !a.spawn(func() { s.run(t, in) }) {
		s.finish(t, "", errShuttingDown)
	}
	return t, nil
}

// beginLocked records the user message and opens the assistant message.
// Called with s.mu and the turn slot held.
func (s *session) beginLocked(ctx context.Context, in *promptInput) (*turn, error) {
	a := s.a
	if s.gone {
		return nil, errNotFound("Session not found: " + s.id)
	}
	if p := in.Model; p != nil && p.ProviderID != "" && p.ProviderID != s.agent {
		if s.acpID != "" || s.conn != nil {
			return nil, errBadRequest("session %s runs agent %q; a prompt cannot switch it to %q (start a new session for it)", s.id, s.agent, p.ProviderID)
		}
		// A session no agent has run yet takes the provider of its first
		// prompt: the TUI creates sessions without one.
		s.agent = p.ProviderID
	}
	msgID := in.MessageID
	if msgID != "" {
		if dup, err := a.store.hasMessage(ctx, s.id, msgID); err != nil {
			return nil, err
		} else if dup {
			return nil, errBadRequest("message %s already exists in session %s", msgID, s.id)
		}
	} else {
		msgID = a.ids.message()
	}
	modelID := ""
	if in.Model != nil {
		modelID = in.Model.ModelID
	}
	if modelID == "" {
		modelID = firstNonEmpty(s.model, in.defaultModel, "default")
	}
	agentName := firstNonEmpty(in.Agent, "build")
	now := a.now()
	user := &messageInfo{ID: msgID, SessionID: s.id, Role: "user", Created: now, Agent: agentName,
		Model: modelRef{ProviderID: s.agent, ModelID: modelID}}
	t := &turn{user: user, saved: map[*part]int{}, tools: map[string]*part{}, done: make(chan struct{})}
	s.turn = t
	s.putMessage(user)
	var text strings.Builder
	for _, ip := range in.Parts {
		p := &part{ID: ip.ID, SessionID: s.id, MessageID: msgID}
		if p.ID == "" {
			p.ID = a.ids.part()
		}
		switch ip.Type {
		case "text":
			p.Type, p.Text, p.Synthetic = "text", ip.Text, ip.Synthetic
			if !ip.Synthetic {
				text.WriteString(ip.Text)
			}
		case "file":
			p.Type, p.Mime, p.Filename, p.URL = "file", ip.Mime, ip.Filename, ip.URL
		case "agent", "subtask":
			// What they name is in the prompt's text; OpenCode's agents
			// and subtasks have no ACP counterpart.
			continue
		}
		s.putPart(t, p, "")
	}
	if strings.HasPrefix(s.info.Title, defaultTitlePrefix) {
		if title := titleFrom(text.String()); title != "" {
			s.info.Title = title
		}
	}
	s.touched()
	t.lastSeq = s.publish("session.status", map[string]any{"sessionID": s.id, "status": map[string]string{"type": "busy"}})
	if in.NoReply {
		t.asst = nil
		return t, nil
	}
	asst := &messageInfo{ID: a.ids.message(), SessionID: s.id, Role: "assistant", Created: a.now(),
		ParentID: msgID, Model: modelRef{ProviderID: s.agent, ModelID: modelID},
		Mode: agentName, Agent: agentName, Cwd: s.info.Directory, Root: s.info.Directory}
	t.asst = asst
	s.putMessage(asst)
	s.putPart(t, &part{ID: a.ids.part(), SessionID: s.id, MessageID: asst.ID, Type: "step-start"}, "")
	return t, nil
}

// run binds the session, sends the prompt and ends the turn with the
// agent's answer.
func (s *session) run(t *turn, in *promptInput) {
	if t.asst == nil { // noReply: the message is recorded, nothing runs
		s.finish(t, "end_turn", nil)
		return
	}
	ctx := s.a.ctx
	c, acpID, err := s.bind(ctx, in.mayStart)
	if err != nil {
		s.finish(t, "", err)
		return
	}
	if in.Model != nil {
		s.chooseModel(ctx, c, acpID, in.Model.ModelID)
	}
	blocks := promptBlocks(in.Parts, c.caps)
	s.mu.Lock()
	if t.cancelled || t.ended {
		s.mu.Unlock()
		s.finish(t, "cancelled", nil)
		return
	}
	t.conn, t.acpID = c, acpID
	s.mu.Unlock()
	res, err := c.call(ctx, "session/prompt", map[string]any{"sessionId": acpID, "prompt": blocks}, 0)
	var out struct {
		StopReason string `json:"stopReason"`
	}
	if err == nil {
		_ = json.Unmarshal(res, &out)
	}
	s.finish(t, out.StopReason, err)
}

func (s *session) finish(t *turn, stop string, err error) {
	s.mu.Lock()
	s.finishLocked(t, stop, err)
	s.mu.Unlock()
}

// finishLocked ends a turn once: closes its open parts, records how it
// ended, goes idle and frees the turn slot. Called with s.mu held.
func (s *session) finishLocked(t *turn, stop string, err error) {
	if t.ended {
		return
	}
	t.ended = true
	if t.watchdog != nil {
		t.watchdog.Stop()
	}
	a := s.a
	now := a.now()
	if asst := t.asst; asst != nil {
		s.closeOpen(t)
		aborted := t.cancelled || stop == "cancelled"
		for _, p := range t.parts {
			if p.Type != "tool" || p.State.Status == "completed" || p.State.Status == "error" {
				continue
			}
			p.State.Status, p.State.End = "error", now
			if p.State.Start == 0 {
				p.State.Start = now
			}
			p.State.Error = "the turn ended before the tool finished"
			if aborted {
				p.State.Error = "Tool execution aborted"
			}
			s.putPart(t, p, "")
		}
		reason := finishReason(stop)
		if err == nil && !aborted && t.lost != nil {
			err = fmt.Errorf("the turn ran, but the sessions database could not keep all of it (listings and a restart will miss parts): %s", errMessage(storeError(t.lost)))
		}
		switch {
		case err != nil:
			asst.Error = &messageError{Name: "UnknownError", Data: messageErrorData{Message: errMessage(err)}}
		case aborted:
			asst.Error = &messageError{Name: "MessageAbortedError", Data: messageErrorData{Message: "The operation was aborted."}}
		default:
			asst.Finish = reason
		}
		if err == nil {
			s.putPart(t, &part{ID: a.ids.part(), SessionID: s.id, MessageID: asst.ID, Type: "step-finish", Reason: firstNonEmpty(reason, "stop")}, "")
		}
		asst.Completed = now
		s.putMessage(asst)
		if asst.Error != nil {
			s.publish("session.error", map[string]any{"sessionID": s.id, "error": asst.Error})
		}
	}
	if s.turn == t {
		s.turn = nil
	}
	// Given back before the idle events: a client that sees them may
	// prompt again at once.
	a.turns.Add(-1)
	s.publish("session.status", map[string]any{"sessionID": s.id, "status": map[string]string{"type": "idle"}})
	s.publish("session.idle", map[string]any{"sessionID": s.id})
	s.touched()
	t.lastSeq = a.bus.Stats().LastEventID
	a.cancelAsks(s, "cancelled")
	close(t.done)
	<-s.slot
}

// finishReason is OpenCode's finish for an ACP stop reason.
func finishReason(stop string) string {
	switch stop {
	case "", "end_turn":
		return "stop"
	case "max_tokens", "max_turn_requests":
		return "length"
	case "refusal":
		return "content-filter"
	case "cancelled":
		return ""
	}
	return "other"
}

// errMessage is what a client is told of a failed turn.
func errMessage(err error) string {
	var de *domain.Error
	if errors.As(err, &de) {
		return domainMessage(de)
	}
	return err.Error()
}

// abort cancels the running turn: session/cancel to the agent, pending
// permissions and questions answered cancelled. The agent ends the turn
// (stopReason cancelled); one that does not within Config.AbortGrace has
// it ended here. It reports whether a turn was running.
func (s *session) abort() bool {
	s.mu.Lock()
	t := s.turn
	if t == nil || t.ended {
		s.mu.Unlock()
		return false
	}
	t.cancelled = true
	c, acpID := t.conn, t.acpID
	if t.watchdog == nil {
		t.watchdog = time.AfterFunc(s.a.cfg.AbortGrace, func() { s.finish(t, "cancelled", nil) })
	}
	s.mu.Unlock()
	s.a.cancelAsks(s, "cancelled")
	if c != nil {
		if err := c.notify(s.a.ctx, "session/cancel", map[string]string{"sessionId": acpID}); err != nil {
			s.a.log.Debug("opencode: session/cancel failed", "session", s.id, "err", err)
		}
	}
	return true
}

// putMessage writes a message's info and publishes message.updated.
// Called with s.mu held.
func (s *session) putMessage(m *messageInfo) {
	b, err := m.MarshalJSON()
	if err != nil {
		return
	}
	if !s.gone { // deleted: a late write would leave rows of no session
		s.persist(s.a.store.putMessage(dbctx, s.id, m.ID, b))
	}
	seq := s.publish("message.updated", map[string]any{"info": json.RawMessage(b), "sessionID": s.id})
	if s.turn != nil {
		s.turn.lastSeq = seq
	}
}

// streamWhole is the size up to which a streamed part goes to clients
// whole with each chunk (message.part.updated with delta); past it, its
// growth goes as deltas alone (message.part.delta, as OpenCode 1.2+
// streams): resending the whole text with every chunk would cost the
// square of its length. Clients of the older API get the whole text when
// the part ends.
const streamWhole = 64 << 10

// persistEvery is how much a streamed part grows between writes to the
// store (it is written at its first chunk and when it ends too): writing
// it whole at every chunk would cost the square of its length. A listing
// taken while it streams may be up to this far behind the events.
const persistEvery = 4 << 10

// putPart writes a part to the store and publishes it:
// message.part.updated (with delta when it streams text), or
// message.part.delta past streamWhole. Called with s.mu held.
func (s *session) putPart(t *turn, p *part, delta string) {
	write := true
	if delta != "" && t != nil {
		if last, ok := t.saved[p]; ok && len(p.Text)-last < persistEvery {
			write = false
		}
	}
	whole := delta == "" || len(p.Text) <= streamWhole
	var b []byte
	if write || whole {
		var err error
		if b, err = p.MarshalJSON(); err != nil { // not json.Marshal: it would compact the result again
			return
		}
	}
	if write && !s.gone {
		s.persist(s.a.store.putPart(dbctx, s.id, p.MessageID, p.ID, b))
		if t != nil {
			t.saved[p] = len(p.Text)
		}
	}
	// The event is assembled from the part's JSON as marshalled once, not
	// encoded again (json.Marshal would re-validate it).
	var ev []byte
	if whole {
		ev = make([]byte, 0, len(b)+len(delta)+128)
		ev = append(ev, `{"type":"message.part.updated","properties":{"part":`...)
		ev = append(ev, b...)
		ev = append(ev, `,"sessionID":`...)
		ev = appendJSONString(ev, s.id)
		if delta != "" {
			ev = append(ev, `,"delta":`...)
			ev = appendJSONString(ev, delta)
		}
	} else {
		ev = make([]byte, 0, len(delta)+256)
		ev = append(ev, `{"type":"message.part.delta","properties":{"sessionID":`...)
		ev = appendJSONString(ev, s.id)
		ev = append(ev, `,"messageID":`...)
		ev = appendJSONString(ev, p.MessageID)
		ev = append(ev, `,"partID":`...)
		ev = appendJSONString(ev, p.ID)
		ev = append(ev, `,"field":"text","delta":`...)
		ev = appendJSONString(ev, delta)
	}
	ev = append(ev, "}}"...)
	seq := s.a.bus.AppendTo(ev, s.info.Directory)
	if t != nil {
		t.lastSeq = seq
	}
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}

// closeOpen ends the part being streamed (time.end set, written whole).
func (s *session) closeOpen(t *turn) {
	p := t.open
	if p == nil {
		return
	}
	t.open = nil
	p.End = s.a.now()
	s.putPart(t, p, "")
}

// promptBlocks turns OpenCode's prompt parts into ACP content blocks, as
// far as the agent's prompt capabilities allow.
func promptBlocks(parts []inputPart, caps agentCaps) []any {
	var out []any
	for _, p := range parts {
		switch p.Type {
		case "text":
			if p.Text != "" {
				out = append(out, map[string]string{"type": "text", "text": p.Text})
			}
		case "file":
			out = append(out, fileBlock(p, caps))
		}
	}
	if len(out) == 0 {
		out = append(out, map[string]string{"type": "text", "text": ""})
	}
	return out
}

// fileBlock is an attached file: an image or embedded text when the agent
// takes them and the client sent the bytes (a data: URL), else a link.
func fileBlock(p inputPart, caps agentCaps) any {
	name := firstNonEmpty(p.Filename, "attachment")
	if mime, data, ok := dataURL(p.URL); ok {
		mime = firstNonEmpty(p.Mime, mime)
		switch {
		case strings.HasPrefix(mime, "image/") && caps.Prompt.Image:
			return map[string]string{"type": "image", "mimeType": mime, "data": base64.StdEncoding.EncodeToString(data)}
		case utf8.Valid(data) && caps.Prompt.EmbeddedContext:
			return map[string]any{"type": "resource", "resource": map[string]string{"uri": "file:///" + url.PathEscape(name), "mimeType": mime, "text": string(data)}}
		case utf8.Valid(data):
			return map[string]string{"type": "text", "text": "File " + name + ":\n" + string(data)}
		}
		return map[string]string{"type": "text", "text": "[" + name + " (" + mime + ") was attached; this agent does not take such content]"}
	}
	return map[string]any{"type": "resource_link", "uri": p.URL, "name": name, "mimeType": p.Mime}
}

// dataURL decodes a data: URL.
func dataURL(u string) (mime string, data []byte, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", nil, false
	}
	meta, payload, found := strings.Cut(rest, ",")
	if !found {
		return "", nil, false
	}
	mime, isB64 := strings.CutSuffix(meta, ";base64")
	if isB64 {
		b, err := base64.StdEncoding.DecodeString(payload)
		if err != nil {
			return "", nil, false
		}
		return mime, b, true
	}
	s, err := url.PathUnescape(payload)
	if err != nil {
		return "", nil, false
	}
	return mime, []byte(s), true
}
