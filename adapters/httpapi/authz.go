package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandbox-agent-go/sandbox-agent/app/authz"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// The auth chain on the HTTP side. Every /v1 and /acp operation is
// registered with route, which requires a describe function: what the
// operation does (an action of domain.Actions) and on what. A middleware
// describes each request with it and runs the chain (app/authz: policies,
// then the built-in token check) before huma reads any input; an
// operation without a describe function is refused (and
// TestEveryOperationReachesTheChain fails).
//
// A few requests take part of their description from their body: the
// move (its paths) and, when policies run, the ACP POSTs
// (/v1/acp/{server_id}, /acp/{agent}: the JSON-RPC kind, id and method).
// They are first described without it and decided if the chain can
// decide them so (Chain.AuthorizeWithoutBody: always without policies,
// where the chain is the token check; with policies, when those can tell
// their decisions do not read these fields), so that a request refused
// whatever its body holds is refused before any byte of the body is read.
// Otherwise the move's body is read first (charged and checked, as any
// JSON body) and the ACP POSTs are decided in their handler once the body
// is peeked (and each /acp WebSocket text frame likewise, in
// acpstd_ws.go).

// describeFunc fills in the action and resource of a request.
type describeFunc func(hctx huma.Context, c *authz.Chain, r *domain.AuthRequest)

// Operation metadata keys.
const (
	metaDescribe = "sandbox-agent.describe"
	// metaDeferred marks the ACP POSTs: with policies that cannot decide
	// them without the body, authorised in the handler after the body is
	// peeked.
	metaDeferred = "sandbox-agent.deferred"
)

// route registers an operation with what it does. Every /v1 and /acp
// operation is registered through it, so none can be added without an
// action.
func route[I, O any](api huma.API, op huma.Operation, describe describeFunc, h func(context.Context, *I) (*O, error)) {
	if describe == nil {
		panic("httpapi: operation " + op.OperationID + " registered without an action")
	}
	if op.Metadata == nil {
		op.Metadata = map[string]any{}
	}
	op.Metadata[metaDescribe] = describe
	markJSONBody[I](&op)
	huma.Register(api, op, h)
}

// act: an action without a resource.
func act(a domain.Action) describeFunc {
	return func(_ huma.Context, c *authz.Chain, r *domain.AuthRequest) { c.Plain(r, a) }
}

// onServer: an action on the instance of {server_id}.
func onServer(a domain.Action) describeFunc {
	return func(hctx huma.Context, c *authz.Chain, r *domain.AuthRequest) {
		c.Server(r, a, hctx.Param("server_id"))
	}
}

// onAgent: an action on the agent of {agent}.
func onAgent(a domain.Action) describeFunc {
	return func(hctx huma.Context, c *authz.Chain, r *domain.AuthRequest) {
		c.Agent(r, a, hctx.Param("agent"))
	}
}

// onPath: an action on the filesystem path of ?path=.
func onPath(a domain.Action) describeFunc {
	return func(hctx huma.Context, c *authz.Chain, r *domain.AuthRequest) {
		c.FS(r, a, hctx.Query("path"), "")
	}
}

// onDirectory: an action on the config of ?directory=.
func onDirectory(a domain.Action) describeFunc {
	return func(hctx huma.Context, c *authz.Chain, r *domain.AuthRequest) {
		c.Config(r, a, hctx.Query("directory"))
	}
}

// describeACPPost: acp.send to an existing instance, else acp.start (with
// agent.install when the agent is not installed).
func describeACPPost(hctx huma.Context, c *authz.Chain, r *domain.AuthRequest) {
	c.ACPPost(r, hctx.Param("server_id"), hctx.Query("agent"))
}

// authState is what the chain decided, for the operation and the logs.
type authState struct {
	action    domain.Action
	principal string
	instance  uint64 // the ACP instance judged (AuthRequest.Instance)
	// settled: decided for good by the middleware (with the whole
	// description, or without the body when that could not change the
	// outcome), so an ACP POST's handler does not ask again once it has
	// peeked the body.
	settled bool
}

// settle marks the decision carried by ctx as settled.
func settle(ctx context.Context) context.Context {
	s := authOf(ctx)
	s.settled = true
	return context.WithValue(ctx, authKey{}, s)
}

type authKey struct{}

func authOf(ctx context.Context) authState {
	s, _ := ctx.Value(authKey{}).(authState)
	return s
}

