package authz

import (
	"cmp"
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// Instances is what the chain needs to know of the ACP instances.
type Instances interface {
	// Instance returns the agent an instance runs and its generation, or
	// "" and 0 when the server id has no instance (so a POST to it would
	// start one). The generation tells one instance of an id from a later
	// one: a POST carries the one it was judged on (AuthRequest.Instance),
	// and is not run on another.
	Instance(serverID string) (agent string, generation uint64)
}

// Agents is what the chain needs to know of agent resolution.
type Agents interface {
	// Installed reports whether agent can start without an install step.
	Installed(agent string) bool
}

// Chain is the authorisation chain: policies, then the built-in token
// check. Every field may be nil or empty: no policies, no token (let
// through), no instances (every POST starts one), no agents (a start never
// implies an install).
type Chain struct {
	Policies  ports.Authorizer
	Tokens    *Tokens
	Instances Instances
	Agents    Agents
	// FSHome is where relative /v1/fs paths resolve (home or --fs-root);
	// ConfigBase is where relative /v1/config directories resolve.
	FSHome, ConfigBase string
}

// HasPolicies reports whether any policy runs, so an adapter knows whether
// it must peek an ACP body before authorising.
func (c *Chain) HasPolicies() bool { return c != nil && c.Policies != nil }

// TokenConfigured reports whether the built-in check requires a token.
func (c *Chain) TokenConfigured() bool { return c != nil && c.Tokens.Configured() }

// Plain sets an action without a resource.
func (c *Chain) Plain(r *domain.AuthRequest, a domain.Action) { r.Action = a }

// ACPPost describes a POST to /v1/acp/{serverID}[?agent=]: acp.send to an
// existing instance, else acp.start, implying agent.install when the agent
// cannot run yet. The policy sees the agent the id runs, else the one
// asked for.
func (c *Chain) ACPPost(r *domain.AuthRequest, serverID, agent string) {
	r.ServerID = serverID
	if bound, gen := c.instance(serverID); bound != "" {
		r.Action, r.Agent, r.Instance = domain.ActionACPSend, bound, gen
		return
	}
	r.Action, r.Agent, r.Instance = domain.ActionACPStart, agent, 0
	if c.Agents != nil && !c.Agents.Installed(agent) {
		r.Implies = []domain.Action{domain.ActionAgentInstall}
	}
}

// Server describes a request on an existing instance (stream, stop,
// stderr), with the agent it runs and its generation: the operation acts
// on that instance only (acp.Instances.SubscribeJudged), never on one
// started under the id after the decision.
func (c *Chain) Server(r *domain.AuthRequest, a domain.Action, serverID string) {
	r.Action, r.ServerID = a, serverID
	r.Agent, r.Instance = c.instance(serverID)
}

// Agent describes a request on one agent.
func (c *Chain) Agent(r *domain.AuthRequest, a domain.Action, agent string) {
	r.Action, r.Agent = a, agent
}

// FS describes a filesystem request on p (and dest, for a move), with the
// paths resolved as /v1/fs resolves them; a path that cannot be resolved
// is left empty (the operation refuses it with 400 anyway).
func (c *Chain) FS(r *domain.AuthRequest, a domain.Action, p, dest string) {
	r.Action = a
	r.FSPath = resolveFS(c.FSHome, p)
	if dest != "" {
		r.FSDest = resolveFS(c.FSHome, dest)
	}
}

// Config describes a config request on directory dir, resolved as
// /v1/config resolves it.
func (c *Chain) Config(r *domain.AuthRequest, a domain.Action, dir string) {
	r.Action = a
	if strings.TrimSpace(dir) == "" || strings.IndexByte(dir, 0) >= 0 {
		return
	}
	if !path.IsAbs(dir) {
		dir = path.Join(c.ConfigBase, dir)
	}
	r.FSPath = path.Clean(dir)
}

func resolveFS(home, p string) string {
	p = cmp.Or(p, ".")
	abs, err := domain.ResolveFSPath(home, p)
	if err != nil {
		return ""
	}
	return abs
}

func (c *Chain) instance(serverID string) (string, uint64) {
	if c.Instances == nil || serverID == "" {
		return "", 0
	}
	return c.Instances.Instance(serverID)
}

// Outcome is how a request was decided, for logs and metrics.
type Outcome struct {
	// Decision is "grant" (a policy granted), "identified" (a policy
	// authenticated it and none objected), "token" (the built-in check
	// accepted the token), "open" (no token configured, nobody objected),
	// or "deny".
	Decision string
	// Principal is who the request is authenticated as: the policy's
	// label, "token", or "" (anonymous).
	Principal string
	// By names the policy that decided, "token", or "".
	By string
}

// Principal of a request that presented a configured token.
const TokenPrincipal = "token"

var errNoAction = domain.PermissionDenied("this route has no action; refusing it")

// Authorize runs the chain on a described request. It returns the outcome
// and, when the request is refused, a *domain.Error: permission_denied with
// the policy's status (403 by default), or token_invalid (401) from a
// policy answering 401 or from the token check. Any other error means the
// request ended while waiting for a policy, or the policies failed.
func (c *Chain) Authorize(ctx context.Context, req domain.AuthRequest) (Outcome, error) {
	if req.Action == "" {
		// A route registered without an action: refuse rather than guess.
		return Outcome{Decision: "deny"}, errNoAction
	}
	if c.Policies == nil {
		return c.conclude(req, nil)
	}
	d, err := c.Policies.Authorize(ctx, req)
	if err != nil {
		return Outcome{Decision: "error"}, fmt.Errorf("authorize: %w", err)
	}
	return c.conclude(req, &d)
}

// AuthorizeWithoutBody runs the chain on a request described before its
// body was read: its FSPath, FSDest and RPC, which some requests take
// from their body (a move's paths, an ACP POST's JSON-RPC kind, id and
// method), are left empty. ok is false when the outcome may depend on
// them; the caller then reads the body and calls Authorize with the whole
// description. Otherwise the outcome and error are those Authorize would
// return whatever the body holds, so a request refused here is refused
// before any byte of its body is read:
//
//   - without policies the chain is the token check, which reads only
//     the Authorization header: always decided;
//   - with policies, only when they can tell that their decisions do not
//     depend on the body (ports.BodylessAuthorizer: the wasm policies can
//     for those that declare their decisions cacheable and did not read
//     these fields); any other policy makes ok false.
func (c *Chain) AuthorizeWithoutBody(ctx context.Context, req domain.AuthRequest) (out Outcome, ok bool, err error) {
	req.FSPath, req.FSDest, req.RPC = "", "", nil
	if req.Action == "" || c.Policies == nil {
		out, err = c.Authorize(ctx, req)
		return out, true, err
	}
	bodyless, can := c.Policies.(ports.BodylessAuthorizer)
	if !can {
		return Outcome{}, false, nil
	}
	d, ok, err := bodyless.AuthorizeWithoutBody(ctx, req)
	if err != nil {
		return Outcome{Decision: "error"}, true, fmt.Errorf("authorize: %w", err)
	}
	if !ok {
		return Outcome{}, false, nil
	}
	out, err = c.conclude(req, &d)
	return out, true, err
}

// conclude is the chain's outcome given the policies' decision (nil when
// there are no policies): theirs when they decided, else the token check's.
func (c *Chain) conclude(req domain.AuthRequest, d *domain.Decision) (Outcome, error) {
	if d != nil {
		switch {
		case d.Verdict == domain.Deny:
			return Outcome{Decision: "deny", Principal: d.Principal, By: d.By}, domain.Denied(*d)
		case d.Verdict == domain.Grant:
			return Outcome{Decision: "grant", Principal: d.Principal, By: d.By}, nil
		case d.Principal != "":
			return Outcome{Decision: "identified", Principal: d.Principal, By: d.By}, nil
		}
	}
	if !c.Tokens.Configured() {
		return Outcome{Decision: "open"}, nil
	}
	if c.Tokens.Check(header(req.Headers, "authorization")) {
		return Outcome{Decision: "token", Principal: TokenPrincipal, By: "token"}, nil
	}
	return Outcome{Decision: "deny", By: "token"}, ErrTokenInvalid
}

// ErrTokenInvalid is the built-in check's refusal.
var ErrTokenInvalid = domain.TokenInvalid("missing or invalid bearer token")

func header(h map[string][]string, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}
