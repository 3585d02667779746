package acpstd

import (
	"bytes"
	"context"
	"errors"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi/internal/route"
	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/app/authz"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// ACP's standard remote transport, the "Streamable HTTP & WebSocket
// Transport" RFD, at /acp/{agent}. A connection is an instance of the agent
// whose server id is the Acp-Connection-Id, so everything /v1/acp offers
// (listing, the inspector, metrics, DELETE, replay bounds, process
// hygiene) applies to it. Where the RFD text and the TypeScript SDK 2.4.0
// client differ, the SDK is followed: see docs/api.md section 9.

const (
	headerConnID    = "Acp-Connection-Id"
	headerSessionID = "Acp-Session-Id"
	// maxHeaderID bounds an Acp-Session-Id, as the TypeScript SDK's server
	// bounds ids (maxIdLength).
	maxHeaderID = 1024

	opPostACPStd = "post_acp"
	acpStdPath   = "/acp/{agent}"
)

type acpStdPostInput struct {
	route.RawRequest
	Agent        string `path:"agent" doc:"Agent to run (one instance per connection)."`
	ConnectionID string `header:"Acp-Connection-Id" doc:"The connection, from initialize's response. Absent only on initialize, which creates the connection."`
	SessionID    string `header:"Acp-Session-Id" doc:"The ACP session of a session-scoped message; must equal params.sessionId when both are present."`
}

type acpStdGetInput struct {
	route.RawRequest
	Agent        string `path:"agent"`
	ConnectionID string `header:"Acp-Connection-Id" doc:"The connection whose stream to open (not used on a WebSocket upgrade, which creates a connection)."`
	SessionID    string `header:"Acp-Session-Id" doc:"Open this session's stream instead of the connection's (as the TypeScript SDK does)."`
	LastEventID  string `header:"Last-Event-ID" doc:"Extension: resume after this event id."`
	Upgrade      string `header:"Upgrade" doc:"websocket: upgrade to a WebSocket carrying every message both ways."`
	AccessToken  string `query:"access_token" doc:"The bearer token on a WebSocket upgrade, for clients that cannot send headers (browsers' WebSocket)."`
}

type acpStdDeleteInput struct {
	route.RawRequest
	Agent        string `path:"agent"`
	ConnectionID string `header:"Acp-Connection-Id" doc:"The connection to end."`
}

// server is the transport: the settings every route family shares, and
// the ACP instances its connections are.
type server struct {
	env       *route.Env
	instances *acp.Instances
}

// Register adds the /acp/{agent} operations (POST, GET: SSE or WebSocket,
// DELETE) to api; their connections are instances of instances.
func Register(api huma.API, env *route.Env, instances *acp.Instances) {
	cfg := &server{env: env, instances: instances}
	connHeader := map[string]*huma.Param{headerConnID: {
		Description: "The connection id; also the server id under /v1/acp.",
		Schema:      &huma.Schema{Type: "string"},
	}}
	route.Register(api, huma.Operation{
		OperationID: opPostACPStd, Method: http.MethodPost, Path: acpStdPath,
		Summary: "Send one JSON-RPC message (ACP Streamable HTTP)",
		Description: "ACP's standard transport. `initialize` without `Acp-Connection-Id` starts an instance of the agent " +
			"and answers 200 with the agent's response and the `Acp-Connection-Id` header. Every other message carries " +
			"`Acp-Connection-Id` (and `Acp-Session-Id` when `params.sessionId` is set) and is answered 202 at once; " +
			"responses arrive on the GET stream. Batches are 501.",
		Tags: []string{"acp"}, Security: route.Bearer,
		RequestBody: route.RawBody("application/json"),
		Metadata:    map[string]any{route.MetaDeferred: true},
		Responses: map[string]*huma.Response{
			"200": {Description: "initialize: the agent's response, byte for byte.", Headers: connHeader,
				Content: map[string]*huma.MediaType{"application/json": {Schema: route.JSONObject}}},
			"202": {Description: "Accepted; any response arrives on the stream."},
		},
	}, describeACPStdPost, func(ctx context.Context, in *acpStdPostInput) (*huma.StreamResponse, error) {
		return postACPStd(ctx, cfg, in)
	})
	route.DocumentBody(api, acpStdPath, http.MethodPost, "application/json", route.JSONObject)

	route.Register(api, huma.Operation{
		OperationID: "get_acp", Method: http.MethodGet, Path: acpStdPath,
		Summary: "Open a connection's stream (SSE), or a WebSocket connection",
		Description: "With `Upgrade: websocket`: creates a connection (101 with `Acp-Connection-Id`); JSON-RPC in text frames " +
			"both ways, `initialize` first, binary frames ignored; closing the socket ends the connection. Otherwise an SSE " +
			"stream of the connection given by `Acp-Connection-Id` (`Accept` must include `text/event-stream`): the " +
			"connection's stream, or with `Acp-Session-Id` that session's stream. Each agent message goes out once, on its " +
			"session's stream when one is open, else on the connection's. One reader per stream (409). Events carry ids; " +
			"`Last-Event-ID` resumes (an extension of the RFD). A browser, which cannot set headers on a WebSocket, may give " +
			"the token of the upgrade as `?access_token=`.",
		Tags: []string{"acp"}, Security: route.Bearer,
		Responses: map[string]*huma.Response{
			"200": {Description: "An endless event stream.", Content: map[string]*huma.MediaType{"text/event-stream": {Schema: &huma.Schema{Type: "string"}}}},
			"101": {Description: "Switched to a WebSocket connection.", Headers: connHeader},
		},
	}, describeACPStdGet, func(ctx context.Context, in *acpStdGetInput) (*huma.StreamResponse, error) {
		if route.IsWebSocketUpgrade(in.Request()) {
			return acceptACPWebSocket(ctx, cfg, in)
		}
		return streamACPStd(cfg, in)
	})

	route.Register(api, huma.Operation{
		OperationID: "delete_acp", Method: http.MethodDelete, Path: acpStdPath,
		Summary: "End a connection (stops its agent instance)",
		Tags:    []string{"acp"}, Security: route.Bearer,
		DefaultStatus: http.StatusAccepted,
	}, onConn(domain.ActionACPStop), func(ctx context.Context, in *acpStdDeleteInput) (*struct{}, error) {
		if err := singleIDHeaders(in.Request()); err != nil {
			return nil, err
		}
		c, err := lookupConn(cfg, in.ConnectionID, in.Agent)
		if err != nil {
			return nil, err
		}
		c.Close(context.WithoutCancel(ctx))
		return nil, nil
	})
}

func postACPStd(ctx context.Context, cfg *server, in *acpStdPostInput) (*huma.StreamResponse, error) {
	if err := singleIDHeaders(in.Request()); err != nil {
		return nil, err
	}
	body, charged, err := route.ACPPostBody(in.Request(), cfg.env.MaxACPBody, cfg.env.Budget)
	// Charged to --inflight-bytes until the POST is answered, as on /v1/acp.
	defer cfg.env.Budget.Give(charged)
	if err != nil {
		return nil, err
	}
	compacted, err := route.ChargeCompaction(cfg.env.Budget, body)
	defer cfg.env.Budget.Give(compacted)
	if err != nil {
		return nil, err
	}
	frame, err := parseStdFrame(body)
	if err != nil {
		return nil, err
	}
	isInit := frame.Kind == domain.FrameRequest && frame.Method == "initialize"
	if in.ConnectionID == "" {
		if !isInit {
			return nil, route.Invalid("missing Acp-Connection-Id header (only initialize creates a connection)")
		}
		if ctx, err = authorizeStdPost(ctx, cfg, in.Request(), "", in.Agent, frame); err != nil {
			return nil, route.AuthError(ctx, err)
		}
		c, err := cfg.instances.Connect(ctx, in.Agent, acp.TransportHTTP)
		if err != nil {
			return nil, err
		}
		resp, err := c.Post(ctx, frame, "", true)
		if err != nil {
			c.Close(context.WithoutCancel(ctx))
			return nil, err
		}
		return &huma.StreamResponse{Body: func(hctx huma.Context) {
			hctx.SetHeader(headerConnID, c.ID())
			hctx.SetHeader("Content-Type", "application/json")
			hctx.SetHeader("Content-Length", strconv.Itoa(len(resp)))
			hctx.SetStatus(http.StatusOK)
			_, _ = hctx.BodyWriter().Write(resp)
		}}, nil
	}
	if isInit {
		return nil, route.Invalid("initialize is not allowed on an existing connection; omit Acp-Connection-Id to create one")
	}
	session, err := frameSession(in.SessionID, frame)
	if err != nil {
		return nil, err
	}
	// Authorised before the connection is looked up, so a refused caller
	// does not learn which connection ids exist.
	if ctx, err = authorizeStdPost(ctx, cfg, in.Request(), in.ConnectionID, in.Agent, frame); err != nil {
		return nil, route.AuthError(ctx, err)
	}
	c, err := lookupConn(cfg, in.ConnectionID, in.Agent)
	if err != nil {
		return nil, err
	}
	if _, err := c.Post(ctx, frame, session, false); err != nil {
		return nil, err
	}
	return route.RawResponse(nil), nil
}

// singleIDHeaders refuses a request giving Acp-Connection-Id or
// Acp-Session-Id more than once: the daemon reads the first, a proxy or a
// policy reading the headers could take another (the rule for
// Authorization).
func singleIDHeaders(r *http.Request) error {
	for _, h := range [...]string{"Acp-Connection-Id", headerSessionID} {
		if len(r.Header.Values(h)) > 1 {
			return route.Invalid("more than one %s header", h)
		}
	}
	return nil
}

// parseStdFrame checks one POSTed or WebSocket message: a JSON array is a
// batch (501, as the RFD says), anything else must be one JSON object.
func parseStdFrame(body []byte) (domain.Frame, error) {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		return domain.Frame{}, errBatch
	}
	frame, err := domain.ParseFrame(body)
	switch {
	case errors.Is(err, domain.ErrNotObject):
		return frame, route.Invalid("request body must be a JSON-RPC object")
	case errors.Is(err, domain.ErrAmbiguousKey):
		return frame, route.Invalid("ambiguous JSON-RPC message: %v", err)
	case err != nil:
		return frame, route.Invalid("invalid JSON body: %v", err)
	}
	if err := domain.CheckRequestID(frame); err != nil {
		return frame, route.Invalid("%v", err)
	}
	return frame, nil
}

