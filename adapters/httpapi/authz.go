package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// The ACP POST is authorised in its handler, once its body is peeked.
const opPostACP = "post_v1_acp"

// useAuthorizer adds the policy step to every /v1 operation registered
// after it, when cfg.Authorizer is set (without one it adds nothing). It
// runs after the bearer check, inside huma, where the route and operation
// id are known. An SSE stream is authorised once, when it opens.
func useAuthorizer(api huma.API, cfg *Config) {
	if cfg.Authorizer == nil {
		return
	}
	api.UseMiddleware(func(hctx huma.Context, next func(huma.Context)) {
		op := hctx.Operation()
		if op == nil || op.OperationID == opPostACP || op.OperationID == opPostACPStd || !guarded(op.Path) {
			next(hctx)
			return
		}
		r, w := unwrap(hctx)
		req := authRequest(r, op.Method, op.Path, op.OperationID)
		req.ServerID = hctx.Param("server_id")
		req.Agent = hctx.Param("agent")
		if op.Path == acpStdPath {
			req.ServerID = hctx.Header(headerConnID)
		}
		if req.Agent == "" {
			req.Agent = r.URL.Query().Get("agent")
		}
		if err := authorize(r.Context(), cfg, req); err != nil {
			writeProblem(w, problemFor(r.Context(), err))
			return
		}
		next(hctx)
	})
}

// authorizeACPPost is the policy step of POST /v1/acp/{server_id}, with
// the JSON-RPC kind, id and method peeked from the body. The body itself
// is never shown to the policy.
func authorizeACPPost(ctx context.Context, cfg *Config, r *http.Request, serverID, agent string, f domain.Frame) error {
	if cfg.Authorizer == nil {
		return nil
	}
	req := authRequest(r, http.MethodPost, "/v1/acp/{server_id}", opPostACP)
	req.ServerID, req.Agent = serverID, agent
	req.RPC = &domain.RPCInfo{Kind: f.Kind.String(), ID: string(f.ID), Method: f.Method}
	return authorize(ctx, cfg, req)
}

// authRequest describes r to a policy; header names are lower-cased.
func authRequest(r *http.Request, method, route, opID string) domain.AuthRequest {
	headers := make(map[string][]string, len(r.Header)+1)
	for k, v := range r.Header {
		headers[strings.ToLower(k)] = v
	}
	if r.Host != "" {
		headers["host"] = []string{r.Host}
	}
	// The terminal socket's token may come as ?access_token=; policies see
	// it where they look for a bearer token.
	if _, ok := headers["authorization"]; !ok {
		if a := presentedAuthorization(r); a != "" {
			headers["authorization"] = []string{a}
		}
	}
	var query map[string][]string
	if r.URL.RawQuery != "" {
		query = r.URL.Query()
	}
	return domain.AuthRequest{
		Method: method, Route: route, OperationID: opID, Path: r.URL.Path,
		Query: query, Headers: headers, RemoteAddr: r.RemoteAddr,
	}
}

// authorize asks the policies and turns a deny into a permission_denied
// error with the policy's status and message.
func authorize(ctx context.Context, cfg *Config, req domain.AuthRequest) error {
	if req.Agent == "" && req.ServerID != "" {
		req.Agent = boundAgent(cfg, req.ServerID)
	}
	d, err := cfg.Authorizer.Authorize(ctx, req)
	if err != nil {
		return fmt.Errorf("authorize: %w", err)
	}
	if d.Allow {
		return nil
	}
	status, msg := d.Status, d.Message
	if status < 400 || status > 599 {
		status = http.StatusForbidden
	}
	if msg == "" {
		msg = "denied by policy"
	}
	return &domain.Error{Kind: domain.KindPermissionDenied, Status: status, Details: map[string]any{"message": msg}}
}

// boundAgent is the agent an existing server id runs, so a policy sees it
// on requests that do not name it (every POST after the first, streams,
// deletes).
func boundAgent(cfg *Config, serverID string) string {
	if cfg.Instances == nil {
		return ""
	}
	return cfg.Instances.AgentOf(serverID)
}
