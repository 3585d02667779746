package httpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
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
	// TokenHeader, when set, is the header Token is sent in (bare) instead
	// of Authorization: the daemon's --token-header, for a router in front
	// of it that drops Authorization (Router defaults it).
	TokenHeader string
	// Router, when set, sends every request through a router in front of
	// many sandboxes, such as kubernetes-sigs/agent-sandbox's
	// sandbox-router: BaseURL is then the router's address.
	Router *Router
	// HTTP is the client to use; nil means the package's default, whose
	// connects are bounded (answers are bounded by the caller's context). A
	// caller's Transport needs ExpectContinueTimeout set for the daemon
	// to refuse a large ACP message before its body is sent.
	HTTP *http.Client
}

// Router names the sandbox a request is for, to a router that picks it by
// headers (agent-sandbox's sandbox-router: X-Sandbox-ID, X-Sandbox-Namespace,
// X-Sandbox-Port), and carries the router's own credential. Such a router
// checks its own bearer token and drops Authorization before proxying, so
// the daemon's token travels in another header: Client.TokenHeader, or
// DefaultTokenHeader when that is empty (the daemon runs with
// --token-header set to the same name).
type Router struct {
	SandboxID string // X-Sandbox-ID: the sandbox's name (required)
	Namespace string // X-Sandbox-Namespace; empty: the router's default
	Port      int    // X-Sandbox-Port: the daemon's port; 0: the router's default (8888)
	Token     string // the router's bearer token, sent as Authorization
}

// DefaultTokenHeader is the header the daemon's token goes in behind a
// Router when Client.TokenHeader is empty.
const DefaultTokenHeader = "X-Sandbox-Agent-Token"

// Problem is a non-2xx answer of the daemon: its application/problem+json
// document (RFC 9457), or for an answer that is not one (a proxy's error
// page, say), the status and the body's text as Detail. Every call of this
// package returns it as an error, wrapped or not; get it with errors.As:
//
//	var p *httpclient.Problem
//	if errors.As(err, &p) && p.Kind() == "session_not_found" { ... }
//
// The kinds and their statuses are the daemon's error table (docs/api.md):
// 400 invalid_request, 401 token_invalid, 403 permission_denied, 404
// not_found or session_not_found, 409 conflict, 413 payload_too_large, 429
// too_many_instances or too_many_requests, 503 overloaded, 504 timeout, ...
// A Problem is always the daemon's (or a proxy's) answer: a context that
// ended, or a daemon that could not be reached, is never one.
type Problem struct {
	Status    int            `json:"status"`              // the HTTP status
	Type      string         `json:"type"`                // urn:sandbox-agent:error:<kind>; see Kind
	Title     string         `json:"title"`               // the kind's title, e.g. "Session Not Found"
	Detail    string         `json:"detail"`              // the daemon's message, e.g. "session not found: s1"
	Agent     string         `json:"agent,omitempty"`     // the agent concerned, for agent errors
	SessionID string         `json:"sessionId,omitempty"` // the instance or config entry concerned
	Details   map[string]any `json:"details,omitempty"`   // the kind's facts: message, stderr, exitCode, limitBytes, ...
	// RetryAfter is the answer's Retry-After (429, 503: the daemon did
	// nothing, and the same request may succeed after it); zero when the
	// answer had none. The calls of this package do not retry on their
	// own, but for an ACPConn's POSTs (see ACPConn).
	RetryAfter time.Duration `json:"-"`
	// Raw is the body as received (at most 1 MiB), extensions included.
	Raw json.RawMessage `json:"-"`
}

// Kind is the error kind of the problem type
// (urn:sandbox-agent:error:<kind>), e.g. "session_not_found"; empty for an
// answer that was not a problem document.
func (p *Problem) Kind() string {
	kind, _ := strings.CutPrefix(p.Type, "urn:sandbox-agent:error:")
	if kind == p.Type {
		return ""
	}
	return kind
}

// Error is the status and the daemon's message, with the agent's stderr
// or the details' message when the detail does not already say it.
func (p *Problem) Error() string {
	msg := fmt.Sprintf("%d %s", p.Status, p.Detail)
	if s, ok := p.Details["stderr"].(string); ok && s != "" {
		msg += "\n" + s
	} else if s, ok := p.Details["message"].(string); ok && s != "" && !strings.Contains(p.Detail, s) {
		msg += ": " + s
	}
	return msg
}

// CloseIdleConnections closes the kept-alive connections the Client's
// net/http client holds idle (the package's default client is shared by
// every Client without an HTTP of its own); calls in progress go on. For a
// leak checker (goleak, say) at the end of a test: after a call returned
// and its body or connection was closed, these are the only connections
// and goroutines of the package left.
func (c *Client) CloseIdleConnections() { c.httpClient().CloseIdleConnections() }

