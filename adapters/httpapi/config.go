package httpapi

import (
	"cmp"
	"context"
	"errors"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi/internal/route"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// The MCP and skills config routes of docs/api.md section 7. Entry bodies are
// read and normalised by domain.ParseMCPServerConfig/ParseSkillsConfig
// rather than by huma, so aliases, dropped unknown fields, output order and
// the 400 (not JSON) / 422 (wrong shape) split follow the reference.

// The two query structs differ only in the name parameter's tags (huma
// reads parameters from struct tags); everything else is configKind.
type mcpConfigInput struct {
	route.RawRequest
	Directory string `query:"directory" doc:"Target directory: absolute, or relative to the daemon's working directory."`
	Name      string `query:"mcpName" doc:"MCP entry name."`
	NameAlias string `query:"mcp_name" hidden:"true"`
}

type skillsConfigInput struct {
	route.RawRequest
	Directory string `query:"directory" doc:"Target directory: absolute, or relative to the daemon's working directory."`
	Name      string `query:"skillName" doc:"Skill entry name."`
	NameAlias string `query:"skill_name" hidden:"true"`
}

func (in *mcpConfigInput) query() (*http.Request, string, string) {
	return in.Request(), in.Directory, cmp.Or(in.Name, in.NameAlias)
}

func (in *skillsConfigInput) query() (*http.Request, string, string) {
	return in.Request(), in.Directory, cmp.Or(in.Name, in.NameAlias)
}

// configQuery is what the routes read of either query struct: the request,
// the directory and the entry name (the camelCase parameter, else its
// snake_case alias).
type configQuery interface {
	query() (r *http.Request, dir, name string)
}

// mcpConfigBody and skillsConfigBody give the domain values their
// documented schemas; they marshal through the domain's MarshalJSON.
type mcpConfigBody struct{ domain.MCPServerConfig }
type skillsConfigBody struct{ domain.SkillsConfig }

func (mcpConfigBody) Schema(huma.Registry) *huma.Schema    { return mcpServerConfigSchema }
func (skillsConfigBody) Schema(huma.Registry) *huma.Schema { return skillsConfigSchema }

type configOutput[B any] struct{ Body B }

var configTags = []string{"config"}

// maxConfigBody bounds one config entry.
const maxConfigBody = 1 << 20

// configKind is one kind of per-directory config entry (MCP servers,
// skills): its names, document and store. registerConfigKind serves both
// with one implementation, so their routes cannot drift apart. T is the
// domain value, B its documented body.
type configKind[T, B any] struct {
	name   string // path element and operation id suffix: "mcp", "skills"
	noun   string // in summaries: "MCP server", "skills"
	file   string // under <directory>/.sandbox-agent/config
	note   string // appended to the PUT's description
	schema *huma.Schema
	body   func(T) B
	parse  func([]byte) (T, error)
	check  func(dir, name string) error
	get    func(ctx context.Context, dir, name string) (T, error)
	set    func(ctx context.Context, dir, name string, v T) error
	del    func(ctx context.Context, dir, name string) error
	size   func(dir, file string) int64
}

// configReadCost is how many times its size reading a config file holds
// (the file, the entries decoded, the file written back or the entry
// answered): charged to the in-flight budget until the request is answered,
// so concurrent requests on large config files wait (503) instead of
// holding hundreds of megabytes each.
const configReadCost = 12

func registerConfig(api huma.API, cfg *Config) {
	store := cfg.Config
	registerConfigKind[mcpConfigInput](api, cfg, configKind[domain.MCPServerConfig, mcpConfigBody]{
		name: "mcp", noun: "MCP server", file: "mcp.json",
		note:   " `stdio` and `http` are accepted for `local` and `remote`; unknown fields are dropped.",
		schema: mcpServerConfigSchema,
		body:   func(c domain.MCPServerConfig) mcpConfigBody { return mcpConfigBody{c} },
		parse:  domain.ParseMCPServerConfig,
		check:  store.CheckMCP, get: store.MCP, set: store.SetMCP, del: store.DeleteMCP, size: store.FileSize,
	})
	registerConfigKind[skillsConfigInput](api, cfg, configKind[domain.SkillsConfig, skillsConfigBody]{
		name: "skills", noun: "skills", file: "skills.json",
		schema: skillsConfigSchema,
		body:   func(c domain.SkillsConfig) skillsConfigBody { return skillsConfigBody{c} },
		parse:  domain.ParseSkillsConfig,
		check:  store.CheckSkills, get: store.Skills, set: store.SetSkills, del: store.DeleteSkills, size: store.FileSize,
	})
	requiredInDocument(api, "directory", "/v1/config/mcp", "/v1/config/skills")
	requiredInDocument(api, "mcpName", "/v1/config/mcp")
	requiredInDocument(api, "skillName", "/v1/config/skills")
}

// registerConfigKind registers GET, PUT and DELETE of /v1/config/<name>.
// I is the kind's query struct (see configQuery).
func registerConfigKind[I any, PI interface {
	*I
	configQuery
}, T, B any](api huma.API, cfg *Config, k configKind[T, B]) {
	path := "/v1/config/" + k.name
	route.Register(api, huma.Operation{
		OperationID: "get_v1_config_" + k.name, Method: http.MethodGet, Path: path,
		Summary: "Read one " + k.noun + " entry of a directory", Tags: configTags, Security: route.Bearer,
		Errors: []int{http.StatusNotFound},
	}, route.OnDirectory(domain.ActionConfigRead), func(ctx context.Context, in *I) (*configOutput[B], error) {
		_, dir, name := PI(in).query()
		if err := route.Hold(ctx, configReadCost*k.size(dir, k.file)); err != nil {
			return nil, err
		}
		v, err := k.get(ctx, dir, name)
		if err != nil {
			return nil, err
		}
		return &configOutput[B]{Body: k.body(v)}, nil
	})

	route.Register(api, huma.Operation{
		OperationID: "put_v1_config_" + k.name, Method: http.MethodPut, Path: path,
		Summary:     "Store one " + k.noun + " entry of a directory",
		Description: "Upserts the entry in <directory>/.sandbox-agent/config/" + k.file + "." + k.note,
		Tags:        configTags, Security: route.Bearer,
		DefaultStatus: http.StatusNoContent,
		RequestBody:   route.RawBody("application/json"),
	}, route.OnDirectory(domain.ActionConfigWrite), func(ctx context.Context, in *I) (*struct{}, error) {
		r, dir, name := PI(in).query()
		if err := k.check(dir, name); err != nil {
			return nil, err
		}
		if err := route.Hold(ctx, configReadCost*k.size(dir, k.file)); err != nil {
			return nil, err
		}
		body, charged, err := configBody(r, cfg.env.Budget)
		defer cfg.env.Budget.Give(charged)
		if err != nil {
			return nil, err
		}
		v, err := k.parse(body)
		if err != nil {
			return nil, configParseError(err)
		}
		return nil, k.set(ctx, dir, name, v)
	})
	route.DocumentBody(api, path, http.MethodPut, "application/json", k.schema)

	route.Register(api, huma.Operation{
		OperationID: "delete_v1_config_" + k.name, Method: http.MethodDelete, Path: path,
		Summary: "Delete one " + k.noun + " entry of a directory (idempotent)", Tags: configTags, Security: route.Bearer,
		DefaultStatus: http.StatusNoContent,
	}, route.OnDirectory(domain.ActionConfigWrite), func(ctx context.Context, in *I) (*struct{}, error) {
		_, dir, name := PI(in).query()
		if err := route.Hold(ctx, configReadCost*k.size(dir, k.file)); err != nil {
			return nil, err
		}
		return nil, k.del(ctx, dir, name)
	})
}

// configBody checks the media type and reads a config entry body, charged
// to the in-flight budget until the request is answered (the caller gives
// back what it returns as charged, also on error).
func configBody(r *http.Request, budget *route.Inflight) ([]byte, int64, error) {
	if !route.IsMediaType(r.Header.Get("Content-Type"), "application/json") {
		return nil, 0, domain.UnsupportedMedia("expected Content-Type: application/json")
	}
	return route.ReadCharged(r, maxConfigBody, budget)
}

// configParseError: not JSON → 400, JSON of the wrong shape → 422, both
// invalid_request.
func configParseError(err error) error {
	if errors.Is(err, domain.ErrConfigSyntax) {
		return route.Invalid("invalid JSON body: %v", errors.Unwrap(err))
	}
	return route.WithStatus(http.StatusUnprocessableEntity, domain.InvalidRequest("%s", err.Error()))
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
