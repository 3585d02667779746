package opencode

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// session is the runtime of one OpenCode session: its info, which agent
// runs it and as which ACP session, and the turn running now. Its state
// is written through to the store before each event about it is
// published, so a client that saw an event and then lists finds what the
// event said.
//
// Locks: s.mu guards the fields below it; it is taken by HTTP handlers
// and by the agent connection's reader (which applies session/update). It
// is never held while waiting for the agent. slot is the turn semaphore:
// one turn at a time, the next prompts wait for it (at most maxQueued).
type session struct {
	a    *Adapter
	id   string
	slot chan struct{}

	mu       sync.Mutex
	info     sessionInfo
	agent    string
	acpID    string     // the agent's session id, kept across restarts
	conn     *agentConn // the connection acpID lives on; nil when unbound
	model    string     // model last set on the agent ("": its default)
	modelOpt string     // the agent's config option for the model, if any
	setModel bool       // the agent takes session/set_model
	loading  bool       // session/load replays history: updates ignored
	turn     *turn
	waiting  int // prompts waiting for the slot
	gone     bool
	commands []command // from available_commands_update

	// pins counts the requests holding the session (sessionFor to
	// unpin), pinned how many times it was ever pinned; both guarded by
	// Adapter.mu. trim forgets only a session no request held meanwhile.
	pins, pinned uint64
}

// maxQueued bounds the prompts of one session waiting behind its turn.
const maxQueued = 8

// command is one of an agent's slash commands.
type command struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

func newSession(a *Adapter, info sessionInfo, agent, acpID string) *session {
	return &session{a: a, id: info.ID, slot: make(chan struct{}, 1), info: info, agent: agent, acpID: acpID}
}

// sessionFor returns the runtime of session id, loading it from the store
// (a session created before a restart, or forgotten by trim) when needed,
// pinned: the caller unpins it when done.
func (a *Adapter) sessionFor(ctx context.Context, id string) (*session, error) {
	a.mu.Lock()
	s := a.sessions[id]
	if s != nil {
		s.pins++
		s.pinned++
	}
	a.mu.Unlock()
	if s != nil {
		return s, nil
	}
	row, err := a.store.session(ctx, id)
	if errors.Is(err, errNoSession) {
		return nil, errNotFound("Session not found: " + id)
	}
	if err != nil {
		return nil, err
	}
	var info sessionInfo
	if err := json.Unmarshal(row.Info, &info); err != nil {
		return nil, fmt.Errorf("stored session %s: %w", id, err)
	}
	a.mu.Lock()
	if old := a.sessions[id]; old != nil {
		s = old
	} else {
		s = newSession(a, info, row.Agent, row.ACPSession)
		a.sessions[id] = s
	}
	s.pins++
	s.pinned++
	a.mu.Unlock()
	a.trim()
	return s, nil
}

// unpin ends a request's hold on a session (sessionFor).
func (a *Adapter) unpin(s *session) {
	a.mu.Lock()
	s.pins--
	a.mu.Unlock()
}

// maxResident is how many sessions the adapter keeps in memory before it
// forgets the idle ones (trim): every session's state is in the store,
// and one created or listed since start need not stay in memory too
// (each holds up to 70 KiB: its permission, directory and title).
const maxResident = 1024

// trim forgets, once more than maxResident sessions (and twice as many
// as the last trim left) are in memory, every session no request holds
// and no agent runs (no turn, none waiting, not bound to a live ACP
// session): the next request loads it from the store again. A session
// bound to its agent stays, so updates keep reaching it.
func (a *Adapter) trim() {
	type candidate struct {
		s      *session
		pinned uint64
	}
	a.mu.Lock()
	if len(a.sessions) <= a.trimAt || a.trimming {
		a.mu.Unlock()
		return
	}
	a.trimming = true
	var cands []candidate
	for _, s := range a.sessions {
		if s.pins == 0 {
			cands = append(cands, candidate{s, s.pinned})
		}
	}
	a.mu.Unlock()
	idle := cands[:0]
	for _, c := range cands {
		if c.s.idle() {
			idle = append(idle, c)
		}
	}
	a.mu.Lock()
	for _, c := range idle {
		// Unheld since it was found idle: nothing can have made it busy.
		if a.sessions[c.s.id] == c.s && c.s.pins == 0 && c.s.pinned == c.pinned {
			delete(a.sessions, c.s.id)
		}
	}
	a.trimAt = max(maxResident, 2*len(a.sessions))
	a.trimming = false
	a.mu.Unlock()
}

