package route

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/queryparam"

	"github.com/sandbox-agent-go/sandbox-agent/app/authz"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// The auth chain on the HTTP side. Every /v1 and /acp operation is
// registered with Register, which requires a describe function: what the
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
// adapters/httpapi/acpstd).

// DescribeFunc fills in the action and resource of a request.
type DescribeFunc func(hctx huma.Context, c *authz.Chain, r *domain.AuthRequest)

// Operation metadata keys.
const (
	metaDescribe = "sandbox-agent.describe"
	// MetaDeferred marks the ACP POSTs: with policies that cannot decide
	// them without the body, authorised in the handler after the body is
	// peeked.
	MetaDeferred = "sandbox-agent.deferred"
)

// Register registers an operation with what it does. Every /v1 and /acp
// operation is registered through it, so none can be added without an
// action.
func Register[I, O any](api huma.API, op huma.Operation, describe DescribeFunc, h func(context.Context, *I) (*O, error)) {
	if describe == nil {
		panic("httpapi: operation " + op.OperationID + " registered without an action")
	}
	if op.Metadata == nil {
		op.Metadata = map[string]any{}
	}
	op.Metadata[metaDescribe] = describe
	markJSONBody[I](&op)
	huma.Register(api, op, WithHeaders(h))
}

// Act: an action without a resource.
func Act(a domain.Action) DescribeFunc {
	return func(_ huma.Context, c *authz.Chain, r *domain.AuthRequest) { c.Plain(r, a) }
}

// OnServer: an action on the instance of {server_id}.
func OnServer(a domain.Action) DescribeFunc {
	return func(hctx huma.Context, c *authz.Chain, r *domain.AuthRequest) {
		c.Server(r, a, hctx.Param("server_id"))
	}
}

// OnAgent: an action on the agent of {agent}.
func OnAgent(a domain.Action) DescribeFunc {
	return func(hctx huma.Context, c *authz.Chain, r *domain.AuthRequest) {
		c.Agent(r, a, hctx.Param("agent"))
	}
}

// OnPath: an action on the filesystem path of ?path=.
func OnPath(a domain.Action) DescribeFunc {
	return func(hctx huma.Context, c *authz.Chain, r *domain.AuthRequest) {
		c.FS(r, a, hctx.Query("path"), "")
	}
}

// OnDirectory: an action on the config of ?directory=.
func OnDirectory(a domain.Action) DescribeFunc {
	return func(hctx huma.Context, c *authz.Chain, r *domain.AuthRequest) {
		c.Config(r, a, hctx.Query("directory"))
	}
}