var errBatch = route.WithStatus(http.StatusNotImplemented, domain.InvalidRequest("JSON-RPC batches are not supported"))

// frameSession is the ACP session a message belongs to: the Acp-Session-Id
// header, which must agree with params.sessionId when both are present and
// must be present when params.sessionId is (the RFD's session-scoped rule).
func frameSession(header string, f domain.Frame) (string, error) {
	if len(header) > maxHeaderID {
		return "", route.Invalid("Acp-Session-Id is longer than %d bytes", maxHeaderID)
	}
	var param string
	var has bool
	if f.Kind == domain.FrameRequest || f.Kind == domain.FrameNotification {
		param, has = domain.SessionID(f.Data)
	}
	switch {
	case has && header != "" && param != header:
		return "", route.Invalid("Acp-Session-Id %q does not match params.sessionId %q", header, param)
	case has && param != "" && header == "":
		return "", route.Invalid("missing Acp-Session-Id header for a message of session %q", param)
	case header != "":
		return header, nil
	}
	return param, nil
}

func lookupConn(cfg *server, id, agent string) (*acp.Conn, error) {
	if id == "" {
		return nil, route.Invalid("missing Acp-Connection-Id header")
	}
	c, err := cfg.instances.Conn(id, agent)
	if errors.Is(err, acp.ErrUnknownConnection) {
		return nil, route.WithStatus(http.StatusNotFound, acp.ErrUnknownConnection)
	}
	return c, err
}