// idle reports whether nothing runs for the session: no turn, none
// waiting, no ACP session bound on a live connection.
func (s *session) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turn == nil && s.waiting == 0 && len(s.slot) == 0 && !s.loading && (s.conn == nil || !s.conn.alive())
}

// createInput is what POST /session may say.
type createInput struct {
	Title      string          `json:"title"`
	ParentID   string          `json:"parentID"`
	Permission json.RawMessage `json:"permission"`
	Agent      string          `json:"agent"`
	Model      *struct {
		ProviderID string `json:"providerID"`
		ID         string `json:"id"`
		ModelID    string `json:"modelID"`
	} `json:"model"`
}

// createSession makes a new session in directory dir.
func (a *Adapter) createSession(ctx context.Context, dir string, in createInput) (*session, error) {
	now := a.now()
	id := a.ids.session()
	agent := a.cfg.DefaultAgent
	if in.Model != nil && in.Model.ProviderID != "" {
		if !domain.ValidAgentID(in.Model.ProviderID) {
			return nil, errBadRequest("model.providerID must name an agent (letters, digits, '.', '_' or '-')")
		}
		agent = in.Model.ProviderID
	}
	info := sessionInfo{
		ID: id, Slug: slug(id), Version: a.cfg.Version, ProjectID: projectID(dir), Directory: dir,
		ParentID: in.ParentID, Title: in.Title,
		Time: sessionTime{Created: now, Updated: now},
	}
	if info.Title == "" {
		info.Title = defaultTitlePrefix + time.UnixMilli(now).UTC().Format("2006-01-02T15:04:05.000Z")
	}
	if len(in.Permission) > 0 && string(in.Permission) != "null" {
		info.Permission = in.Permission
	}
	// A model the client names is set when a prompt names it too (every
	// OpenCode client sends one with each prompt).
	s := newSession(a, info, agent, "")
	if err := s.save(ctx); err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.sessions[id] = s
	a.mu.Unlock()
	a.trim()
	s.publish("session.created", map[string]any{"info": &info, "sessionID": id})
	s.publish("session.updated", map[string]any{"info": &info, "sessionID": id})
	return s, nil
}

// defaultTitlePrefix starts the title of a session no one named; the
// first prompt's text replaces it, as OpenCode does.
const defaultTitlePrefix = "New session - "

// save writes the session's row. The caller holds no lock, or s.mu.
func (s *session) save(ctx context.Context) error {
	if s.gone {
		return nil // deleted: a late write would bring its row back
	}
	info, err := json.Marshal(&s.info)
	if err != nil {
		return err
	}
	return s.a.store.putSession(ctx, s.id, storedSession{
		Agent: s.agent, ACPSession: s.acpID, Directory: s.info.Directory, Updated: s.info.Time.Updated, Info: info,
	})
}

// snapshot returns the session's info.
func (s *session) snapshot() sessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

func (s *session) busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turn != nil || s.waiting > 0
}

// touched marks the session updated now and publishes session.updated.
// Called with s.mu held.
func (s *session) touched() {
	s.info.Time.Updated = s.a.now()
	s.persist(s.save(dbctx))
	s.publish("session.updated", map[string]any{"info": s.info, "sessionID": s.id})
}

// persist notes a failed write: the event still goes out, and the
// database is only behind until the next write of the same object. During
// a turn, the first failure is logged and kept (turn.lost): the turn then
// ends with an error saying that the database lacks part of it, instead
// of a clean finish over parts a listing or a restart will not show (a
// full disk used to lose them with a warning per write, in the log
// alone). Called with s.mu held.
func (s *session) persist(err error) {
	if err == nil {
		return
	}
	if t := s.turn; t != nil {
		if t.lost != nil {
			return
		}
		t.lost = err
	}
	s.a.log.Warn("opencode: writing to the database failed", "session", s.id, "err", err)
}

