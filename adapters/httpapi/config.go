package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// The MCP and skills config routes of api.md section 7. Entry bodies are
// read and normalised by domain.ParseMCPServerConfig/ParseSkillsConfig
// rather than by huma, so aliases, dropped unknown fields, output order and
// the 400 (not JSON) / 422 (wrong shape) split follow the reference.

type mcpConfigInput struct {
	rawRequest
	Directory string `query:"directory" doc:"Target directory: absolute, or relative to the daemon's working directory."`
	Name      string `query:"mcpName" doc:"MCP entry name."`
	NameAlias string `query:"mcp_name" hidden:"true"`
}

func (in *mcpConfigInput) name() string {
	if in.Name == "" {
		return in.NameAlias
	}
	return in.Name
}

type skillsConfigInput struct {
	rawRequest
	Directory string `query:"directory" doc:"Target directory: absolute, or relative to the daemon's working directory."`
	Name      string `query:"skillName" doc:"Skill entry name."`
	NameAlias string `query:"skill_name" hidden:"true"`
}

func (in *skillsConfigInput) name() string {
	if in.Name == "" {
		return in.NameAlias
	}
	return in.Name
}

// mcpConfigBody and skillsConfigBody give the domain values their
// documented schemas; they marshal through the domain's MarshalJSON.
type mcpConfigBody struct{ domain.MCPServerConfig }
type skillsConfigBody struct{ domain.SkillsConfig }

func (mcpConfigBody) Schema(huma.Registry) *huma.Schema    { return mcpServerConfigSchema }
func (skillsConfigBody) Schema(huma.Registry) *huma.Schema { return skillsConfigSchema }

type mcpConfigOutput struct{ Body mcpConfigBody }
type skillsConfigOutput struct{ Body skillsConfigBody }

var configTags = []string{"config"}

// maxConfigBody bounds one config entry.
const maxConfigBody = 1 << 20

func registerConfig(api huma.API, cfg *Config) {
	store := cfg.Config

	route(api, huma.Operation{
		OperationID: "get_v1_config_mcp", Method: http.MethodGet, Path: "/v1/config/mcp",
		Summary: "Read one MCP server entry of a directory", Tags: configTags, Security: bearer,
		Errors: []int{http.StatusNotFound},
	}, onDirectory(domain.ActionConfigRead), func(ctx context.Context, in *mcpConfigInput) (*mcpConfigOutput, error) {
		c, err := store.MCP(ctx, in.Directory, in.name())
		if err != nil {
			return nil, err
		}
		return &mcpConfigOutput{Body: mcpConfigBody{c}}, nil
	})

	route(api, huma.Operation{
		OperationID: "put_v1_config_mcp", Method: http.MethodPut, Path: "/v1/config/mcp",
		Summary:     "Store one MCP server entry of a directory",
		Description: "Upserts the entry in <directory>/.sandbox-agent/config/mcp.json. `stdio` and `http` are accepted for `local` and `remote`; unknown fields are dropped.",
		Tags:        configTags, Security: bearer,
		DefaultStatus: http.StatusNoContent,
		RequestBody:   rawBody("application/json"),
	}, onDirectory(domain.ActionConfigWrite), func(ctx context.Context, in *mcpConfigInput) (*struct{}, error) {
		if err := store.CheckMCP(in.Directory, in.name()); err != nil {
			return nil, err
		}
		body, charged, err := configBody(in.req, cfg.inflight)
		defer cfg.inflight.give(charged)
		if err != nil {
			return nil, err
		}
		c, err := domain.ParseMCPServerConfig(body)
		if err != nil {
			return nil, configParseError(err)
		}
		return nil, store.SetMCP(ctx, in.Directory, in.name(), c)
	})
	documentBody(api, "/v1/config/mcp", http.MethodPut, "application/json", mcpServerConfigSchema)

	route(api, huma.Operation{
		OperationID: "delete_v1_config_mcp", Method: http.MethodDelete, Path: "/v1/config/mcp",
		Summary: "Delete one MCP server entry of a directory (idempotent)", Tags: configTags, Security: bearer,
		DefaultStatus: http.StatusNoContent,
	}, onDirectory(domain.ActionConfigWrite), func(ctx context.Context, in *mcpConfigInput) (*struct{}, error) {
		return nil, store.DeleteMCP(ctx, in.Directory, in.name())
	})

	route(api, huma.Operation{
		OperationID: "get_v1_config_skills", Method: http.MethodGet, Path: "/v1/config/skills",
		Summary: "Read one skills entry of a directory", Tags: configTags, Security: bearer,
		Errors: []int{http.StatusNotFound},
	}, onDirectory(domain.ActionConfigRead), func(ctx context.Context, in *skillsConfigInput) (*skillsConfigOutput, error) {
		c, err := store.Skills(ctx, in.Directory, in.name())
		if err != nil {
			return nil, err
		}
		return &skillsConfigOutput{Body: skillsConfigBody{c}}, nil
	})

	route(api, huma.Operation{
		OperationID: "put_v1_config_skills", Method: http.MethodPut, Path: "/v1/config/skills",
		Summary:     "Store one skills entry of a directory",
		Description: "Upserts the entry in <directory>/.sandbox-agent/config/skills.json.",
		Tags:        configTags, Security: bearer,
		DefaultStatus: http.StatusNoContent,
		RequestBody:   rawBody("application/json"),
	}, onDirectory(domain.ActionConfigWrite), func(ctx context.Context, in *skillsConfigInput) (*struct{}, error) {
		if err := store.CheckSkills(in.Directory, in.name()); err != nil {
			return nil, err
		}
		body, charged, err := configBody(in.req, cfg.inflight)
		defer cfg.inflight.give(charged)
		if err != nil {
			return nil, err
		}
		c, err := domain.ParseSkillsConfig(body)
		if err != nil {
			return nil, configParseError(err)
		}
		return nil, store.SetSkills(ctx, in.Directory, in.name(), c)
	})
	documentBody(api, "/v1/config/skills", http.MethodPut, "application/json", skillsConfigSchema)

	route(api, huma.Operation{
		OperationID: "delete_v1_config_skills", Method: http.MethodDelete, Path: "/v1/config/skills",
		Summary: "Delete one skills entry of a directory (idempotent)", Tags: configTags, Security: bearer,
		DefaultStatus: http.StatusNoContent,
	}, onDirectory(domain.ActionConfigWrite), func(ctx context.Context, in *skillsConfigInput) (*struct{}, error) {
		return nil, store.DeleteSkills(ctx, in.Directory, in.name())
	})

	requiredInDocument(api, "directory", "/v1/config/mcp", "/v1/config/skills")
	requiredInDocument(api, "mcpName", "/v1/config/mcp")
	requiredInDocument(api, "skillName", "/v1/config/skills")
}

