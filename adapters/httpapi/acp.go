package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

func unwrap(ctx huma.Context) (*http.Request, http.ResponseWriter) { return humago.Unwrap(ctx) }

// rawRequest gives a huma input access to the request itself, for routes
// that read their body as a stream of bytes.
type rawRequest struct{ req *http.Request }

func (r *rawRequest) Resolve(ctx huma.Context) []error {
	r.req, _ = unwrap(ctx)
	return nil
}

type acpPostInput struct {
	rawRequest
	ServerID string `path:"server_id" doc:"Client-chosen id of the ACP server instance."`
	Agent    string `query:"agent" doc:"Agent to start on the first POST to a new server id."`
}

type acpStreamInput struct {
	rawRequest
	ServerID    string `path:"server_id"`
	LastEventID string `header:"Last-Event-ID" doc:"Resume after this event id."`
}

type acpDeleteInput struct {
	ServerID string `path:"server_id"`
}

type acpStderrInput struct {
	ServerID string `path:"server_id"`
}

type acpListOutput struct {
	Body struct {
		Servers []acp.ServerInfo `json:"servers"`
	}
}

type stderrOutput struct {
	ContentType string `header:"Content-Type"`
	Body        []byte
}

var jsonObject = &huma.Schema{Type: "object", Description: "One JSON-RPC 2.0 message, passed through byte for byte."}

func registerACP(api huma.API, cfg *Config) {
	route(api, huma.Operation{
		OperationID: "get_v1_acp_servers", Method: http.MethodGet, Path: "/v1/acp",
		Summary: "List ACP server instances", Tags: []string{"acp"}, Security: bearer,
	}, act(domain.ActionACPRead), func(ctx context.Context, _ *struct{}) (*acpListOutput, error) {
		out := &acpListOutput{}
		out.Body.Servers = cfg.Instances.List()
		return out, nil
	})

	route(api, huma.Operation{
		OperationID: "post_v1_acp", Method: http.MethodPost, Path: "/v1/acp/{server_id}",
		Summary:     "Send one JSON-RPC message to an ACP agent",
		Description: "Requests are answered with the agent's response (200), except asynchronous methods (202, response on the stream). Notifications and responses answer 202.",
		Tags:        []string{"acp"}, Security: bearer,
		RequestBody: rawBody("application/json"),
		Metadata:    map[string]any{metaDeferred: true},
		Responses: map[string]*huma.Response{
			"200": {Description: "The agent's response, byte for byte.", Content: map[string]*huma.MediaType{"application/json": {Schema: jsonObject}}},
			"202": {Description: "Accepted; any response arrives on the stream."},
		},
	}, describeACPPost, withHeaders(func(ctx context.Context, in *acpPostInput) (*huma.StreamResponse, error) {
		body, charged, err := acpPostBody(in.req, cfg.MaxACPBody, cfg.inflight)
		// The body counts against the budget until the POST is answered:
		// it is held while it waits for the agent's stdin, and its id
		// while a synchronous request waits for the response.
		defer cfg.inflight.give(charged)
		if err != nil {
			return nil, err
		}
		compacted, err := chargeCompaction(cfg.inflight, body)
		defer cfg.inflight.give(compacted)
		if err != nil {
			return nil, err
		}
		frame, err := domain.ParseFrame(body)
		switch {
		case errors.Is(err, domain.ErrNotObject):
			return nil, invalid("request body must be a JSON-RPC object")
		case errors.Is(err, domain.ErrAmbiguousKey):
			return nil, invalid("ambiguous JSON-RPC message: %v", err)
		case err != nil:
			return nil, invalid("invalid JSON body: %v", err)
		}
		if !authOf(ctx).settled {
			if ctx, err = authorizeACPPost(ctx, cfg, in.req, in.ServerID, in.Agent, frame); err != nil {
				return nil, authError(ctx, err)
			}
		}
		resp, err := postJudged(ctx, cfg, in, frame)
		if err != nil {
			return nil, err
		}
		return rawResponse(resp), nil
	}))

	documentBody(api, "/v1/acp/{server_id}", http.MethodPost, "application/json", jsonObject)

	route(api, huma.Operation{
		OperationID: "get_v1_acp", Method: http.MethodGet, Path: "/v1/acp/{server_id}",
		Summary:     "Stream an ACP agent's messages (Server-Sent Events)",
		Description: "Frames are `event: message`, `id: <seq>`, `data: <json>`. Replays buffered events after Last-Event-ID, then follows live; `: heartbeat` after 15 s idle; an `_adapter/replay_gap` frame without id marks evicted events.",
		Tags:        []string{"acp"}, Security: bearer,
		Responses: map[string]*huma.Response{
			"200": {Description: "An endless event stream.", Content: map[string]*huma.MediaType{"text/event-stream": {Schema: &huma.Schema{Type: "string"}}}},
		},
	}, onServer(domain.ActionACPRead), func(ctx context.Context, in *acpStreamInput) (*huma.StreamResponse, error) {
		if !accepts(in.req.Header.Get("Accept"), "text/event-stream") {
			return nil, domain.NotAcceptable("this endpoint only produces text/event-stream")
		}
		var after *uint64
		if in.LastEventID != "" {
			n, err := strconv.ParseUint(in.LastEventID, 10, 64)
			if err != nil {
				return nil, invalid("Last-Event-ID must be a positive integer")
			}
			after = &n
		}
		cur, err := cfg.Instances.Subscribe(in.ServerID, after)
		if err != nil {
			return nil, err
		}
		return &huma.StreamResponse{Body: func(hctx huma.Context) {
			defer cur.Close()
			_, w := unwrap(hctx)
			streamSSE(hctx.Context(), w, cur, cfg)
		}}, nil
	})

	route(api, huma.Operation{
		OperationID: "delete_v1_acp", Method: http.MethodDelete, Path: "/v1/acp/{server_id}",
		Summary: "Stop an ACP server instance (idempotent)",
		Tags:    []string{"acp"}, Security: bearer,
		DefaultStatus: http.StatusNoContent,
	}, onServer(domain.ActionACPStop), func(ctx context.Context, in *acpDeleteInput) (*struct{}, error) {
		cfg.Instances.Delete(context.WithoutCancel(ctx), in.ServerID)
		return nil, nil
	})

	route(api, huma.Operation{
		OperationID: "get_v1_acp_stderr", Method: http.MethodGet, Path: "/v1/acp/{server_id}/stderr",
		Summary: "The agent's buffered stderr tail", Tags: []string{"acp"}, Security: bearer,
	}, onServer(domain.ActionACPRead), func(ctx context.Context, in *acpStderrInput) (*stderrOutput, error) {
		tail, err := cfg.Instances.Stderr(in.ServerID)
		if err != nil {
			return nil, err
		}
		return &stderrOutput{ContentType: "text/plain; charset=utf-8", Body: []byte(tail)}, nil
	})
}

