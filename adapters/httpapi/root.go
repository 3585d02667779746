package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi/internal/route"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

type healthOutput struct {
	Body struct {
		Status string `json:"status" example:"ok"`
	}
}

func registerRoot(mux *http.ServeMux, api huma.API, cfg *Config) {
	// "/" is exact here; as a huma path it would match every unknown route.
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"name":"Sandbox Agent","docs":"/docs"}`))
	})
	route.Register(api, huma.Operation{
		OperationID: opHealth, Method: http.MethodGet, Path: "/v1/health",
		Summary: "Health check", Tags: []string{"meta"}, Security: route.Bearer,
	}, route.Act(domain.ActionHealthRead), func(ctx context.Context, _ *struct{}) (*healthOutput, error) {
		out := &healthOutput{}
		out.Body.Status = "ok"
		return out, nil
	})

	// /v1/rpc was the transport before /v1/acp/{server_id}; tell old clients
	// where to go instead of a bare 404.
	adapter := api.Adapter()
	gone := func(ctx huma.Context) {
		r, w := route.Unwrap(ctx)
		if !tokenOnly(w, r, cfg) {
			return
		}
		p := route.ProblemFor(ctx.Context(), route.WithStatus(http.StatusGone, domain.InvalidRequest("/v1/rpc has been removed; use /v1/acp/{server_id}")))
		route.WriteProblem(w, p)
	}
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		adapter.Handle(&huma.Operation{Method: m, Path: "/v1/rpc"}, gone)
	}
}