// useAuth installs the chain's middleware on every operation registered
// after it.
func useAuth(api huma.API, cfg *Config) {
	api.UseMiddleware(func(hctx huma.Context, next func(huma.Context)) {
		op := hctx.Operation()
		if op == nil || !guarded(op.Path) || cfg.HealthPublic && op.OperationID == opHealth {
			next(hctx)
			return
		}
		r, w := unwrap(hctx)
		// A JSON body is read (charged, checked) after the chain has let
		// the request through, except where describing it needs the body.
		read := false
		var charged int64
		defer func() { cfg.inflight.give(charged) }()
		readBody := func() bool {
			read = true
			if err := checkJSONBody(r, op); err != nil {
				writeProblem(w, problemFor(hctx.Context(), err))
				return false
			}
			b, n, err := readJSONBody(r, op, cfg.inflight)
			charged += n
			if err != nil {
				writeProblem(w, problemFor(hctx.Context(), err))
				return false
			}
			hctx = withPeekedBody(hctx, b)
			return true
		}
		describe, _ := op.Metadata[metaDescribe].(describeFunc)
		describeReq := func() domain.AuthRequest {
			req := cfg.authRequest(r, op.Method, op.Path, op.OperationID)
			if describe != nil {
				describe(hctx, cfg.chain, &req)
			}
			return req
		}
		peek, deferred := op.Metadata[metaPeekBody] == true, op.Metadata[metaDeferred] == true
		// Only a JSON body is ever looked into; any other is refused by
		// the operation (415), so the description without it is whole.
		fromBody := (peek || deferred) && isMediaType(r.Header.Get("Content-Type"), "application/json")
		decided := false
		if fromBody {
			// Described without the body (none is peeked yet): decided
			// here when the outcome cannot depend on it.
			ctx, ok, err := authorizeWithoutBody(hctx.Context(), cfg, describeReq())
			if ok && err != nil {
				writeAuthProblem(w, ctx, err)
				return
			}
			if ok {
				hctx, decided = huma.WithContext(hctx, settle(ctx)), true
			} else if peek && !readBody() {
				return
			}
		}
		// Else the chain runs on the whole description: now, after the
		// move's body was peeked, or in an ACP POST's handler.
		if !decided && !(fromBody && deferred) {
			ctx, err := authorize(hctx.Context(), cfg, describeReq())
			if err != nil {
				writeAuthProblem(w, ctx, err)
				return
			}
			hctx = huma.WithContext(hctx, settle(ctx))
		}
		if !read && !readBody() {
			return
		}
		next(hctx)
	})
}

// checkJSONBody refuses a body that is not declared application/json on
// an operation that takes JSON (415): a browser can send text/plain or a
// Blob without a preflight, but not application/json. An optional body
// that is absent needs no type.
func checkJSONBody(r *http.Request, op *huma.Operation) error {
	if op.RequestBody == nil || op.RequestBody.Content["application/json"] == nil {
		return nil
	}
	present := r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
	if !op.RequestBody.Required && !present {
		return nil
	}
	if isMediaType(r.Header.Get("Content-Type"), "application/json") {
		return nil
	}
	return domain.UnsupportedMedia("expected Content-Type: application/json")
}

// authorizeACPPost is the chain for POST /v1/acp/{server_id} when
// policies run, with the JSON-RPC kind, id and method peeked from the
// body. The body itself is never shown to a policy.
func authorizeACPPost(ctx context.Context, cfg *Config, r *http.Request, serverID, agent string, f domain.Frame) (context.Context, error) {
	req := cfg.authRequest(r, http.MethodPost, "/v1/acp/{server_id}", opPostACP)
	cfg.chain.ACPPost(&req, serverID, agent)
	req.RPC = &domain.RPCInfo{Kind: f.Kind.String(), ID: string(f.ID), Method: f.Method}
	return authorize(ctx, cfg, req)
}

const (
	opPostACP = "post_v1_acp"
	opHealth  = "get_v1_health"
)

// authRequest describes r to the chain; header names are lower-cased.
// Without policies only the token check reads the request, so only the
// Authorization header is carried (no copy of every header per request).
// The token may come in Config.TokenHeader, or as ?access_token= on a
// WebSocket (presentedAuthorization): the chain sees it where it looks for
// a bearer token, the authorization header.
func (c *Config) authRequest(r *http.Request, method, route, opID string) domain.AuthRequest {
	req := domain.AuthRequest{Method: method, Route: route, OperationID: opID, Path: r.URL.Path, RemoteAddr: r.RemoteAddr}
	if !c.chain.HasPolicies() {
		if a := c.presentedAuthorization(r); a != "" {
			req.Headers = map[string][]string{"authorization": {a}}
		}
		return req
	}
	headers := make(map[string][]string, len(r.Header)+1)
	for k, v := range r.Header {
		headers[lowerHeader(k)] = v
	}
	if r.Host != "" {
		headers["host"] = []string{r.Host}
	}
	if a := c.presentedAuthorization(r); a != "" {
		headers["authorization"] = []string{a}
	}
	req.Headers = headers
	if r.URL.RawQuery != "" {
		req.Query = r.URL.Query()
	}
	return req
}

