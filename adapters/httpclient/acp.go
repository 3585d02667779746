package httpclient

import (
	"bufio"
	"bytes"
	"context"
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
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, nil
	}
	return io.ReadAll(resp.Body)
}

// StreamACP reads the server's SSE stream, calling fn for each event until
// the stream ends, ctx is done, or fn returns an error. lastEventID, when
// non-empty, resumes after that event.
func (c *Client) StreamACP(ctx context.Context, serverID, lastEventID string, fn func(ACPEvent) error) error {
	h := http.Header{"Accept": {"text/event-stream"}}
	if lastEventID != "" {
		h.Set("Last-Event-ID", lastEventID)
	}
	resp, err := c.raw(ctx, http.MethodGet, acpPath(serverID), nil, nil, "", h)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	var ev ACPEvent
	var data []byte
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			if err == io.EOF || ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if data != nil {
				ev.Data = data
				if err := fn(ev); err != nil {
					return err
				}
			}
			ev, data = ACPEvent{}, nil
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("id:")):
			ev.ID = strings.TrimSpace(string(line[3:]))
		case bytes.HasPrefix(line, []byte("data:")):
			d := bytes.TrimPrefix(line[5:], []byte(" "))
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, d...)
		}
	}
}

// CloseACP deletes the server instance (idempotent).
func (c *Client) CloseACP(ctx context.Context, serverID string) error {
	return c.Do(ctx, http.MethodDelete, acpPath(serverID), nil, nil, nil)
}

// raw sends a request with a raw body and extra headers; non-2xx answers
// become *Problem errors.
func (c *Client) raw(ctx context.Context, method, path string, query url.Values, body io.Reader, contentType string, h http.Header) (*http.Response, error) {
	u := strings.TrimRight(c.BaseURL, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return c.finish(req)
}