// streamACPStd opens an SSE stream of a Streamable HTTP connection.
func streamACPStd(cfg *server, in *acpStdGetInput) (*huma.StreamResponse, error) {
	if !acceptsExactly(in.Request().Header.Get("Accept"), "text/event-stream") {
		return nil, domain.NotAcceptable("Accept must include text/event-stream")
	}
	if err := singleIDHeaders(in.Request()); err != nil {
		return nil, err
	}
	if len(in.SessionID) > maxHeaderID {
		return nil, route.Invalid("Acp-Session-Id is longer than %d bytes", maxHeaderID)
	}
	after, err := lastEventID(in.LastEventID)
	if err != nil {
		return nil, err
	}
	c, err := lookupConn(cfg, in.ConnectionID, in.Agent)
	if err != nil {
		return nil, err
	}
	if c.Transport() != acp.TransportHTTP {
		return nil, domain.Conflict("a WebSocket connection has no SSE streams")
	}
	st, err := c.OpenStream(in.SessionID, after)
	if err != nil {
		return nil, err
	}
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		defer st.Close()
		r, w := route.Unwrap(hctx)
		ctx, cancel := context.WithCancel(hctx.Context())
		defer cancel()
		defer route.Revocable(ctx, cancel)()
		cfg.env.StreamSSE(ctx, w, r, st)
	}}, nil
}