// authorize runs the chain, counts and logs the outcome, and returns the
// request's context carrying what was decided (and a logger naming the
// principal).
func authorize(ctx context.Context, cfg *Config, req domain.AuthRequest) (context.Context, error) {
	out, err := cfg.chain.Authorize(ctx, req)
	return decided(ctx, cfg, req, out, err)
}

// authorizeWithoutBody is authorize on a request described without its
// body (Chain.AuthorizeWithoutBody); when ok is false nothing was decided,
// counted or logged.
func authorizeWithoutBody(ctx context.Context, cfg *Config, req domain.AuthRequest) (context.Context, bool, error) {
	out, ok, err := cfg.chain.AuthorizeWithoutBody(ctx, req)
	if !ok {
		return ctx, false, nil
	}
	ctx, err = decided(ctx, cfg, req, out, err)
	return ctx, true, err
}

// decided counts and logs an outcome of the chain and returns the context
// carrying it. Requests with a principal, and refusals, are logged at
// info: an audit trail of who did what; anonymous requests on a daemon
// without a token at debug.
func decided(ctx context.Context, cfg *Config, req domain.AuthRequest, out authz.Outcome, err error) (context.Context, error) {
	cfg.metrics.countAuth(req.Action, out.Decision, out.By)
	l := logger(ctx)
	if out.Principal != "" {
		l = withLazy(l, slog.String("principal", out.Principal))
		ctx = context.WithValue(ctx, loggerKey{}, l)
	}
	level := slog.LevelInfo
	if out.Decision == "open" {
		level = slog.LevelDebug
	}
	if l.Enabled(ctx, level) {
		attrs := []any{"action", req.Action, "decision", out.Decision, "method", req.Method, "path", req.Path}
		if len(req.Implies) > 0 {
			attrs = append(attrs, "implies", req.Implies)
		}
		if out.By != "" {
			attrs = append(attrs, "by", out.By)
		}
		if err != nil {
			var e *domain.Error
			if errors.As(err, &e) {
				attrs = append(attrs, "status", problemFor(ctx, e).Status)
			} else {
				attrs = append(attrs, "err", err)
			}
		}
		l.Log(ctx, level, "auth", attrs...)
	}
	if err != nil {
		return ctx, err
	}
	return context.WithValue(ctx, authKey{}, authState{action: req.Action, principal: out.Principal, instance: req.Instance}), nil
}

// writeAuthProblem answers a refusal; a 401 says how to authenticate.
func writeAuthProblem(w http.ResponseWriter, ctx context.Context, err error) {
	p := problemFor(ctx, err)
	if p.Status == http.StatusUnauthorized {
		p = p.withHeader("WWW-Authenticate", "Bearer")
	}
	writeProblem(w, p)
}

// authError is a refusal returned from inside a huma handler, with the
// WWW-Authenticate header of a 401.
func authError(ctx context.Context, err error) error {
	p := problemFor(ctx, err)
	if p.Status == http.StatusUnauthorized {
		p = p.withHeader("WWW-Authenticate", "Bearer")
	}
	return p
}

// rawDescribe is describeFunc for routes served outside huma.
type rawDescribe func(r *http.Request, c *authz.Chain, req *domain.AuthRequest)

// withAuth runs the chain before a handler registered on the mux directly
// (a WebSocket or raw-byte route huma cannot express): route and opID name
// it to the policies, describe gives its action. Such routes must also be
// documented in the OpenAPI document under opID, so the walk in
// TestEveryOperationReachesTheChain covers them.
func withAuth(cfg *Config, route, opID string, describe rawDescribe, next http.Handler) http.Handler {
	if describe == nil {
		panic("httpapi: route " + route + " registered without an action")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := cfg.authRequest(r, r.Method, route, opID)
		describe(r, cfg.chain, &req)
		ctx, err := authorize(r.Context(), cfg, req)
		if err != nil {
			writeAuthProblem(w, ctx, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// lowerNames maps the canonical form of common header names to lower
// case, so describing a request to the policies does not allocate a new
// string for each of its headers.
var lowerNames = func() map[string]string {
	m := map[string]string{}
	for _, n := range []string{
		"Accept", "Accept-Encoding", "Accept-Language", "Acp-Connection-Id", "Authorization",
		"Cache-Control", "Connection", "Content-Length", "Content-Type", "Cookie", "Host",
		"Last-Event-Id", "Origin", "Referer", "Sec-Fetch-Dest", "Sec-Fetch-Mode", "Sec-Fetch-Site",
		"Sec-Websocket-Key", "Sec-Websocket-Version", "Upgrade", "User-Agent", "X-Forwarded-For",
		"X-Request-Id",
	} {
		m[n] = strings.ToLower(n)
	}
	return m
}()

func lowerHeader(k string) string {
	if l, ok := lowerNames[k]; ok {
		return l
	}
	return strings.ToLower(k)
}
