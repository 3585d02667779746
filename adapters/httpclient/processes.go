package httpclient

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// The processes API (/v1/processes): commands run in the sandbox, with
// the same routes and shapes the TypeScript SDK's process calls use.

// The value types of the processes API, under this package's names so a
// program using the client needs no other import.
type (
	ProcessConfig        = domain.ProcessConfig
	ProcessRunRequest    = domain.ProcessRunRequest
	ProcessRunResponse   = domain.ProcessRunResponse
	ProcessCreateRequest = domain.ProcessCreateRequest
	ProcessInfo          = domain.ProcessInfo
	ProcessOwner         = domain.ProcessOwner
	ProcessLogsStream    = domain.ProcessLogsStream
	ProcessLogsResponse  = domain.ProcessLogsResponse
	ProcessLogEntry      = domain.ProcessLogEntry
	ProcessLogGap        = domain.ProcessLogGap
	LogEncoding          = domain.LogEncoding
)

// Log streams, and the encodings of log data.
const (
	StreamStdout   = domain.StreamStdout
	StreamStderr   = domain.StreamStderr
	StreamCombined = domain.StreamCombined
	StreamPTY      = domain.StreamPTY
	LogBase64      = domain.LogBase64
	LogUTF8        = domain.LogUTF8
)

func processPath(id string) string { return "/v1/processes/" + url.PathEscape(id) }

// ProcessConfig is GET /v1/processes/config: the limits new processes get.
func (c *Client) ProcessConfig(ctx context.Context) (domain.ProcessConfig, error) {
	var out domain.ProcessConfig
	err := c.Do(ctx, http.MethodGet, "/v1/processes/config", nil, nil, &out)
	return out, err
}

// SetProcessConfig is POST /v1/processes/config: it replaces the limits as
// a whole (within the daemon's ceilings) and returns them.
func (c *Client) SetProcessConfig(ctx context.Context, cfg domain.ProcessConfig) (domain.ProcessConfig, error) {
	var out domain.ProcessConfig
	err := c.Do(ctx, http.MethodPost, "/v1/processes/config", nil, cfg, &out)
	return out, err
}

// RunProcess is POST /v1/processes/run: it runs a command to its end (or
// its timeout) and returns its output, each stream cut at the run's
// maxOutputBytes. ctx bounds the call: when it ends, the daemon kills the
// command's process tree.
func (c *Client) RunProcess(ctx context.Context, req domain.ProcessRunRequest) (domain.ProcessRunResponse, error) {
	var out domain.ProcessRunResponse
	err := c.Do(ctx, http.MethodPost, "/v1/processes/run", nil, req, &out)
	return out, err
}

// CreateProcess is POST /v1/processes: it starts a managed process, on
// pipes or (req.TTY) on a terminal, which outlives the call.
func (c *Client) CreateProcess(ctx context.Context, req domain.ProcessCreateRequest) (domain.ProcessInfo, error) {
	var out domain.ProcessInfo
	err := c.Do(ctx, http.MethodPost, "/v1/processes", nil, req, &out)
	return out, err
}

