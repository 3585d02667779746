package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandbox-agent-go/sandbox-agent/app/authz"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// The auth chain on the HTTP side lives in internal/route (Register, the
// describe functions, the middleware, Env.Authorize); what is here is
// /v1/acp's own part of it.

// describeACPPost: acp.send to an existing instance, else acp.start (with
// agent.install when the agent is not installed).
func describeACPPost(hctx huma.Context, c *authz.Chain, r *domain.AuthRequest) {
	c.ACPPost(r, hctx.Param("server_id"), hctx.Query("agent"))
}

// authorizeACPPost is the chain for POST /v1/acp/{server_id} when
// policies run, with the JSON-RPC kind, id and method peeked from the
// body. The body itself is never shown to a policy.
func authorizeACPPost(ctx context.Context, cfg *Config, r *http.Request, serverID, agent string, f domain.Frame) (context.Context, error) {
	req := cfg.env.AuthRequest(r, http.MethodPost, "/v1/acp/{server_id}", opPostACP)
	cfg.env.Chain.ACPPost(&req, serverID, agent)
	req.RPC = &domain.RPCInfo{Kind: f.Kind.String(), ID: string(f.ID), Method: f.Method}
	return cfg.env.Authorize(ctx, req)
}

const (
	opPostACP = "post_v1_acp"
	opHealth  = "get_v1_health"
)
