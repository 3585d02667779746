package httpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Client talks to one daemon.
type Client struct {
	// BaseURL is the daemon's address, e.g. http://127.0.0.1:2468.
	BaseURL string
	// Token is sent as a bearer token when set.
	Token string
	// HTTP is the client to use; nil means one with bounded connect and
	// header timeouts (bodies are bounded by the caller's context).
	HTTP *http.Client
}

// Problem is an application/problem+json answer of the daemon.
type Problem struct {
	Status  int            `json:"status"`
	Type    string         `json:"type"`
	Title   string         `json:"title"`
	Detail  string         `json:"detail"`
	Agent   string         `json:"agent,omitempty"`
	Details map[string]any `json:"details,omitempty"`
}

func (p *Problem) Error() string {
	msg := fmt.Sprintf("%d %s", p.Status, p.Detail)
	if s, ok := p.Details["stderr"].(string); ok && s != "" {
		msg += "\n" + s
	} else if s, ok := p.Details["message"].(string); ok && s != "" && !strings.Contains(p.Detail, s) {
		msg += ": " + s
	}
	return msg
}

var defaultHTTP = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	ResponseHeaderTimeout: 0, // installs answer when they are done
	IdleConnTimeout:       30 * time.Second,
}}

// Do sends a request with an optional JSON body and decodes a JSON answer
// into out (when out is non-nil). Non-2xx answers are *Problem errors.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	resp, err := c.Send(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// Send sends a request and returns a 2xx response for the caller to read
// and close; any other answer is returned as a *Problem error.
func (c *Client) Send(ctx context.Context, method, path string, query url.Values, body any) (*http.Response, error) {
	u := strings.TrimRight(c.BaseURL, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	return c.finish(req)
}

// finish authenticates and sends req; non-2xx answers become *Problem errors.
func (c *Client) finish(req *http.Request) (*http.Response, error) {
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	p := &Problem{}
	if json.Unmarshal(b, p) != nil || p.Status == 0 {
		p = &Problem{Status: resp.StatusCode, Detail: strings.TrimSpace(string(b))}
	}
	return nil, p
}

// ListAgents is GET /v1/agents.
func (c *Client) ListAgents(ctx context.Context, config, noCache bool) ([]domain.AgentInfo, error) {
	var out struct {
		Agents []domain.AgentInfo `json:"agents"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/agents", agentQuery(config, noCache), nil, &out)
	return out.Agents, err
}

// Agent is GET /v1/agents/{agent}.
func (c *Client) Agent(ctx context.Context, agent string, config, noCache bool) (domain.AgentInfo, error) {
	var out domain.AgentInfo
	err := c.Do(ctx, http.MethodGet, "/v1/agents/"+url.PathEscape(agent), agentQuery(config, noCache), nil, &out)
	return out, err
}

// InstallAgent is POST /v1/agents/{agent}/install.
func (c *Client) InstallAgent(ctx context.Context, agent string, opts domain.InstallOptions) (domain.InstallResult, error) {
	var out domain.InstallResult
	err := c.Do(ctx, http.MethodPost, "/v1/agents/"+url.PathEscape(agent)+"/install", nil, opts, &out)
	return out, err
}

func agentQuery(config, noCache bool) url.Values {
	q := url.Values{}
	if config {
		q.Set("config", "true")
	}
	if noCache {
		q.Set("no_cache", "true")
	}
	return q
}
