package domain

import (
	"encoding/json"
	"fmt"
)

// MCP server types, after aliases are resolved ("stdio" → local, "http" →
// remote).
const (
	MCPLocal  = "local"
	MCPRemote = "remote"
)

// MCPServerConfig is one MCP server entry of a directory's config
// (docs/api.md section 7): the reference's McpServerConfig, tagged by Type.
// Optional fields are nil when absent and then omitted from the output.
type MCPServerConfig struct {
	Type string

	// local
	Command MCPCommand
	Args    []string // always written, [] when absent
	Env     map[string]string
	Cwd     *string

	// remote
	URL               string
	Headers           map[string]string
	BearerTokenEnvVar *string
	EnvHeaders        map[string]string
	OAuth             *MCPOAuth
	Transport         *string // "http" or "sse"

	// both
	Enabled   *bool
	TimeoutMs *uint64
}

// MCPCommand is a local server's command: a string, or an array of strings
// (program and arguments), kept as the client wrote it.
type MCPCommand struct {
	Name   string
	List   []string
	IsList bool
}

// MarshalJSON writes the command back in the form it was given.
func (c MCPCommand) MarshalJSON() ([]byte, error) {
	if c.IsList {
		if c.List == nil {
			return []byte("[]"), nil
		}
		return encodeJSON(c.List), nil
	}
	return encodeJSON(c.Name), nil
}

// MCPOAuth is a remote server's oauth setting: either a bool (Disabled set)
// or an object with optional clientId, clientSecret and scope.
type MCPOAuth struct {
	Disabled     *bool
	ClientID     *string
	ClientSecret *string
	Scope        *string
}

// MarshalJSON writes the bool, or the object with its fields in order.
func (o MCPOAuth) MarshalJSON() ([]byte, error) {
	if o.Disabled != nil {
		return encodeJSON(*o.Disabled), nil
	}
	var w orderedJSON
	if o.ClientID != nil {
		w.field("clientId", *o.ClientID)
	}
	if o.ClientSecret != nil {
		w.field("clientSecret", *o.ClientSecret)
	}
	if o.Scope != nil {
		w.field("scope", *o.Scope)
	}
	return w.bytes(), nil
}

// ParseMCPServerConfig reads one MCP server entry: aliases resolved,
// unknown fields dropped. Errors wrapping ErrConfigSyntax mean b is not
// JSON; others mean JSON of the wrong shape, with a message for the client.
func ParseMCPServerConfig(b []byte) (MCPServerConfig, error) {
	obj, err := decodeObject(b)
	if err != nil {
		return MCPServerConfig{}, err
	}
	var c MCPServerConfig
	raw, ok, err := obj.get("type")
	if err != nil {
		return c, err
	}
	if !ok {
		return c, fmt.Errorf("missing field `type`")
	}
	typ, err := decodeString("type", raw)
	if err != nil {
		return c, err
	}
	switch typ {
	case "local", "stdio":
		c.Type = MCPLocal
		err = c.parseLocal(obj)
	case "remote", "http":
		c.Type = MCPRemote
		err = c.parseRemote(obj)
	default:
		return c, fmt.Errorf("unknown variant `%s`, expected one of `local`, `stdio`, `remote`, `http`", typ)
	}
	if err != nil {
		return MCPServerConfig{}, err
	}
	if c.Enabled, err = decodeOptBool(obj, "enabled"); err != nil {
		return MCPServerConfig{}, err
	}
	if c.TimeoutMs, err = decodeOptUint(obj, "timeoutMs", "timeout"); err != nil {
		return MCPServerConfig{}, err
	}
	return c, nil
}

func (c *MCPServerConfig) parseLocal(obj *jsonObject) error {
	raw, ok, err := obj.get("command")
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("missing field `command`")
	}
	switch kindOf(raw) {
	case "string":
		name, err := decodeString("command", raw)
		if err != nil {
			return err
		}
		c.Command = MCPCommand{Name: name}
	case "array":
		list, err := decodeStrings("command", raw)
		if err != nil {
			return err
		}
		c.Command = MCPCommand{List: list, IsList: true}
	default:
		return fieldErr("command", wantType(raw, "a string or an array of strings"))
	}
	c.Args = []string{}
	if raw, ok, err := obj.get("args"); err != nil {
		return err
	} else if ok {
		if c.Args, err = decodeStrings("args", raw); err != nil {
			return err
		}
	}
	if c.Env, err = decodeOptStringMap(obj, "env", "environment"); err != nil {
		return err
	}
	c.Cwd, err = decodeOptString(obj, "cwd")
	return err
}