// configBody checks the media type and reads a config entry body, charged
// to the in-flight budget until the request is answered (the caller gives
// back what it returns as charged, also on error).
func configBody(r *http.Request, budget *inflight) ([]byte, int64, error) {
	if !isMediaType(r.Header.Get("Content-Type"), "application/json") {
		return nil, 0, domain.UnsupportedMedia("expected Content-Type: application/json")
	}
	return readCharged(r, maxConfigBody, budget)
}

// configParseError: not JSON → 400, JSON of the wrong shape → 422, both
// invalid_request.
func configParseError(err error) error {
	if errors.Is(err, domain.ErrConfigSyntax) {
		return invalid("invalid JSON body: %v", errors.Unwrap(err))
	}
	return withStatus(http.StatusUnprocessableEntity, domain.InvalidRequest("%s", err.Error()))
}

var stringMapSchema = &huma.Schema{Type: "object", AdditionalProperties: &huma.Schema{Type: "string"}}

var mcpServerConfigSchema = &huma.Schema{
	Description: "An MCP server, tagged by `type`. Input aliases: `stdio` for `local`, `http` for `remote`, `environment` for `env`, `timeout` for `timeoutMs`, `bearer_token_env_var`, `envHttpHeaders`/`env_http_headers` for `envHeaders`.",
	OneOf: []*huma.Schema{
		{
			Type:     "object",
			Required: []string{"type", "command"},
			Properties: map[string]*huma.Schema{
				"type":      {Type: "string", Enum: []any{"local"}},
				"command":   {OneOf: []*huma.Schema{{Type: "string"}, {Type: "array", Items: &huma.Schema{Type: "string"}}}},
				"args":      {Type: "array", Items: &huma.Schema{Type: "string"}},
				"env":       stringMapSchema,
				"enabled":   {Type: "boolean"},
				"timeoutMs": {Type: "integer", Format: "int64", Minimum: minZero},
				"cwd":       {Type: "string"},
			},
		},
		{
			Type:     "object",
			Required: []string{"type", "url"},
			Properties: map[string]*huma.Schema{
				"type":              {Type: "string", Enum: []any{"remote"}},
				"url":               {Type: "string"},
				"headers":           stringMapSchema,
				"bearerTokenEnvVar": {Type: "string"},
				"envHeaders":        stringMapSchema,
				"oauth": {OneOf: []*huma.Schema{
					{Type: "object", Properties: map[string]*huma.Schema{
						"clientId": {Type: "string"}, "clientSecret": {Type: "string"}, "scope": {Type: "string"},
					}},
					{Type: "boolean"},
				}},
				"enabled":   {Type: "boolean"},
				"timeoutMs": {Type: "integer", Format: "int64", Minimum: minZero},
				"transport": {Type: "string", Enum: []any{"http", "sse"}},
			},
		},
	},
}

var skillsConfigSchema = &huma.Schema{
	Type:     "object",
	Required: []string{"sources"},
	Properties: map[string]*huma.Schema{
		"sources": {Type: "array", Items: &huma.Schema{
			Type:     "object",
			Required: []string{"type", "source"},
			Properties: map[string]*huma.Schema{
				"type":    {Type: "string"},
				"source":  {Type: "string"},
				"skills":  {Type: "array", Items: &huma.Schema{Type: "string"}},
				"ref":     {Type: "string"},
				"subpath": {Type: "string"},
			},
		}},
	},
}

var minZero = func() *float64 { z := 0.0; return &z }()
