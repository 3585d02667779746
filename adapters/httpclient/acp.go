package httpclient

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// ACPEvent is one frame of an ACP stream. ID is empty for frames without
// one (the _adapter/replay_gap notice).
type ACPEvent struct {
	ID   string
	Data []byte
}

func acpPath(serverID string) string { return "/v1/acp/" + url.PathEscape(serverID) }

// PostACP sends one JSON-RPC message exactly as given (no re-encoding) and
// returns the answer body: the agent's response for a synchronous request,
// nil for 202. agent, when non-empty, is the bootstrap ?agent= value.
func (c *Client) PostACP(ctx context.Context, serverID, agent string, msg []byte) ([]byte, error) {
	var q url.Values
	if agent != "" {
		q = url.Values{"agent": {agent}}
	}
	resp, err := c.raw(ctx, http.MethodPost, acpPath(serverID), q, bytes.NewReader(msg), "application/json", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusAccepted {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
		return nil, nil
	}
	// An answer is one agent line, which the daemon bounds as the stream
	// does.
	b, err := io.ReadAll(io.LimitReader(resp.Body, DefaultMaxSSEEvent+1))
	if err == nil && len(b) > DefaultMaxSSEEvent {
		return nil, fmt.Errorf("post acp %q: answer longer than %d bytes", serverID, DefaultMaxSSEEvent)
	}
	return b, err
}

// StreamACP reads the server's SSE stream, calling fn for each event until
// the stream ends (nil: the daemon closed it, the instance deleted say),
// ctx is done (ctx.Err()), fn returns an error, or the stream fails (a
// stream cut short; one on which the daemon sent nothing for 45 s, when it
// writes a heartbeat every 15 s, is an error wrapping
// ErrDaemonUnreachable). lastEventID, when non-empty, resumes after that
// event. It does not reconnect; DialACP does.
func (c *Client) StreamACP(ctx context.Context, serverID, lastEventID string, fn func(ACPEvent) error) error {
	h := http.Header{}
	if lastEventID != "" {
		h.Set("Last-Event-ID", lastEventID)
	}
	return c.follow(ctx, acpPath(serverID), nil, h, func(ev SSEEvent) error {
		return fn(ACPEvent{ID: ev.ID, Data: ev.Data})
	})
}

// ACPServer is one entry of GET /v1/acp.
type ACPServer struct {
	ServerID        string `json:"serverId"`
	Agent           string `json:"agent"`
	CreatedAtMs     int64  `json:"createdAtMs"`
	PID             int    `json:"pid,omitempty"`
	State           string `json:"state,omitempty"` // running or exited
	ExitCode        *int   `json:"exitCode,omitempty"`
	PendingRequests int    `json:"pendingRequests"`
	Subscribers     int    `json:"subscribers"`
	LastEventID     uint64 `json:"lastEventId"`
	BufferedEvents  int    `json:"bufferedEvents"`
	BufferedBytes   int64  `json:"bufferedBytes"`
}

// ListACPServers is GET /v1/acp: every instance, exited ones included,
// sorted by server id.
func (c *Client) ListACPServers(ctx context.Context) ([]ACPServer, error) {
	var out struct {
		Servers []ACPServer `json:"servers"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/acp", nil, nil, &out)
	return out.Servers, err
}

// ACPStderr is GET /v1/acp/{id}/stderr: the tail of the agent's stderr the
// daemon keeps (the last 16 lines, at most 64 KiB).
func (c *Client) ACPStderr(ctx context.Context, serverID string) (string, error) {
	resp, err := c.raw(ctx, http.MethodGet, acpPath(serverID)+"/stderr", nil, nil, "", http.Header{"Accept": {"text/plain"}})
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return string(b), err
}

// CloseACP is DELETE /v1/acp/{id}: it stops the instance's agent and
// frees the id (idempotent).
func (c *Client) CloseACP(ctx context.Context, serverID string) error {
	return c.Do(ctx, http.MethodDelete, acpPath(serverID), nil, nil, nil)
}

// raw sends a request with a raw body and extra headers; non-2xx answers
// become *Problem errors.
func (c *Client) raw(ctx context.Context, method, path string, query url.Values, body io.Reader, contentType string, h http.Header) (*http.Response, error) {
	return c.rawLen(ctx, method, path, query, body, -1, contentType, h)
}

// rawLen is raw with a known body length (-1: unknown, or known from a
// bytes/strings reader).
func (c *Client) rawLen(ctx context.Context, method, path string, query url.Values, body io.Reader, length int64, contentType string, h http.Header) (*http.Response, error) {
	req, err := c.newRequest(ctx, method, path, query, body, length, contentType, h)
	if err != nil {
		return nil, err
	}
	return c.finish(req)
}

// newRequest builds a request to the daemon, authenticated; see rawLen.
func (c *Client) newRequest(ctx context.Context, method, path string, query url.Values, body io.Reader, length int64, contentType string, h http.Header) (*http.Request, error) {
	u := strings.TrimRight(c.BaseURL, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if length >= 0 {
		req.ContentLength = length
		if length == 0 {
			req.Body = http.NoBody
		}
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	c.authorize(req)
	return req, nil
}