// ListProcesses is GET /v1/processes: managed processes, exited ones
// included; owner ("user", "desktop", "system"), when not empty, filters.
func (c *Client) ListProcesses(ctx context.Context, owner domain.ProcessOwner) ([]domain.ProcessInfo, error) {
	var q url.Values
	if owner != "" {
		q = url.Values{"owner": {string(owner)}}
	}
	var out struct {
		Processes []domain.ProcessInfo `json:"processes"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/processes", q, nil, &out)
	return out.Processes, err
}

// Process is GET /v1/processes/{id}.
func (c *Client) Process(ctx context.Context, id string) (domain.ProcessInfo, error) {
	var out domain.ProcessInfo
	err := c.Do(ctx, http.MethodGet, processPath(id), nil, nil, &out)
	return out, err
}

// StopProcess is POST /v1/processes/{id}/stop: SIGTERM to its whole tree.
// wait, when positive, is how long the daemon waits for the exit before it
// answers (at most a minute); zero leaves the daemon's default.
func (c *Client) StopProcess(ctx context.Context, id string, wait time.Duration) (domain.ProcessInfo, error) {
	return c.signalProcess(ctx, id, "stop", wait)
}

// KillProcess is POST /v1/processes/{id}/kill: SIGKILL to its whole tree;
// wait as for StopProcess.
func (c *Client) KillProcess(ctx context.Context, id string, wait time.Duration) (domain.ProcessInfo, error) {
	return c.signalProcess(ctx, id, "kill", wait)
}

func (c *Client) signalProcess(ctx context.Context, id, what string, wait time.Duration) (domain.ProcessInfo, error) {
	var q url.Values
	if wait > 0 {
		q = url.Values{"waitMs": {strconv.FormatInt(wait.Milliseconds(), 10)}}
	}
	var out domain.ProcessInfo
	err := c.Do(ctx, http.MethodPost, processPath(id)+"/"+what, q, nil, &out)
	return out, err
}

// DeleteProcess is DELETE /v1/processes/{id}: it forgets an exited process
// and its logs (a *Problem with status 409 while it runs).
func (c *Client) DeleteProcess(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, processPath(id), nil, nil, nil)
}

// SendProcessInput is POST /v1/processes/{id}/input: data goes to the
// process's stdin or terminal (sent base64-encoded, so any bytes).
func (c *Client) SendProcessInput(ctx context.Context, id string, data []byte) error {
	body := map[string]string{"data": base64.StdEncoding.EncodeToString(data), "encoding": "base64"}
	return c.Do(ctx, http.MethodPost, processPath(id)+"/input", nil, body, nil)
}

// ResizeProcessTerminal is POST /v1/processes/{id}/terminal/resize.
func (c *Client) ResizeProcessTerminal(ctx context.Context, id string, cols, rows uint16) error {
	body := map[string]uint16{"cols": cols, "rows": rows}
	return c.Do(ctx, http.MethodPost, processPath(id)+"/terminal/resize", nil, body, nil)
}

// ProcessLogsQuery selects log entries. Zero values are the daemon's
// defaults: the process's own stream (pty for a terminal, else combined),
// every buffered entry, base64 data.
type ProcessLogsQuery struct {
	Stream   domain.ProcessLogsStream
	Tail     int     // only the last Tail entries
	Since    *uint64 // only entries after this sequence
	Encoding domain.LogEncoding
}

func (q ProcessLogsQuery) values(follow bool) url.Values {
	v := url.Values{}
	if q.Stream != "" {
		v.Set("stream", string(q.Stream))
	}
	if q.Tail > 0 {
		v.Set("tail", strconv.Itoa(q.Tail))
	}
	if q.Since != nil {
		v.Set("since", strconv.FormatUint(*q.Since, 10))
	}
	if q.Encoding != "" {
		v.Set("encoding", string(q.Encoding))
	}
	if follow {
		v.Set("follow", "true")
	}
	return v
}

// ProcessLogs is GET /v1/processes/{id}/logs: the buffered output. Data is
// base64 unless q.Encoding asks for utf8; DecodeLogData decodes either.
func (c *Client) ProcessLogs(ctx context.Context, id string, q ProcessLogsQuery) (domain.ProcessLogsResponse, error) {
	var out domain.ProcessLogsResponse
	err := c.Do(ctx, http.MethodGet, processPath(id)+"/logs", q.values(false), nil, &out)
	return out, err
}

// DecodeLogData returns an entry's output bytes, whatever its encoding.
func DecodeLogData(e domain.ProcessLogEntry) ([]byte, error) {
	if e.Encoding == string(domain.LogUTF8) {
		return []byte(e.Data), nil
	}
	return base64.StdEncoding.DecodeString(e.Data)
}

// ProcessLogEvent is one event of a followed log: an entry, a gap (entries
// evicted before the reader got them), or the exit, which is the last.
type ProcessLogEvent struct {
	Entry *domain.ProcessLogEntry
	Gap   *domain.ProcessLogGap
	Exit  *domain.ProcessInfo
}

// FollowProcessLogs is GET /v1/processes/{id}/logs?follow=true: it calls fn
// with the buffered entries after q.Since, then live ones, until the
// process has exited and everything was sent (the Exit event, then nil),
// ctx ends (ctx.Err()), fn returns an error, or the stream fails: a stream
// that ends without the Exit event (the daemon stopped or restarted) is an
// error wrapping io.ErrUnexpectedEOF, and one on which the daemon sent
// nothing for 45 s (it writes a heartbeat every 15 s) an error wrapping
// ErrDaemonUnreachable. It does not reconnect; to resume, call it again
// with Since set to the last entry's sequence.
func (c *Client) FollowProcessLogs(ctx context.Context, id string, q ProcessLogsQuery, fn func(ProcessLogEvent) error) error {
	exited := false
	err := c.follow(ctx, processPath(id)+"/logs", q.values(true), http.Header{}, func(ev SSEEvent) error {
		var out ProcessLogEvent
		var err error
		switch ev.Event {
		case "log":
			out.Entry = new(domain.ProcessLogEntry)
			err = json.Unmarshal(ev.Data, out.Entry)
		case "gap":
			out.Gap = new(domain.ProcessLogGap)
			err = json.Unmarshal(ev.Data, out.Gap)
		case "exit":
			out.Exit = new(domain.ProcessInfo)
			err = json.Unmarshal(ev.Data, out.Exit)
			exited = err == nil
		default:
			return nil // an event of a later daemon version
		}
		if err != nil {
			return fmt.Errorf("follow logs of %s: %s event: %w", id, ev.Event, err)
		}
		return fn(out)
	})
	if err == nil && !exited {
		return fmt.Errorf("follow logs of %s: the stream ended before the process's exit: %w", id, io.ErrUnexpectedEOF)
	}
	return err
}

// errNotTerminal is the cause of a refused terminal socket.
var errNotTerminal = errors.New("no terminal")
