package opencode

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Describe says what a request to /opencode would do, for the auth chain
// (the mounting adapter runs it before the request reaches ServeHTTP),
// in the daemon's action vocabulary:
//
//   - acp.read: every GET (events, sessions, messages, providers, config);
//   - acp.start: POST /session, which chooses the agent the session runs
//     (the model's provider, else the default agent);
//   - acp.send: a prompt or command to the agent it runs, abort,
//     permission and question replies, session and config changes, the
//     TUI routes. A prompt or command whose agent does not run now starts
//     it: acp.send implying acp.start (as /v1 tells a POST to a running
//     instance from a start). A prompt judged without acp.start never
//     starts the agent (StartAllowed), even if it stopped meanwhile;
//   - acp.stop: DELETE /session/{id}.
//
// Agent is the agent acted on: the session's, or for a prompt the one it
// will run. A session creation, or a prompt that starts its agent, of an
// agent that is not installed implies agent.install. body is the
// request's body when the auth policies are to see which agent a prompt
// runs (it may be nil: the session's agent, or the default, is named
// then).
func (a *Adapter) Describe(r *http.Request, body []byte, req *domain.AuthRequest) {
	p := strings.TrimPrefix(r.URL.Path, "/opencode")
	seg := strings.Split(strings.Trim(p, "/"), "/")
	sessionID := ""
	if len(seg) >= 2 && seg[0] == "session" && seg[1] != "status" {
		sessionID = seg[1]
	}
	agent := ""
	if sessionID != "" {
		agent = a.agentOf(r, sessionID)
	}
	switch {
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		req.Action = domain.ActionACPRead
	case r.Method == http.MethodPost && len(seg) == 1 && seg[0] == "session":
		req.Action = domain.ActionACPStart
		agent = firstNonEmpty(bodyProvider(body), a.cfg.DefaultAgent)
		a.impliesInstall(req, agent)
	case r.Method == http.MethodDelete && len(seg) == 2 && sessionID != "":
		req.Action = domain.ActionACPStop
	case r.Method == http.MethodPost && len(seg) == 3 && sessionID != "" && (seg[2] == "message" || seg[2] == "prompt_async" || seg[2] == "command"):
		req.Action = domain.ActionACPSend
		if prov := bodyProvider(body); prov != "" && !a.bound(r, sessionID) {
			agent = prov // the first prompt of a session may choose its agent
		}
		if agent == "" {
			agent = a.cfg.DefaultAgent
		}
		if !a.running(agent) {
			req.Implies = append(req.Implies, domain.ActionACPStart)
			a.impliesInstall(req, agent)
		}
	default:
		req.Action = domain.ActionACPSend
	}
	req.Agent = agent
}

func (a *Adapter) impliesInstall(req *domain.AuthRequest, agent string) {
	if a.cfg.Installed != nil && agent != "" && !a.cfg.Installed(agent) {
		req.Implies = append(req.Implies, domain.ActionAgentInstall)
	}
}

// running reports whether the agent's connection is up, so a prompt to
// it starts nothing.
func (a *Adapter) running(agent string) bool {
	a.mu.Lock()
	slot := a.conns[agent]
	var c *agentConn
	if slot != nil {
		c = slot.conn
	}
	a.mu.Unlock()
	return c != nil && c.alive()
}

// startKey carries, in a request's context, whether it may start an
// agent (StartAllowed).
type startKey struct{}

// StartAllowed returns ctx saying whether its request may start an
// agent: the mounting adapter tells so once the auth chain has allowed
// it (judged with acp.start, or by no policy). A prompt that may not
// finds its agent stopped and fails, as a POST judged acp.send on /v1 is
// never run on an instance started meanwhile. Without it, a request may.
func (a *Adapter) StartAllowed(ctx context.Context, allowed bool) context.Context {
	return context.WithValue(ctx, startKey{}, allowed)
}

func mayStart(ctx context.Context) bool {
	allowed, ok := ctx.Value(startKey{}).(bool)
	return allowed || !ok
}

// agentOf is the agent of a session ("" for an unknown one).
func (a *Adapter) agentOf(r *http.Request, id string) string {
	s := a.describedSession(r, id)
	if s == nil {
		return ""
	}
	defer a.unpin(s)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agent
}

// bound reports whether a session has run an agent (so its agent is
// fixed); an unknown session counts as bound (nothing will run).
func (a *Adapter) bound(r *http.Request, id string) bool {
	s := a.describedSession(r, id)
	if s == nil {
		return true
	}
	defer a.unpin(s)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acpID != "" || s.conn != nil
}

// describedSession is the runtime of session id, loaded from the store
// when needed and pinned (the caller unpins it), or nil.
func (a *Adapter) describedSession(r *http.Request, id string) *session {
	if len(id) > 128 {
		return nil
	}
	s, err := a.sessionFor(r.Context(), id)
	if err != nil {
		return nil
	}
	return s
}

// bodyProvider is model.providerID of a JSON body, or "". Prompts name
// it as {providerID, modelID}; commands as "provider/model".
func bodyProvider(body []byte) string {
	if len(body) == 0 {
		return ""
	}
	var v struct {
		Model json.RawMessage `json:"model"`
	}
	if json.Unmarshal(body, &v) != nil || len(v.Model) == 0 {
		return ""
	}
	var m struct {
		ProviderID string `json:"providerID"`
	}
	if json.Unmarshal(v.Model, &m) == nil && domain.ValidAgentID(m.ProviderID) {
		return m.ProviderID
	}
	var s string
	if json.Unmarshal(v.Model, &s) == nil {
		if prov, _, ok := strings.Cut(s, "/"); ok && domain.ValidAgentID(prov) {
			return prov
		}
	}
	return ""
}