// authState is what the chain decided, for the operation and the logs.
type authState struct {
	action    domain.Action
	principal string
	instance  uint64 // the ACP instance judged (AuthRequest.Instance)
	// judged is what Revocable needs to judge a stream again at a
	// reload; nil when the daemon has no stream registry. Behind a
	// pointer: the state is boxed into the context twice a request
	// (decided, settle), and the request as judged is a large struct.
	judged *judgedRequest
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

// judgedRequest is the request as judged, the chain that judged it and the
// Streams generation then.
type judgedRequest struct {
	req domain.AuthRequest
	env *Env
	gen uint64
}

func authOf(ctx context.Context) authState {
	s, _ := ctx.Value(authKey{}).(authState)
	return s
}

// Settled reports whether the middleware decided the request of ctx for
// good, so an ACP POST's handler need not ask the chain again once it has
// peeked the body.
func Settled(ctx context.Context) bool { return authOf(ctx).settled }

// JudgedInstance is the ACP instance the chain judged the request of ctx
// against (AuthRequest.Instance; 0 for none).
func JudgedInstance(ctx context.Context) uint64 { return authOf(ctx).instance }

// UseAuth installs the chain's middleware on every operation registered
// after it. open names the operations the chain does not guard although
// they are under /v1 (a public health check).
func (e *Env) UseAuth(api huma.API, open func(*huma.Operation) bool) {
	api.UseMiddleware(func(hctx huma.Context, next func(huma.Context)) {
		op := hctx.Operation()
		if op == nil || !Guarded(op.Path) || open(op) {
			next(hctx)
			return
		}
		r, w := Unwrap(hctx)
		// A JSON body is read (charged, checked) after the chain has let
		// the request through, except where describing it needs the body.
		read := false
		var charged int64
		defer func() { e.Budget.Give(charged) }()
		readBody := func() bool {
			read = true
			if err := checkJSONBody(r, op); err != nil {
				WriteProblem(w, ProblemFor(hctx.Context(), err))
				return false
			}
			b, n, err := readJSONBody(r, op, e.Budget)
			charged += n
			if err != nil {
				WriteProblem(w, ProblemFor(hctx.Context(), err))
				return false
			}
			hctx = withPeekedBody(hctx, b)
			return true
		}
		describe, _ := op.Metadata[metaDescribe].(DescribeFunc)
		describeReq := func() domain.AuthRequest {
			req := e.AuthRequest(r, op.Method, op.Path, op.OperationID)
			if describe != nil {
				describe(hctx, e.Chain, &req)
			}
			return req
		}
		peek, deferred := op.Metadata[MetaPeekBody] == true, op.Metadata[MetaDeferred] == true
		// Only a JSON body is ever looked into; any other is refused by
		// the operation (415), so the description without it is whole.
		fromBody := (peek || deferred) && IsMediaType(r.Header.Get("Content-Type"), "application/json")
		decided := false
		if fromBody {
			// Described without the body (none is peeked yet): decided
			// here when the outcome cannot depend on it.
			ctx, ok, err := e.authorizeWithoutBody(hctx.Context(), describeReq())
			if ok && err != nil {
				WriteAuthProblem(w, ctx, err)
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
			ctx, err := e.Authorize(hctx.Context(), describeReq())
			if err != nil {
				WriteAuthProblem(w, ctx, err)
				return
			}
			hctx = huma.WithContext(hctx, settle(ctx))
		}
		if !read && !readBody() {
			return
		}
		h := &held{budget: e.Budget}
		defer func() { e.Budget.Give(h.n) }()
		next(huma.WithContext(hctx, context.WithValue(hctx.Context(), heldKey{}, h)))
	})
}

// held is what an operation charged with Hold, given back once the
// request is answered.
type held struct {
	budget *Inflight
	n      int64
}

type heldKey struct{}

// Hold charges n bytes of what the operation of ctx holds (a config file
// it reads and answers) to the in-flight budget until the request is
// answered, its response written: nil, or the 503 of a spent budget. A
// charge larger than the whole budget is cut to it, so such a request
// waits for an idle daemon, never for ever. Outside the middleware, or
// without a budget, it charges nothing.
func Hold(ctx context.Context, n int64) error {
	h, _ := ctx.Value(heldKey{}).(*held)
	if h == nil || h.budget == nil || n <= 0 {
		return nil
	}
	if n = min(n, h.budget.Max()/2-h.n); n <= 0 {
		return nil
	}
	if !h.budget.Take(n) {
		return h.budget.Overloaded()
	}
	h.n += n
	return nil
}

// Guarded reports whether a path is under the token and the chain: the API
// (/v1) and ACP's standard transport (/acp).
func Guarded(path string) bool {
	return strings.HasPrefix(path, "/v1/") || path == "/v1" || strings.HasPrefix(path, "/acp/") || path == "/acp"
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
	if IsMediaType(r.Header.Get("Content-Type"), "application/json") {
		// Media types are case-insensitive (RFC 9110 section 8.3.1);
		// huma looks its decoder up by the exact lower-case name, and
		// refused "Application/JSON" with 415.
		r.Header.Set("Content-Type", "application/json")
		return nil
	}
	return domain.UnsupportedMedia("expected Content-Type: application/json")
}

// AuthRequest describes r to the chain; header names are lower-cased.
// Without policies only the token check reads the request, so only the
// Authorization header is carried (no copy of every header per request).
// The token may come in Env.TokenHeader, or as ?access_token= on a
// WebSocket (PresentedAuthorization): the chain sees it where it looks for
// a bearer token, the authorization header.
func (e *Env) AuthRequest(r *http.Request, method, route, opID string) domain.AuthRequest {
	req := domain.AuthRequest{Method: method, Route: route, OperationID: opID, Path: r.URL.Path, RemoteAddr: r.RemoteAddr}
	if !e.Chain.HasPolicies() {
		if a := e.PresentedAuthorization(r, route); a != "" {
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
	if a := e.PresentedAuthorization(r, route); a != "" {
		headers["authorization"] = []string{a}
	}
	req.Headers = headers
	if r.URL.RawQuery != "" {
		req.Query = QueryAsRead(r.URL.RawQuery)
	}
	return req
}

// QueryAsRead is a query as the operations read it, for the policies:
// the first value of each name is the one huma binds to a parameter
// (queryparam.Get), the values after it follow in order.
//
// Why not url.ParseQuery: it reads some queries otherwise than huma
// does, and a policy judging by one reading while the operation acts on
// the other is judging another request. "?recursive" (no "=") is true to
// huma and "" to ParseQuery, so a policy refusing recursive deletes let
// one through; "?path=/etc;&path=/ok" is "/etc;" to huma while ParseQuery
// drops the pair with the semicolon and shows "/ok" first; a bad escape
// ("%zz") is "" to huma and dropped by ParseQuery, again promoting the
// next value.
func QueryAsRead(raw string) map[string][]string {
	q := map[string][]string{}
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			continue // huma never matches such a name either
		}
		val, err := url.QueryUnescape(v)
		if err != nil {
			val = "" // as huma reads it
		}
		q[name] = append(q[name], val)
	}
	for name, vals := range q {
		vals[0] = queryparam.Get(raw, name)
	}
	return q
}

// Authorize runs the chain, counts and logs the outcome, and returns the
// request's context carrying what was decided (and a logger naming the
// principal).
func (e *Env) Authorize(ctx context.Context, req domain.AuthRequest) (context.Context, error) {
	out, err := e.Chain.Authorize(ctx, req)
	return e.decided(ctx, req, out, err)
}

// authorizeWithoutBody is Authorize on a request described without its
// body (Chain.AuthorizeWithoutBody); when ok is false nothing was decided,
// counted or logged.
func (e *Env) authorizeWithoutBody(ctx context.Context, req domain.AuthRequest) (context.Context, bool, error) {
	out, ok, err := e.Chain.AuthorizeWithoutBody(ctx, req)
	if !ok {
		return ctx, false, nil
	}
	ctx, err = e.decided(ctx, req, out, err)
	return ctx, true, err
}

// decided counts and logs an outcome of the chain and returns the context
// carrying it. Requests with a principal, and refusals, are logged at
// info: an audit trail of who did what; anonymous requests on a daemon
// without a token at debug.
func (e *Env) decided(ctx context.Context, req domain.AuthRequest, out authz.Outcome, err error) (context.Context, error) {
	if e.CountAuth != nil {
		e.CountAuth(req.Action, out.Decision, out.By)
	}
	l := Logger(ctx)
	if out.Principal != "" {
		l = WithLazy(l, slog.String("principal", out.Principal))
		ctx = WithLogger(ctx, l)
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
			var de *domain.Error
			if errors.As(err, &de) {
				attrs = append(attrs, "status", ProblemFor(ctx, de).Status)
			} else {
				attrs = append(attrs, "err", err)
			}
		}
		l.Log(ctx, level, "auth", attrs...)
	}
	if err != nil {
		return ctx, err
	}
	s := authState{action: req.Action, principal: out.Principal, instance: req.Instance}
	if e.Streams != nil {
		s.judged = &judgedRequest{req: req, env: e, gen: e.Streams.gen.Load()}
	}
	return context.WithValue(ctx, authKey{}, s), nil
}

// WriteAuthProblem answers a refusal; a 401 says how to authenticate.
func WriteAuthProblem(w http.ResponseWriter, ctx context.Context, err error) {
	WriteProblem(w, authProblem(ctx, err))
}

// AuthError is a refusal returned from inside a huma handler, with the
// WWW-Authenticate header of a 401.
func AuthError(ctx context.Context, err error) error { return authProblem(ctx, err) }

// authProblem is the problem of a refusal; a 401 says how to authenticate.
func authProblem(ctx context.Context, err error) *Problem {
	p := ProblemFor(ctx, err)
	if p.Status == http.StatusUnauthorized {
		p = p.WithHeader("WWW-Authenticate", "Bearer")
	}
	return p
}

// RawDescribe is DescribeFunc for routes served outside huma.
type RawDescribe func(r *http.Request, c *authz.Chain, req *domain.AuthRequest)

// WithAuth runs the chain before a handler registered on the mux directly
// (a WebSocket or raw-byte route huma cannot express): route and opID name
// it to the policies, describe gives its action. Such routes must also be
// documented in the OpenAPI document under opID, so the walk in
// TestEveryOperationReachesTheChain covers them.
func (e *Env) WithAuth(route, opID string, describe RawDescribe, next http.Handler) http.Handler {
	if describe == nil {
		panic("httpapi: route " + route + " registered without an action")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := e.AuthRequest(r, r.Method, route, opID)
		describe(r, e.Chain, &req)
		ctx, err := e.Authorize(r.Context(), req)
		if err != nil {
			WriteAuthProblem(w, ctx, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// PresentedAuthorization is the bearer token a request presents, as an
// Authorization value: the header named by Env.TokenHeader when it is
// set and present (a router in front of the daemon, such as
// agent-sandbox's, drops Authorization, which carries its own token, and
// forwards this one; a value that is not "Bearer <token>" as
// domain.BearerToken reads it is taken as a bare token);
// else the Authorization header; else, on one of queryTokenRoutes only
// (WebSocket routes: browsers cannot set headers on one), its
// access_token query parameter. route is the template of the route the
// request reached ("" for none).
func (e *Env) PresentedAuthorization(r *http.Request, route string) string {
	if e.TokenHeader != "" {
		if h := r.Header.Get(e.TokenHeader); h != "" {
			if _, ok := domain.BearerToken(h); ok {
				return h
			}
			return "Bearer " + h
		}
	}
	if h := r.Header.Get("Authorization"); h != "" {
		return h
	}
	if upgradeOnly, ok := queryTokenRoutes[route]; ok && r.Method == http.MethodGet && (!upgradeOnly || IsWebSocketUpgrade(r)) {
		if t := r.URL.Query().Get("access_token"); t != "" {
			return "Bearer " + t
		}
	}
	return ""
}

// queryTokenRoutes are the routes that take the token as ?access_token=,
// since browsers cannot set headers on a WebSocket: the terminal, on any
// GET (as the reference reads it: a plain GET with the query's token gets
// the route's own answer, not 401), and /acp/{agent} on its upgrade only
// (its SSE GET is no WebSocket). They are told by the route's template,
// not by the request's path: the path of /v1/processes/x%2Fterminal%2Fws
// ends as the terminal's does, but it is the process route's (its id
// holds the '/'), and an unknown path under /acp is no route at all;
// neither takes a token from the URL.
var queryTokenRoutes = map[string]bool{ // template → upgrade only
	"/v1/processes/{id}/terminal/ws": false,
	"/acp/{agent}":                   true,
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
