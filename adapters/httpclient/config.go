package httpclient

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// MCPConfig is GET /v1/config/mcp: the MCP server entry name of the
// project in dir (a missing entry is a *Problem of kind session_not_found).
func (c *Client) MCPConfig(ctx context.Context, dir, name string) (domain.MCPServerConfig, error) {
	b, err := c.configGet(ctx, "/v1/config/mcp", dir, "mcpName", name)
	if err != nil {
		return domain.MCPServerConfig{}, err
	}
	return domain.ParseMCPServerConfig(b)
}

// SetMCPConfig is PUT /v1/config/mcp: it creates or replaces the entry.
func (c *Client) SetMCPConfig(ctx context.Context, dir, name string, cfg domain.MCPServerConfig) error {
	return c.Do(ctx, http.MethodPut, "/v1/config/mcp", configQuery(dir, "mcpName", name), cfg, nil)
}

// DeleteMCPConfig is DELETE /v1/config/mcp (no error when absent).
func (c *Client) DeleteMCPConfig(ctx context.Context, dir, name string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/config/mcp", configQuery(dir, "mcpName", name), nil, nil)
}

// SkillsConfig is GET /v1/config/skills.
func (c *Client) SkillsConfig(ctx context.Context, dir, name string) (domain.SkillsConfig, error) {
	b, err := c.configGet(ctx, "/v1/config/skills", dir, "skillName", name)
	if err != nil {
		return domain.SkillsConfig{}, err
	}
	return domain.ParseSkillsConfig(b)
}

// SetSkillsConfig is PUT /v1/config/skills.
func (c *Client) SetSkillsConfig(ctx context.Context, dir, name string, cfg domain.SkillsConfig) error {
	return c.Do(ctx, http.MethodPut, "/v1/config/skills", configQuery(dir, "skillName", name), cfg, nil)
}

// DeleteSkillsConfig is DELETE /v1/config/skills (no error when absent).
func (c *Client) DeleteSkillsConfig(ctx context.Context, dir, name string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/config/skills", configQuery(dir, "skillName", name), nil, nil)
}

func configQuery(dir, key, name string) url.Values {
	return url.Values{"directory": {dir}, key: {name}}
}

func (c *Client) configGet(ctx context.Context, path, dir, key, name string) ([]byte, error) {
	var raw json.RawMessage
	err := c.Do(ctx, http.MethodGet, path, configQuery(dir, key, name), nil, &raw)
	return raw, err
}

// decodeBody decodes a JSON answer and closes it.
func decodeBody(resp *http.Response, out any) error {
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(out); err != nil {
		return err
	}
	return nil
}