// maxRedecide bounds how often a POST is judged again because its server
// id's instance changed between the decision and the post.
const maxRedecide = 3

// postJudged posts frame as the chain judged it (acp.Judgement): on the
// instance it was authorised against, or, judged as a start, only on an
// instance of its own. When the id's instance changed in between (another
// client started or replaced it), the request is described and decided
// again on what is there now (a send to that instance, with its agent) and
// posted with the new judgement; past maxRedecide it is a 409.
func postJudged(ctx context.Context, cfg *Config, in *acpPostInput, frame domain.Frame) ([]byte, error) {
	for try := 0; ; try++ {
		resp, err := cfg.Instances.Post(ctx, acp.PostRequest{
			ServerID: in.ServerID,
			Agent:    in.Agent,
			HasAgent: in.req.URL.Query().Has("agent"),
			Frame:    frame,
			Judged:   &acp.Judgement{Generation: authOf(ctx).instance},
		})
		if !errors.Is(err, acp.ErrInstanceChanged) || try == maxRedecide {
			return resp, err
		}
		if ctx, err = authorizeACPPost(ctx, cfg, in.req, in.ServerID, in.Agent, frame); err != nil {
			return nil, authError(ctx, err)
		}
	}
}

// withHeaders maps a handler's error to its problem inside the handler, for
// the kinds whose problem carries headers (Retry-After): huma takes response
// headers only from the error a handler returns, not from the one its error
// hook makes of it.
func withHeaders[I, O any](h func(context.Context, *I) (O, error)) func(context.Context, *I) (O, error) {
	return func(ctx context.Context, in *I) (O, error) {
		out, err := h(ctx, in)
		if e, ok := domain.AsError(err); ok && kindInfo[e.Kind].retryAfter != "" {
			return out, problemFor(ctx, err)
		}
		return out, err
	}
}

// rawBody declares a request body that the handler reads itself. It has no
// schema at registration, because huma reads and validates any body whose
// media type has one; documentBody adds the schema to the document after.
func rawBody(contentType string) *huma.RequestBody {
	return &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{contentType: {}}}
}

// documentBody sets the schema of a raw request body in the document only.
// The operation must be registered already, with rawBody(contentType).
func documentBody(api huma.API, path, method, contentType string, schema *huma.Schema) {
	item := api.OpenAPI().Paths[path]
	var op *huma.Operation
	if item != nil {
		op = map[string]*huma.Operation{
			http.MethodPost: item.Post, http.MethodPut: item.Put, http.MethodPatch: item.Patch,
			http.MethodDelete: item.Delete, http.MethodGet: item.Get,
		}[method]
	}
	if op == nil || op.RequestBody == nil || op.RequestBody.Content[contentType] == nil {
		panic("documentBody: no " + method + " " + path + " with a raw " + contentType + " body registered")
	}
	op.RequestBody.Content[contentType].Schema = schema
}

// acpPostBody applies the checks of api.md 4.1 in order (content type,
// accept, size) and reads the body.
// It returns what it charged to the in-flight budget, to be given back
// when the request is answered (also on error).
func acpPostBody(r *http.Request, limit int64, budget *inflight) ([]byte, int64, error) {
	if !isMediaType(r.Header.Get("Content-Type"), "application/json") {
		return nil, 0, domain.UnsupportedMedia("expected Content-Type: application/json")
	}
	if !accepts(r.Header.Get("Accept"), "application/json") {
		return nil, 0, domain.NotAcceptable("this endpoint only produces application/json")
	}
	return readCharged(r, limit, budget)
}

// rawResponse answers 200 with the agent's bytes, or 202 with no body.
func rawResponse(body []byte) *huma.StreamResponse {
	return &huma.StreamResponse{Body: func(ctx huma.Context) {
		if body == nil {
			ctx.SetStatus(http.StatusAccepted)
			return
		}
		ctx.SetHeader("Content-Type", "application/json")
		ctx.SetHeader("Content-Length", strconv.Itoa(len(body)))
		ctx.SetStatus(http.StatusOK)
		_, _ = ctx.BodyWriter().Write(body)
	}}
}
