package opencode

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// routes maps OpenCode's API. Every route OpenCode's clients call has an
// answer: the functional ones drive ACP, the rest answer what a client
// needs to start (an empty list, an empty object) or say plainly that
// the operation is not supported (docs/opencode.md has the table).
func (a *Adapter) routes() *http.ServeMux {
	m := http.NewServeMux()
	h := func(pattern string, f func(w http.ResponseWriter, r *http.Request) error) {
		m.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if err := f(w, r); err != nil {
				a.writeError(w, r, err)
			}
		})
	}
	// Events.
	h("GET /event", func(w http.ResponseWriter, r *http.Request) error { return a.serveEvents(w, r, false) })
	h("GET /global/event", func(w http.ResponseWriter, r *http.Request) error { return a.serveEvents(w, r, true) })

	// Sessions.
	h("GET /session", a.listSessions)
	h("POST /session", a.createSessionHandler)
	h("GET /session/status", a.sessionStatus)
	h("GET /session/{id}", a.getSession)
	h("PATCH /session/{id}", a.patchSession)
	h("DELETE /session/{id}", a.deleteSession)
	h("GET /session/{id}/children", a.withSession(func(w http.ResponseWriter, r *http.Request, s *session) error {
		writeRaw(w, []byte("[]"))
		return nil
	}))
	h("GET /session/{id}/todo", a.withSession(a.getTodos))
	h("GET /session/{id}/diff", a.withSession(func(w http.ResponseWriter, r *http.Request, s *session) error {
		writeRaw(w, []byte("[]"))
		return nil
	}))
	h("GET /session/{id}/message", a.withSession(a.listMessages))
	h("GET /session/{id}/message/{messageID}", a.withSession(a.getMessage))
	h("POST /session/{id}/message", a.withSession(a.promptSync))
	h("POST /session/{id}/prompt_async", a.withSession(a.promptAsync))
	h("POST /session/{id}/command", a.withSession(a.command))
	h("POST /session/{id}/abort", a.withSession(func(w http.ResponseWriter, r *http.Request, s *session) error {
		s.abort()
		writeRaw(w, []byte("true"))
		return nil
	}))
	h("POST /session/{id}/permissions/{permissionID}", a.withSession(a.legacyPermissionReply))
	for _, op := range []string{"shell", "fork", "revert", "unrevert", "share", "summarize", "init"} {
		h("POST /session/{id}/"+op, a.withSession(func(w http.ResponseWriter, r *http.Request, s *session) error {
			return errUnsupported("POST /session/{id}/" + op)
		}))
	}
	h("DELETE /session/{id}/share", a.withSession(func(w http.ResponseWriter, r *http.Request, s *session) error {
		return errUnsupported("sharing")
	}))

	// Permissions and questions.
	h("GET /permission", a.listPermissions)
	h("POST /permission/{requestID}/reply", a.permissionReply)
	h("GET /question", a.listQuestions)
	h("POST /question/{requestID}/reply", a.questionReply)
	h("POST /question/{requestID}/reject", a.questionReject)

	// Providers, agents, config and the rest of what clients read at start.
	h("GET /provider", a.providers)
	h("GET /config/providers", a.configProviders)
	a.compatRoutes(h)

	h("/", func(w http.ResponseWriter, r *http.Request) error {
		return errNotFound("no such OpenCode endpoint: " + r.Method + " " + r.URL.Path)
	})
	return m
}

// withSession resolves {id} to a session (404 if there is none).
func (a *Adapter) withSession(f func(http.ResponseWriter, *http.Request, *session) error) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		s, err := a.sessionFor(r.Context(), r.PathValue("id"))
		if err != nil {
			return err
		}
		defer a.unpin(s)
		return f(w, r, s)
	}
}

func (a *Adapter) listSessions(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	dir, err := directoryOf(r)
	if err != nil {
		return err
	}
	sq := sessionQuery{Directory: dir, Search: truncate(q.Get("search"), 256)}
	if v := q.Get("start"); v != "" {
		if sq.Start, err = strconv.ParseInt(v, 10, 64); err != nil {
			return errBadRequest("start must be a time in milliseconds")
		}
	}
	if v := q.Get("limit"); v != "" {
		if sq.Limit, err = strconv.Atoi(v); err != nil || sq.Limit < 0 {
			return errBadRequest("limit must be a non-negative integer")
		}
	}
	take, release := a.listBudget()
	defer release()
	sq.Take = take
	rows, err := a.store.listSessions(r.Context(), sq)
	if err != nil {
		return a.listError(err)
	}
	writeRaw(w, joinJSON(rows))
	return nil
}