func lastEventID(v string) (*uint64, error) {
	if v == "" {
		return nil, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return nil, route.Invalid("Last-Event-ID must be a positive integer")
	}
	return &n, nil
}

// acceptsExactly reports whether an Accept header names mediaType itself
// (the RFD: Accept MUST include text/event-stream; wildcards do not count).
func acceptsExactly(header, mediaType string) bool {
	for _, part := range strings.Split(header, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || mt != mediaType {
			continue
		}
		if q, err := strconv.ParseFloat(strings.TrimSpace(params["q"]), 64); err == nil && q <= 0 {
			continue
		}
		return true
	}
	return false
}

// The auth chain on /acp/{agent}, as on /v1/acp: the resource is the
// connection id (as the server id) and the agent of the path. Creating a
// connection (the initialize POST without Acp-Connection-Id, a WebSocket
// upgrade) is acp.start, implying agent.install when the agent cannot run
// yet; any other POST, and each WebSocket text frame, is acp.send; the SSE
// GETs are acp.read; DELETE is acp.stop. A connection's agent must be the
// one of the path (else 404), so the path's agent is the one acted on.

// describeACPStd fills in a request on connection connID of agent: a
// start when there is no connection yet, else action a on it.
func describeACPStd(c *authz.Chain, r *domain.AuthRequest, a domain.Action, connID, agent string) {
	if connID == "" && a == domain.ActionACPStart {
		c.ACPPost(r, "", agent) // acp.start, implying agent.install if needed
		return
	}
	c.Agent(r, a, agent)
	r.ServerID = connID
}

// describeACPStdPost: a POST without Acp-Connection-Id can only create a
// connection (acp.start), any other is acp.send. With policies this is
// decided in the handler instead, with the JSON-RPC message peeked.
func describeACPStdPost(hctx huma.Context, c *authz.Chain, r *domain.AuthRequest) {
	connID, a := hctx.Header(headerConnID), domain.ActionACPSend
	if connID == "" {
		a = domain.ActionACPStart
	}
	describeACPStd(c, r, a, connID, hctx.Param("agent"))
}

// describeACPStdGet: a WebSocket upgrade creates a connection (acp.start);
// otherwise the GET opens a stream of one (acp.read).
func describeACPStdGet(hctx huma.Context, c *authz.Chain, r *domain.AuthRequest) {
	if req, _ := route.Unwrap(hctx); route.IsWebSocketUpgrade(req) {
		describeACPStd(c, r, domain.ActionACPStart, "", hctx.Param("agent"))
		return
	}
	onConn(domain.ActionACPRead)(hctx, c, r)
}

// onConn: action a on the connection of Acp-Connection-Id.
func onConn(a domain.Action) route.DescribeFunc {
	return func(hctx huma.Context, c *authz.Chain, r *domain.AuthRequest) {
		describeACPStd(c, r, a, hctx.Header(headerConnID), hctx.Param("agent"))
	}
}

// authorizeACPStd runs the chain on one standard-transport message when
// policies see it: a POST (deferred to the handler, as the /v1/acp POST
// is, so the JSON-RPC kind, id and method can be peeked), or a WebSocket
// text frame. Both are described as POST /acp/{agent} (post_acp), so one
// policy rule covers both transports: acp.start for the initialize POST
// that creates a connection (connID ""), acp.send for everything else.
// Without policies it does nothing: the middleware has checked the token.
// A POST the middleware settled (authState) is not asked about again.
func authorizeACPStd(ctx context.Context, cfg *server, r *http.Request, connID, agent string, f domain.Frame) (context.Context, error) {
	if !cfg.env.Chain.HasPolicies() {
		return ctx, nil
	}
	req := cfg.env.AuthRequest(r, http.MethodPost, acpStdPath, opPostACPStd)
	a := domain.ActionACPSend
	if connID == "" {
		a = domain.ActionACPStart
	}
	describeACPStd(cfg.env.Chain, &req, a, connID, agent)
	req.RPC = &domain.RPCInfo{Kind: f.Kind.String(), ID: string(f.ID), Method: f.Method}
	return cfg.env.Authorize(ctx, req)
}

// authorizeStdPost is authorizeACPStd for a POST, unless the middleware
// settled it.
func authorizeStdPost(ctx context.Context, cfg *server, r *http.Request, connID, agent string, f domain.Frame) (context.Context, error) {
	if route.Settled(ctx) {
		return ctx, nil
	}
	return authorizeACPStd(ctx, cfg, r, connID, agent, f)
}
