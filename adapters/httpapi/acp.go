package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi/internal/route"
	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

type acpPostInput struct {
	route.RawRequest
	ServerID string `path:"server_id" doc:"Client-chosen id of the ACP server instance."`
	Agent    string `query:"agent" doc:"Agent to start on the first POST to a new server id."`
}

type acpStreamInput struct {
	route.RawRequest
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

func registerACP(api huma.API, cfg *Config) {
	route.Register(api, huma.Operation{
		OperationID: "get_v1_acp_servers", Method: http.MethodGet, Path: "/v1/acp",
		Summary: "List ACP server instances", Tags: []string{"acp"}, Security: route.Bearer,
	}, route.Act(domain.ActionACPRead), func(ctx context.Context, _ *struct{}) (*acpListOutput, error) {
		out := &acpListOutput{}
		out.Body.Servers = cfg.Instances.List()
		return out, nil
	})

	route.Register(api, huma.Operation{
		OperationID: "post_v1_acp", Method: http.MethodPost, Path: "/v1/acp/{server_id}",
		Summary:     "Send one JSON-RPC message to an ACP agent",
		Description: "Requests are answered with the agent's response (200), except asynchronous methods (202, response on the stream). Notifications and responses answer 202.",
		Tags:        []string{"acp"}, Security: route.Bearer,
		RequestBody: route.RawBody("application/json"),
		Metadata:    map[string]any{route.MetaDeferred: true},
		Responses: map[string]*huma.Response{
			"200": {Description: "The agent's response, byte for byte.", Content: map[string]*huma.MediaType{"application/json": {Schema: route.JSONObject}},
				Headers: map[string]*huma.Param{domain.EventIDHeader: {
					Description: "The id of the response's own event on the stream: a client that delivers in stream order may take the answer from here once it has read every event before it.",
					Schema:      &huma.Schema{Type: "integer", Format: "int64"},
				}}},
			"202": {Description: "Accepted; any response arrives on the stream."},
		},
	}, describeACPPost, func(ctx context.Context, in *acpPostInput) (*huma.StreamResponse, error) {
		body, charged, err := route.ACPPostBody(in.Request(), cfg.MaxACPBody, cfg.env.Budget)
		// The body counts against the budget until the POST is answered:
		// it is held while it waits for the agent's stdin, and its id
		// while a synchronous request waits for the response.
		defer cfg.env.Budget.Give(charged)
		if err != nil {
			return nil, err
		}
		compacted, err := route.ChargeCompaction(cfg.env.Budget, body)
		defer cfg.env.Budget.Give(compacted)
		if err != nil {
			return nil, err
		}
		frame, err := domain.ParseFrame(body)
		switch {
		case errors.Is(err, domain.ErrNotObject):
			return nil, route.Invalid("request body must be a JSON-RPC object")
		case errors.Is(err, domain.ErrAmbiguousKey):
			return nil, route.Invalid("ambiguous JSON-RPC message: %v", err)
		case err != nil:
			return nil, route.Invalid("invalid JSON body: %v", err)
		}
		if err := domain.CheckRequestID(frame); err != nil {
			return nil, route.Invalid("%v", err)
		}
		if !route.Settled(ctx) {
			if ctx, err = authorizeACPPost(ctx, cfg, in.Request(), in.ServerID, in.Agent, frame); err != nil {
				return nil, route.AuthError(ctx, err)
			}
		}
		answer, err := postJudged(ctx, cfg, in, frame)
		if err != nil {
			return nil, err
		}
		resp := route.RawResponse(answer.Data)
		if answer.EventID > 0 {
			write := resp.Body
			resp.Body = func(hctx huma.Context) {
				hctx.SetHeader(domain.EventIDHeader, strconv.FormatUint(answer.EventID, 10))
				write(hctx)
			}
		}
		return resp, nil
	})

	route.DocumentBody(api, "/v1/acp/{server_id}", http.MethodPost, "application/json", route.JSONObject)

	route.Register(api, huma.Operation{
		OperationID: "get_v1_acp", Method: http.MethodGet, Path: "/v1/acp/{server_id}",
		Summary:     "Stream an ACP agent's messages (Server-Sent Events)",
		Description: "Frames are `event: message`, `id: <seq>`, `data: <json>`. Replays buffered events after Last-Event-ID, then follows live; `: heartbeat` after 15 s idle; an `_adapter/replay_gap` frame without id marks evicted events.",
		Tags:        []string{"acp"}, Security: route.Bearer,
		Responses: map[string]*huma.Response{
			"200": {Description: "An endless event stream.", Content: map[string]*huma.MediaType{"text/event-stream": {Schema: &huma.Schema{Type: "string"}}}},
		},
	}, route.OnServer(domain.ActionACPRead), func(ctx context.Context, in *acpStreamInput) (*huma.StreamResponse, error) {
		if !route.Accepts(in.Request().Header.Get("Accept"), "text/event-stream") {
			return nil, domain.NotAcceptable("this endpoint only produces text/event-stream")
		}
		var after *uint64
		if in.LastEventID != "" {
			n, err := strconv.ParseUint(in.LastEventID, 10, 64)
			if err != nil {
				return nil, route.Invalid("Last-Event-ID must be a positive integer")
			}
			after = &n
		}
		cur, err := cfg.Instances.SubscribeJudged(in.ServerID, after, judged(ctx))
		if err != nil {
			return nil, err
		}
		return &huma.StreamResponse{Body: func(hctx huma.Context) {
			defer cur.Close()
			r, w := route.Unwrap(hctx)
			ctx, cancel := context.WithCancel(hctx.Context())
			defer cancel()
			defer route.Revocable(ctx, cancel)()
			cfg.env.StreamSSE(ctx, w, r, cur)
		}}, nil
	})

	route.Register(api, huma.Operation{
		OperationID: "delete_v1_acp", Method: http.MethodDelete, Path: "/v1/acp/{server_id}",
		Summary: "Stop an ACP server instance (idempotent)",
		Tags:    []string{"acp"}, Security: route.Bearer,
		DefaultStatus: http.StatusNoContent,
	}, route.OnServer(domain.ActionACPStop), func(ctx context.Context, in *acpDeleteInput) (*struct{}, error) {
		cfg.Instances.DeleteJudged(context.WithoutCancel(ctx), in.ServerID, judged(ctx))
		return nil, nil
	})

	route.Register(api, huma.Operation{
		OperationID: "get_v1_acp_stderr", Method: http.MethodGet, Path: "/v1/acp/{server_id}/stderr",
		Summary: "The agent's buffered stderr tail", Tags: []string{"acp"}, Security: route.Bearer,
	}, route.OnServer(domain.ActionACPRead), func(ctx context.Context, in *acpStderrInput) (*stderrOutput, error) {
		tail, err := cfg.Instances.StderrJudged(in.ServerID, judged(ctx))
		if err != nil {
			return nil, err
		}
		return &stderrOutput{ContentType: "text/plain; charset=utf-8", Body: []byte(tail)}, nil
	})
}

// judged is the instance the chain judged the request of ctx on (0: none),
// which a stream, stderr or DELETE of /v1/acp/{server_id} acts on only.
func judged(ctx context.Context) *acp.Judgement {
	return &acp.Judgement{Generation: route.JudgedInstance(ctx)}
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
func postJudged(ctx context.Context, cfg *Config, in *acpPostInput, frame domain.Frame) (acp.Answer, error) {
	for try := 0; ; try++ {
		resp, err := cfg.Instances.PostAnswer(ctx, acp.PostRequest{
			ServerID: in.ServerID,
			Agent:    in.Agent,
			HasAgent: in.Request().URL.Query().Has("agent"),
			Frame:    frame,
			Judged:   judged(ctx),
		})
		if !errors.Is(err, acp.ErrInstanceChanged) || try == maxRedecide {
			return resp, err
		}
		if ctx, err = authorizeACPPost(ctx, cfg, in.Request(), in.ServerID, in.Agent, frame); err != nil {
			return acp.Answer{}, route.AuthError(ctx, err)
		}
	}
}