func (c *MCPServerConfig) parseRemote(obj *jsonObject) error {
	raw, ok, err := obj.get("url")
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("missing field `url`")
	}
	if c.URL, err = decodeString("url", raw); err != nil {
		return err
	}
	if c.Headers, err = decodeOptStringMap(obj, "headers"); err != nil {
		return err
	}
	if c.BearerTokenEnvVar, err = decodeOptString(obj, "bearerTokenEnvVar", "bearer_token_env_var"); err != nil {
		return err
	}
	if c.EnvHeaders, err = decodeOptStringMap(obj, "envHeaders", "envHttpHeaders", "env_http_headers"); err != nil {
		return err
	}
	if c.OAuth, err = parseOAuth(obj); err != nil {
		return err
	}
	if c.Transport, err = decodeOptString(obj, "transport"); err != nil {
		return err
	}
	if c.Transport != nil && *c.Transport != "http" && *c.Transport != "sse" {
		return fmt.Errorf("transport: unknown variant `%s`, expected `http` or `sse`", *c.Transport)
	}
	return nil
}

func parseOAuth(obj *jsonObject) (*MCPOAuth, error) {
	raw, ok, err := obj.get("oauth")
	if err != nil || !ok {
		return nil, err
	}
	switch kindOf(raw) {
	case "boolean":
		var b bool
		_ = json.Unmarshal(raw, &b)
		return &MCPOAuth{Disabled: &b}, nil
	case "object":
		o, err := objectOf(raw)
		if err != nil {
			return nil, fieldErr("oauth", err)
		}
		var out MCPOAuth
		if out.ClientID, err = decodeOptString(o, "clientId"); err != nil {
			return nil, fieldErr("oauth", err)
		}
		if out.ClientSecret, err = decodeOptString(o, "clientSecret"); err != nil {
			return nil, fieldErr("oauth", err)
		}
		if out.Scope, err = decodeOptString(o, "scope"); err != nil {
			return nil, fieldErr("oauth", err)
		}
		return &out, nil
	}
	return nil, fieldErr("oauth", wantType(raw, "an object or a boolean"))
}

// MarshalJSON writes the entry with "type" first and the other fields in
// the reference's order; absent optional fields are omitted.
func (c MCPServerConfig) MarshalJSON() ([]byte, error) {
	var w orderedJSON
	w.field("type", c.Type)
	switch c.Type {
	case MCPLocal:
		w.field("command", c.Command)
		args := c.Args
		if args == nil {
			args = []string{}
		}
		w.field("args", args)
		if c.Env != nil {
			w.field("env", c.Env)
		}
		if c.Enabled != nil {
			w.field("enabled", *c.Enabled)
		}
		if c.TimeoutMs != nil {
			w.field("timeoutMs", *c.TimeoutMs)
		}
		if c.Cwd != nil {
			w.field("cwd", *c.Cwd)
		}
	case MCPRemote:
		w.field("url", c.URL)
		if c.Headers != nil {
			w.field("headers", c.Headers)
		}
		if c.BearerTokenEnvVar != nil {
			w.field("bearerTokenEnvVar", *c.BearerTokenEnvVar)
		}
		if c.EnvHeaders != nil {
			w.field("envHeaders", c.EnvHeaders)
		}
		if c.OAuth != nil {
			w.field("oauth", *c.OAuth)
		}
		if c.Enabled != nil {
			w.field("enabled", *c.Enabled)
		}
		if c.TimeoutMs != nil {
			w.field("timeoutMs", *c.TimeoutMs)
		}
		if c.Transport != nil {
			w.field("transport", *c.Transport)
		}
	default:
		return nil, fmt.Errorf("mcp server config: unknown type %q", c.Type)
	}
	return w.bytes(), nil
}