// defaultHTTP bounds connecting, never answering: installs and synchronous
// ACP requests answer when they are done, and streams never end. Callers
// bound a call with its context.
var defaultHTTP = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 15 * time.Second}).DialContext,
	ResponseHeaderTimeout: 0,
	// Idle connections are closed well before the daemon's own idle
	// timeout (120 s) could close one under a request.
	IdleConnTimeout:     30 * time.Second,
	MaxIdleConnsPerHost: 64, // an ACP connection posts concurrently
	// How long a large ACP message waits for the daemon's go-ahead
	// (Expect: 100-continue) before its body is sent anyway, for a
	// server or proxy that never answers 100.
	ExpectContinueTimeout: time.Second,
}}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return defaultHTTP
}

// Do sends a request with an optional JSON body and decodes a JSON answer
// of at most 64 MiB into out (when out is non-nil). Non-2xx answers are
// *Problem errors.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	resp, err := c.Send(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(out); err != nil {
		return withContext(ctx, fmt.Errorf("%s %s: decode answer: %w", method, path, err))
	}
	return nil
}

// withContext makes err, the failure of a call whose context has ended,
// say so: net/http may report what the cancellation did to the connection
// (a closed pipe, a reset) rather than the cancellation, and a caller
// tells its own cancellation from a daemon's failure with errors.Is.
func withContext(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && err != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}

// maxAnswer bounds a JSON answer the package decodes: a daemon (or what
// answers in its place) cannot make a client hold more than this.
const maxAnswer = 64 << 20

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

// authorize adds the bearer token, when there is one, and the router's
// headers.
func (c *Client) authorize(req *http.Request) {
	for k, v := range c.headers() {
		req.Header[k] = v
	}
}

// headers are what authorize adds: the token (as Authorization, or bare in
// the token header) and, through a Router, the sandbox's address and the
// router's own token.
func (c *Client) headers() http.Header {
	h := http.Header{}
	tokenHeader := c.TokenHeader
	if r := c.Router; r != nil {
		h.Set("X-Sandbox-ID", r.SandboxID)
		if r.Namespace != "" {
			h.Set("X-Sandbox-Namespace", r.Namespace)
		}
		if r.Port != 0 {
			h.Set("X-Sandbox-Port", strconv.Itoa(r.Port))
		}
		if r.Token != "" {
			h.Set("Authorization", "Bearer "+r.Token)
		}
		if tokenHeader == "" {
			tokenHeader = DefaultTokenHeader
		}
	}
	if c.Token != "" {
		if tokenHeader != "" {
			h.Set(tokenHeader, c.Token)
		} else {
			h.Set("Authorization", "Bearer "+c.Token)
		}
	}
	return h
}

// finish authenticates and sends req; non-2xx answers become *Problem errors.
func (c *Client) finish(req *http.Request) (*http.Response, error) {
	c.authorize(req)
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, withContext(req.Context(), err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return nil, parseProblem(resp, b)
}

// parseProblem decodes a non-2xx answer whose body is b; one that is not a
// problem document becomes a Problem with the status and the text.
func parseProblem(resp *http.Response, b []byte) *Problem {
	p := &Problem{}
	if json.Unmarshal(b, p) != nil || p.Status == 0 {
		p = &Problem{Status: resp.StatusCode, Detail: strings.TrimSpace(string(b))}
		if p.Detail == "" {
			p.Detail = http.StatusText(resp.StatusCode)
		}
	} else {
		p.Raw = append(json.RawMessage(nil), b...)
	}
	p.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	return p
}

// retryAfter reads a Retry-After value: seconds, or an HTTP date (the
// time left until it); zero when absent, unreadable or past.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(min(s, int64(24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Health is GET /v1/health: nil when the daemon answers {"status":"ok"}.
func (c *Client) Health(ctx context.Context) error {
	var out struct {
		Status string `json:"status"`
	}
	if err := c.Do(ctx, http.MethodGet, "/v1/health", nil, nil, &out); err != nil {
		return err
	}
	if out.Status != "ok" {
		return fmt.Errorf("health: status %q", out.Status)
	}
	return nil
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

// InstallProgress is what InstallAgentWithProgress reports. The daemon's
// install route answers once, when the install is over, so progress is
// the time spent so far; Done is set on the last report.
type InstallProgress struct {
	Agent   string
	Elapsed time.Duration
	Done    bool
	Err     error // set with Done when the install failed
}

// InstallAgentWithProgress is InstallAgent calling progress every interval
// (1 s when zero) while the daemon installs, and once more when it is done.
// progress runs on the calling goroutine's behalf from one goroutine that
// has returned when this call does.
func (c *Client) InstallAgentWithProgress(ctx context.Context, agent string, opts domain.InstallOptions, interval time.Duration, progress func(InstallProgress)) (domain.InstallResult, error) {
	if interval <= 0 {
		interval = time.Second
	}
	start := time.Now()
	stop := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				progress(InstallProgress{Agent: agent, Elapsed: time.Since(start)})
			case <-stop:
				return
			}
		}
	}()
	res, err := c.InstallAgent(ctx, agent, opts)
	close(stop)
	<-ticked
	progress(InstallProgress{Agent: agent, Elapsed: time.Since(start), Done: true, Err: err})
	return res, err
}