// detach forgets the session's binding (deleted or evicted): messages the
// agent still sends for it are dropped, a turn still running ends.
func (s *session) detach() {
	s.mu.Lock()
	s.gone = true
	c, acpID, t := s.conn, s.acpID, s.turn
	s.conn = nil
	s.mu.Unlock()
	if c != nil {
		if t != nil {
			_ = c.notify(s.a.ctx, "session/cancel", map[string]string{"sessionId": acpID})
		}
		c.unbind(acpID)
	}
	s.a.cancelAsks(s, "cancelled")
	if t != nil {
		s.mu.Lock()
		s.finishLocked(t, "", errors.New("the session was deleted"))
		s.mu.Unlock()
	}
}

// agentGone is told by a connection that ended: the next prompt binds the
// session again (session/load where the agent offers it).
func (s *session) agentGone(c *agentConn, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != c {
		return
	}
	s.conn = nil
	s.loading = false
	if t := s.turn; t != nil {
		s.finishLocked(t, "", cause)
	}
}

// bind makes sure the session has a live ACP session: the agent's
// connection (started when none runs and mayStart), then session/load of
// the session it had (after a daemon or agent restart, when the agent
// offers it) or session/new.
func (s *session) bind(ctx context.Context, mayStart bool) (*agentConn, string, error) {
	s.mu.Lock()
	c, acpID, agent, dir := s.conn, s.acpID, s.agent, s.info.Directory
	s.mu.Unlock()
	if c != nil && c.alive() {
		return c, acpID, nil
	}
	c, err := s.a.connFor(ctx, agent, mayStart)
	if err != nil {
		return nil, "", err
	}
	timeout := s.a.cfg.RequestTimeout
	if acpID != "" && c.caps.LoadSession {
		s.mu.Lock()
		s.loading = true
		s.mu.Unlock()
		c.bind(acpID, s)
		res, err := c.call(ctx, "session/load", map[string]any{"sessionId": acpID, "cwd": dir, "mcpServers": []any{}}, timeout)
		s.mu.Lock()
		s.loading = false
		if s.gone { // deleted meanwhile: detach found no binding to undo
			s.mu.Unlock()
			c.unbind(acpID)
			return nil, "", errNotFound("Session not found: " + s.id)
		}
		if err == nil {
			s.conn, s.model = c, ""
			s.sessionConfig(res)
			s.mu.Unlock()
			return c, acpID, nil
		}
		s.mu.Unlock()
		c.unbind(acpID)
		s.a.log.Info("opencode: session/load failed; starting a new ACP session", "session", s.id, "agent", agent, "err", err)
	}
	res, err := c.call(ctx, "session/new", map[string]any{"cwd": dir, "mcpServers": []any{}}, timeout)
	if err != nil {
		return nil, "", fmt.Errorf("session/new: %w", err)
	}
	var out struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(res, &out); err != nil || out.SessionID == "" {
		return nil, "", errors.New("session/new: the agent answered no sessionId")
	}
	c.bind(out.SessionID, s)
	s.mu.Lock()
	if s.gone {
		s.mu.Unlock()
		c.unbind(out.SessionID)
		return nil, "", errNotFound("Session not found: " + s.id)
	}
	s.conn, s.acpID, s.model = c, out.SessionID, ""
	s.sessionConfig(res)
	s.persist(s.save(dbctx))
	s.mu.Unlock()
	return c, out.SessionID, nil
}

// sessionConfig reads how the agent takes a model from a session/new or
// session/load answer: a config option of category or id "model", or the
// unstable models state (session/set_model). Called with s.mu held.
func (s *session) sessionConfig(res json.RawMessage) {
	var out struct {
		ConfigOptions []struct {
			ID           string `json:"id"`
			Category     string `json:"category"`
			CurrentValue any    `json:"currentValue"`
		} `json:"configOptions"`
		Models *struct {
			CurrentModelID string `json:"currentModelId"`
		} `json:"models"`
	}
	_ = json.Unmarshal(res, &out)
	s.modelOpt, s.setModel = "", false
	for _, o := range out.ConfigOptions {
		if o.Category == "model" || o.ID == "model" {
			s.modelOpt = o.ID
			if v, ok := o.CurrentValue.(string); ok {
				s.model = v
			}
			break
		}
	}
	if out.Models != nil {
		s.setModel = true
		if s.model == "" {
			s.model = out.Models.CurrentModelID
		}
	}
}

