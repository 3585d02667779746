package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi/internal/route"
	"github.com/sandbox-agent-go/sandbox-agent/app/agents"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

type agentListInput struct {
	Config  bool `query:"config" doc:"When true, include version, path and configOptions (slower)."`
	NoCache bool `query:"no_cache" doc:"When true, probe agent versions again."`
}

type agentGetInput struct {
	Agent   string `path:"agent" doc:"Agent id."`
	Config  bool   `query:"config" doc:"When true, include version, path and configOptions (slower)."`
	NoCache bool   `query:"no_cache" doc:"When true, probe agent versions again."`
}

type agentListOutput struct {
	Body struct {
		Agents []domain.AgentInfo `json:"agents"`
	}
}

type agentGetOutput struct {
	Body domain.AgentInfo
}

type agentInstallInput struct {
	Agent string                 `path:"agent" doc:"Agent id."`
	Body  *domain.InstallOptions `required:"false"`
}

type agentInstallOutput struct {
	Body domain.InstallResult
}

func registerAgents(api huma.API, cfg *Config) {
	catalog := cfg.Catalog
	route.Register(api, huma.Operation{
		OperationID: "get_v1_agents", Method: http.MethodGet, Path: "/v1/agents",
		Summary: "List agents", Tags: []string{"agents"}, Security: route.Bearer,
		Description: "Known agents in a fixed order, then operator-defined and other installed agents.",
	}, route.Act(domain.ActionAgentRead), func(ctx context.Context, in *agentListInput) (*agentListOutput, error) {
		out := &agentListOutput{}
		out.Body.Agents = catalog.List(ctx, agents.CatalogQuery{Config: in.Config, NoCache: in.NoCache})
		return out, nil
	})

	route.Register(api, huma.Operation{
		OperationID: "get_v1_agent", Method: http.MethodGet, Path: "/v1/agents/{agent}",
		Summary: "Describe one agent", Tags: []string{"agents"}, Security: route.Bearer,
	}, route.OnAgent(domain.ActionAgentRead), func(ctx context.Context, in *agentGetInput) (*agentGetOutput, error) {
		info, err := catalog.Get(ctx, in.Agent, agents.CatalogQuery{Config: in.Config, NoCache: in.NoCache})
		if err != nil {
			return nil, err
		}
		return &agentGetOutput{Body: info}, nil
	})

	route.Register(api, huma.Operation{
		OperationID: "post_v1_agent_install", Method: http.MethodPost, Path: "/v1/agents/{agent}/install",
		Summary: "Install an agent", Tags: []string{"agents"}, Security: route.Bearer,
		Description: "Installs the agent's ACP adapter (from the ACP registry, else a pinned fallback) and, where needed, its native binary. Idempotent unless reinstall is set.",
	}, route.OnAgent(domain.ActionAgentInstall), func(ctx context.Context, in *agentInstallInput) (*agentInstallOutput, error) {
		var opts domain.InstallOptions
		if in.Body != nil {
			opts = *in.Body
		}
		// Once started, the install outlives a client that gives up (a
		// half-finished install helps nobody); waiting for its turn does
		// not.
		res, err := catalog.Install(agents.Detached(ctx), in.Agent, opts)
		if err != nil {
			return nil, err
		}
		return &agentInstallOutput{Body: res}, nil
	})
}