func (a *Adapter) createSessionHandler(w http.ResponseWriter, r *http.Request) error {
	var in createInput
	release, err := a.readJSON(r, &in)
	defer release()
	if err != nil {
		return err
	}
	dir, err := a.sessionDirectory(r)
	if err != nil {
		return err
	}
	if len(in.Title) > 1024 || len(in.Permission) > 64<<10 || len(in.ParentID) > maxClientID {
		return errBadRequest("title, parentID or permission is too long")
	}
	s, err := a.createSession(r.Context(), dir, in)
	if err != nil {
		return err
	}
	info := s.snapshot()
	writeJSON(w, http.StatusOK, &info)
	return nil
}

func (a *Adapter) getSession(w http.ResponseWriter, r *http.Request) error {
	s, err := a.sessionFor(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	defer a.unpin(s)
	info := s.snapshot()
	writeJSON(w, http.StatusOK, &info)
	return nil
}

func (a *Adapter) patchSession(w http.ResponseWriter, r *http.Request) error {
	s, err := a.sessionFor(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	defer a.unpin(s)
	var in struct {
		Title *string `json:"title"`
		Time  *struct {
			Archived *int64 `json:"archived"`
		} `json:"time"`
	}
	release, err := a.readJSON(r, &in)
	defer release()
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.gone { // deleted while the body was read
		s.mu.Unlock()
		return errNotFound("Session not found: " + s.id)
	}
	if in.Title != nil {
		s.info.Title = truncate(*in.Title, 1024)
	}
	if in.Time != nil && in.Time.Archived != nil {
		s.info.Time.Archived = *in.Time.Archived
	}
	s.touched()
	info := s.info
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, &info)
	return nil
}

func (a *Adapter) deleteSession(w http.ResponseWriter, r *http.Request) error {
	s, err := a.sessionFor(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	defer a.unpin(s)
	a.mu.Lock()
	delete(a.sessions, s.id)
	a.mu.Unlock()
	s.detach()
	// Not the request's context: once the session is gone from memory,
	// its row must go too, even if the client has left.
	if err := a.store.deleteSession(dbctx, s.id); err != nil {
		return err
	}
	info := s.snapshot()
	s.publish("session.deleted", map[string]any{"info": &info, "sessionID": s.id})
	writeRaw(w, []byte("true"))
	return nil
}

// sessionStatus lists the sessions that are not idle, as native OpenCode
// does ({} when all are).
func (a *Adapter) sessionStatus(w http.ResponseWriter, r *http.Request) error {
	a.mu.Lock()
	all := make([]*session, 0, len(a.sessions))
	for _, s := range a.sessions {
		all = append(all, s)
	}
	a.mu.Unlock()
	out := map[string]map[string]string{}
	for _, s := range all {
		if s.busy() {
			out[s.id] = map[string]string{"type": "busy"}
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *Adapter) getTodos(w http.ResponseWriter, r *http.Request, s *session) error {
	b, err := a.store.todos(r.Context(), s.id)
	if err != nil {
		return err
	}
	if b == nil {
		b = []byte("[]")
	}
	writeRaw(w, b)
	return nil
}

func (a *Adapter) listMessages(w http.ResponseWriter, r *http.Request, s *session) error {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return errBadRequest("limit must be a non-negative integer")
		}
		limit = n
	}
	take, release := a.listBudget()
	defer release()
	msgs, err := a.store.messages(r.Context(), s.id, limit, take)
	if err != nil {
		return a.listError(err)
	}
	var b []byte
	b = append(b, '[')
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendMessage(b, m)
	}
	b = append(b, ']')
	writeRaw(w, b)
	return nil
}

func (a *Adapter) getMessage(w http.ResponseWriter, r *http.Request, s *session) error {
	m, ok, err := a.store.message(r.Context(), s.id, r.PathValue("messageID"))
	if err != nil {
		return err
	}
	if !ok {
		return errNotFound("Message not found: " + r.PathValue("messageID"))
	}
	writeRaw(w, appendMessage(nil, m))
	return nil
}

// listBudget charges a listing's rows to the in-flight budget (the one
// request bodies share), twice over: the rows, then the answer made of
// them. release gives it all back.
func (a *Adapter) listBudget() (take func(int) bool, release func()) {
	var held int64
	take = func(n int) bool {
		if !a.inflight.Take(2 * int64(n)) {
			return false
		}
		held += 2 * int64(n)
		return true
	}
	return take, func() { a.inflight.Give(held); held = 0 }
}

func (a *Adapter) listError(err error) error {
	if errors.Is(err, errListTooLarge) {
		return errUnavailable("the listing is larger than the memory the daemon has free for it now; ask for fewer (limit) or retry later")
	}
	return err
}

// appendMessage writes {"info":…,"parts":[…]} from stored JSON.
func appendMessage(b []byte, m storedMessage) []byte {
	b = append(b, `{"info":`...)
	b = append(b, m.Info...)
	b = append(b, `,"parts":`...)
	b = append(b, joinJSON(m.Parts)...)
	return append(b, '}')
}

func joinJSON(items [][]byte) []byte {
	n := 2
	for _, it := range items {
		n += len(it) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}

// promptSync is POST /session/{id}/message: the prompt's turn, answered
// with the assistant message once the turn has ended and every event
// stream open now has been sent the turn's events (OpenCode's CLI exits
// as soon as this answer comes, so its event loop must have had them).
func (a *Adapter) promptSync(w http.ResponseWriter, r *http.Request, s *session) error {
	var in promptInput
	release, err := a.readJSON(r, &in)
	defer release()
	if err != nil {
		return err
	}
	if err := in.validate(); err != nil {
		return err
	}
	in.mayStart = mayStart(r.Context())
	t, err := a.startTurn(r.Context(), s, &in)
	if err != nil {
		return err
	}
	release()
	select {
	case <-t.done:
	case <-r.Context().Done():
		return nil // the turn goes on; the client left
	}
	return a.answerTurn(w, r, s, t)
}

// answerTurn answers a synchronous prompt or command whose turn has
// ended: its assistant message (the user message of a noReply prompt) as
// stored, once the event streams have it (settle). A session deleted (or
// evicted) while the turn ran has no messages left: 404.
func (a *Adapter) answerTurn(w http.ResponseWriter, r *http.Request, s *session, t *turn) error {
	a.settle(r.Context(), t)
	msg := t.asst
	if msg == nil {
		msg = t.user
	}
	s.mu.Lock()
	gone, lost := s.gone, t.lost
	s.mu.Unlock()
	if !gone {
		m, ok, err := a.store.message(r.Context(), s.id, msg.ID)
		if err != nil {
			return err
		}
		if !ok && lost != nil && msg == t.asst {
			// The database refused the turn's writes (a full disk): the
			// answer is the message as it ran, its error saying so.
			m, ok = s.asstInMemory(t)
		}
		if ok {
			writeRaw(w, appendMessage(nil, m))
			return nil
		}
	}
	return errNotFound("Session not found: " + s.id + " (deleted while the prompt ran)")
}

// asstInMemory is a turn's assistant message as the session holds it,
// for an answer the store could not keep.
func (s *session) asstInMemory(t *turn) (storedMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info, err := t.asst.MarshalJSON()
	if err != nil {
		return storedMessage{}, false
	}
	m := storedMessage{ID: t.asst.ID, Info: info}
	for _, p := range t.parts {
		if b, err := p.MarshalJSON(); err == nil {
			m.Parts = append(m.Parts, b)
		}
	}
	return m, true
}

// settle waits, before a synchronous prompt is answered, until every
// event stream open now has been sent the turn's events (the flush
// barrier), then AnswerDelay more: OpenCode's CLI ("opencode run") exits
// as soon as it has this answer, and drops what it has not yet printed
// from its event stream, which it reads on another connection.
func (a *Adapter) settle(ctx context.Context, t *turn) {
	a.bus.WaitFlushed(ctx, t.lastSeq, time.Second)
	if a.cfg.AnswerDelay <= 0 {
		return
	}
	timer := time.NewTimer(a.cfg.AnswerDelay)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}

// promptAsync is POST /session/{id}/prompt_async: 204 at once; the turn
// runs (after the session's current one) and is seen on the event
// stream. The prompt's bytes stay charged to the in-flight budget until
// its turn has started.
func (a *Adapter) promptAsync(w http.ResponseWriter, r *http.Request, s *session) error {
	in := &promptInput{}
	release, err := a.readJSON(r, in)
	if err != nil {
		release()
		return err
	}
	if err := in.validate(); err != nil {
		release()
		return err
	}
	in.mayStart = mayStart(r.Context())
	if err := s.reserve(); err != nil {
		release()
		return err
	}
	if !a.spawn(func() {
		defer release()
		if _, err := a.startReserved(a.ctx, s, in); err != nil {
			s.publish("session.error", map[string]any{"sessionID": s.id, "error": &messageError{Name: "UnknownError", Data: messageErrorData{Message: errMessage(err)}}})
		}
	}) {
		s.unreserve()
		release()
		return errShuttingDown
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// command is POST /session/{id}/command: an ACP agent takes its slash
// commands as prompt text, "/name arguments".
func (a *Adapter) command(w http.ResponseWriter, r *http.Request, s *session) error {
	var in struct {
		MessageID string      `json:"messageID"`
		Agent     string      `json:"agent"`
		Model     string      `json:"model"`
		Command   string      `json:"command"`
		Arguments string      `json:"arguments"`
		Parts     []inputPart `json:"parts"`
	}
	release, err := a.readJSON(r, &in)
	defer release()
	if err != nil {
		return err
	}
	if in.Command == "" || strings.ContainsAny(in.Command, " \n") {
		return errBadRequest("command must be a command name")
	}
	p := &promptInput{MessageID: in.MessageID, Agent: in.Agent,
		Parts: append([]inputPart{{Type: "text", Text: strings.TrimSpace("/" + in.Command + " " + in.Arguments)}}, in.Parts...)}
	if prov, model, ok := strings.Cut(in.Model, "/"); ok {
		p.Model = &modelRef{ProviderID: prov, ModelID: model}
	}
	if err := p.validate(); err != nil {
		return err
	}
	p.mayStart = mayStart(r.Context())
	t, err := a.startTurn(r.Context(), s, p)
	if err != nil {
		return err
	}
	release()
	select {
	case <-t.done:
	case <-r.Context().Done():
		return nil
	}
	return a.answerTurn(w, r, s, t)
}

func (a *Adapter) listPermissions(w http.ResponseWriter, r *http.Request) error {
	out := []*permissionRequest{}
	for _, k := range a.pendingAsks("permission") {
		out = append(out, k.perm)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *Adapter) permissionReply(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Reply   string `json:"reply"`
		Message string `json:"message"`
	}
	release, err := a.readJSON(r, &in)
	defer release()
	if err != nil {
		return err
	}
	return a.answerPermission(w, r.PathValue("requestID"), "", in.Reply)
}

// legacyPermissionReply is the older API's POST
// /session/{id}/permissions/{permissionID} {response}.
func (a *Adapter) legacyPermissionReply(w http.ResponseWriter, r *http.Request, s *session) error {
	var in struct {
		Response string `json:"response"`
	}
	release, err := a.readJSON(r, &in)
	defer release()
	if err != nil {
		return err
	}
	return a.answerPermission(w, r.PathValue("permissionID"), s.id, in.Response)
}

func (a *Adapter) answerPermission(w http.ResponseWriter, id, sessionID, reply string) error {
	switch reply {
	case "once", "always", "reject":
	default:
		return errBadRequest("reply must be once, always or reject")
	}
	a.mu.Lock()
	k := a.asks[id]
	if k != nil && k.kind == "permission" && (sessionID == "" || k.s.id == sessionID) {
		delete(a.asks, id)
	} else {
		k = nil
	}
	a.mu.Unlock()
	if k == nil {
		return errNotFound("Permission request not found: " + id)
	}
	a.replyPermission(k, reply)
	writeRaw(w, []byte("true"))
	return nil
}

func (a *Adapter) listQuestions(w http.ResponseWriter, r *http.Request) error {
	out := []*questionRequest{}
	for _, k := range a.pendingAsks("question") {
		out = append(out, k.question)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *Adapter) questionReply(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Answers [][]string `json:"answers"`
	}
	release, err := a.readJSON(r, &in)
	defer release()
	if err != nil {
		return err
	}
	k := a.takeAsk(r.PathValue("requestID"), "question")
	if k == nil {
		return errNotFound("Question request not found: " + r.PathValue("requestID"))
	}
	a.replyQuestion(k, in.Answers)
	writeRaw(w, []byte("true"))
	return nil
}

func (a *Adapter) questionReject(w http.ResponseWriter, r *http.Request) error {
	k := a.takeAsk(r.PathValue("requestID"), "question")
	if k == nil {
		return errNotFound("Question request not found: " + r.PathValue("requestID"))
	}
	a.rejectQuestion(k)
	writeRaw(w, []byte("true"))
	return nil
}

// publish sends an event about the session, tagged with its directory
// (for /global/event and /event's directory filter).
func (s *session) publish(typ string, props any) uint64 {
	return s.a.publishIn(s.info.Directory, typ, props)
}