// chooseModel sets the model a prompt names on the agent, best effort: an
// agent that refuses keeps its own.
func (s *session) chooseModel(ctx context.Context, c *agentConn, acpID, model string) {
	s.mu.Lock()
	cur, opt, setModel := s.model, s.modelOpt, s.setModel
	s.mu.Unlock()
	if model == "" || model == cur {
		return
	}
	var err error
	switch {
	case opt != "":
		_, err = c.call(ctx, "session/set_config_option", map[string]any{"sessionId": acpID, "configId": opt, "value": model}, s.a.cfg.RequestTimeout)
	case setModel:
		_, err = c.call(ctx, "session/set_model", map[string]any{"sessionId": acpID, "modelId": model}, s.a.cfg.RequestTimeout)
	default:
		return
	}
	if err != nil {
		s.a.log.Info("opencode: the agent did not take the model", "session", s.id, "model", model, "err", err)
		return
	}
	s.mu.Lock()
	s.model = model
	s.mu.Unlock()
}

// connFor returns the agent's live connection, starting one if none runs
// and mayStart (else errMayNotStart). Concurrent callers for one agent
// wait for the one start.
func (a *Adapter) connFor(ctx context.Context, agent string, mayStart bool) (*agentConn, error) {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil, errShuttingDown
	}
	slot := a.conns[agent]
	if slot == nil {
		slot = &connSlot{sem: make(chan struct{}, 1)}
		a.conns[agent] = slot
	}
	slot.users++
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		slot.users--
		a.dropSlotLocked(agent, slot)
		a.mu.Unlock()
	}()
	select {
	case slot.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-slot.sem }()
	a.mu.Lock()
	c := slot.conn
	a.mu.Unlock()
	if c != nil && c.alive() {
		return c, nil
	}
	if !mayStart {
		return nil, errMayNotStart(agent)
	}
	c, err := a.dial(ctx, agent)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	slot.conn = c
	a.mu.Unlock()
	a.log.Info("opencode: agent connected", "agent", agent, "server_id", c.conn.ID(), "load_session", c.caps.LoadSession)
	return c, nil
}

// forgetConn drops an ended connection from its slot.
func (a *Adapter) forgetConn(c *agentConn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if slot := a.conns[c.agent]; slot != nil && slot.conn == c {
		slot.conn = nil
		a.dropSlotLocked(c.agent, slot)
	}
}

// dropSlotLocked forgets an agent's slot that has no connection and no
// user. Called with a.mu held.
func (a *Adapter) dropSlotLocked(agent string, slot *connSlot) {
	if slot.users == 0 && slot.conn == nil && a.conns[agent] == slot {
		delete(a.conns, agent)
	}
}

var errShuttingDown = domain.StreamError("the daemon is shutting down")

// errMayNotStart fails a prompt judged without acp.start (its agent ran
// then) whose agent has stopped since.
func errMayNotStart(agent string) error {
	return domain.PermissionDenied("agent " + agent + " is not running, and this request was not allowed to start it (acp.start); retry to be judged again")
}

// slug is a short name for a session, as OpenCode shows one.
func slug(id string) string {
	adjectives := []string{"brave", "calm", "eager", "fuzzy", "gentle", "happy", "jolly", "keen", "lively", "merry", "nimble", "proud", "quick", "shy", "witty", "zesty"}
	nouns := []string{"badger", "cactus", "comet", "eagle", "falcon", "garden", "harbor", "island", "lagoon", "meadow", "otter", "pepper", "river", "squirrel", "tiger", "willow"}
	h := sha1.Sum([]byte(id))
	return adjectives[int(h[0])%len(adjectives)] + "-" + nouns[int(h[1])%len(nouns)]
}

// projectID names a directory's project: stable for the directory (native
// OpenCode uses the git root commit; this daemon does not look into the
// directory).
func projectID(dir string) string {
	h := sha1.Sum([]byte(dir))
	return hex.EncodeToString(h[:])
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

// titleFrom is a session title from a prompt's text: its first line, cut
// to 50 characters.
func titleFrom(text string) string {
	text = strings.TrimSpace(text)
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = strings.TrimSpace(text[:i])
	}
	r := []rune(text)
	if len(r) > 50 {
		return string(r[:50]) + "..."
	}
	return text
}
