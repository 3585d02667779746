package httpclient

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"
)

// Terminal is a process's terminal over a WebSocket
// (GET /v1/processes/{id}/terminal/ws), as an io.ReadWriteCloser: Read
// returns what the process writes to its terminal (the output buffered
// before the connection first, then live output), Write types into it.
// Read and Write may be called from different goroutines; each from one at
// a time. Close may be called from any goroutine, at any time: it ends a
// Read or Write in progress, which then returns an error wrapping
// net.ErrClosed, as later calls do.
type Terminal struct {
	ws     *websocket.Conn
	ctx    context.Context // the connection's lifetime: Close ends it
	cancel context.CancelFunc
	closed atomic.Bool // Close was called

	buf []byte // the rest of the last output message (Read's)

	mu       sync.Mutex
	exited   bool
	exitCode *int

	closeOnce sync.Once
}

// TerminalError is an error frame of the daemon (input past its limit, a
// process that reads nothing, an unknown frame): Read returns it, and
// reading may go on.
type TerminalError struct{ Message string }

// Error is the daemon's message.
func (e *TerminalError) Error() string { return "terminal: " + e.Message }

// terminalInputChunk bounds the input of one frame, under the daemon's
// default per-frame limit (maxInputBytesPerRequest, 64 KiB): a larger
// Write is sent in several frames.
const terminalInputChunk = 32 << 10

// terminalReadLimit bounds one message the daemon sends (output is sent in
// the pieces the process wrote it, a read of the terminal each).
const terminalReadLimit = 4 << 20

// ConnectTerminal opens the terminal of process id (one started with
// TTY). It returns once the daemon has said the terminal is ready; a
// process without a terminal, or an unknown one, is an error (a *Problem
// when the daemon refused the upgrade). ctx bounds the dial only.
func (c *Client) ConnectTerminal(ctx context.Context, id string) (*Terminal, error) {
	u := strings.TrimRight(c.BaseURL, "/") + processPath(id) + "/terminal/ws"
	switch {
	case strings.HasPrefix(u, "http://"):
		u = "ws://" + strings.TrimPrefix(u, "http://")
	case strings.HasPrefix(u, "https://"):
		u = "wss://" + strings.TrimPrefix(u, "https://")
	}
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.httpClient(), HTTPHeader: c.headers()})
	if err != nil {
		if resp != nil && resp.StatusCode/100 != 1 {
			return nil, refusedUpgrade(resp)
		}
		return nil, withContext(ctx, fmt.Errorf("terminal of %s: %w", id, err))
	}
	ws.SetReadLimit(terminalReadLimit)
	life, cancel := context.WithCancel(context.Background())
	t := &Terminal{ws: ws, ctx: life, cancel: cancel}
	// The first frame says whether the terminal is there.
	typ, b, err := ws.Read(ctx)
	if err != nil {
		t.Close()
		return nil, withContext(ctx, fmt.Errorf("terminal of %s: %w", id, err))
	}
	var f terminalFrame
	if typ != websocket.MessageText || json.Unmarshal(b, &f) != nil || f.Type != "ready" {
		t.Close()
		if f.Type == "error" {
			return nil, fmt.Errorf("terminal of %s: %w: %s", id, errNotTerminal, f.Message)
		}
		return nil, fmt.Errorf("terminal of %s: unexpected first frame %q", id, b)
	}
	return t, nil
}

// refusedUpgrade is the daemon's answer to an upgrade it refused, as a
// *Problem (coder/websocket keeps the first KiB of its body).
func refusedUpgrade(resp *http.Response) error {
	var b []byte
	if resp.Body != nil {
		b, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
	}
	return parseProblem(resp, b)
}

// terminalFrame is a JSON frame of the terminal protocol, both ways.
type terminalFrame struct {
	Type     string `json:"type"`
	Data     string `json:"data,omitempty"`
	Encoding string `json:"encoding,omitempty"`
	Cols     uint16 `json:"cols,omitempty"`
	Rows     uint16 `json:"rows,omitempty"`
	ExitCode *int   `json:"exitCode,omitempty"`
	Message  string `json:"message,omitempty"`
}

// Read returns the terminal's output. After the process has exited and
// all its output was read it returns io.EOF (ExitCode then says how); an
// error frame of the daemon is returned as a *TerminalError, after which
// reading may go on. A connection the daemon closed without an exit (the
// daemon stopping, say) also ends in io.EOF, with ExitCode saying the
// process has not exited.
func (t *Terminal) Read(p []byte) (int, error) {
	for len(t.buf) == 0 {
		if t.closed.Load() {
			return 0, errTerminalClosed
		}
		if _, exited := t.ExitCode(); exited {
			return 0, io.EOF
		}
		typ, b, err := t.ws.Read(t.ctx)
		if err != nil {
			switch {
			case t.closed.Load():
				return 0, errTerminalClosed
			case websocket.CloseStatus(err) == websocket.StatusNormalClosure:
				return 0, io.EOF
			}
			return 0, fmt.Errorf("terminal: %w", err)
		}
		if typ == websocket.MessageBinary {
			t.buf = b
			break
		}
		var f terminalFrame
		if err := json.Unmarshal(b, &f); err != nil {
			return 0, fmt.Errorf("terminal: frame %q: %w", b, err)
		}
		switch f.Type {
		case "exit":
			t.mu.Lock()
			t.exited, t.exitCode = true, f.ExitCode
			t.mu.Unlock()
		case "error":
			return 0, &TerminalError{Message: f.Message}
		}
	}
	n := copy(p, t.buf)
	t.buf = t.buf[n:]
	return n, nil
}

// errTerminalClosed is what Read and Write return after Close.
var errTerminalClosed = fmt.Errorf("terminal: %w", net.ErrClosed)

// ExitCode is the process's exit code once Read has seen it exit (nil when
// a signal ended it); exited says whether it has. It may be called from
// any goroutine.
func (t *Terminal) ExitCode() (code *int, exited bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.exitCode, t.exited
}

// Write types p into the terminal (sent base64-encoded, in frames of at
// most 32 KiB). It blocks while the daemon does not take them; Close ends
// it.
func (t *Terminal) Write(p []byte) (int, error) {
	for done := 0; done < len(p); {
		n := min(len(p)-done, terminalInputChunk)
		f := terminalFrame{Type: "input", Data: base64.StdEncoding.EncodeToString(p[done : done+n]), Encoding: "base64"}
		if err := t.send(f); err != nil {
			return done, err
		}
		done += n
	}
	return len(p), nil
}

// Resize sets the terminal's size (the process gets SIGWINCH).
func (t *Terminal) Resize(cols, rows uint16) error {
	return t.send(terminalFrame{Type: "resize", Cols: cols, Rows: rows})
}

func (t *Terminal) send(f terminalFrame) error {
	b, _ := json.Marshal(f)
	if err := t.ws.Write(t.ctx, websocket.MessageText, b); err != nil {
		if t.closed.Load() {
			return errTerminalClosed
		}
		return fmt.Errorf("terminal: %w", err)
	}
	return nil
}

// Close closes the connection; the process goes on (stop or kill it with
// StopProcess or KillProcess). It returns once the daemon has answered the
// close, or after at most about 5 s when it does not (a daemon that
// stopped answering). Idempotent.
func (t *Terminal) Close() error {
	t.closeOnce.Do(func() {
		t.closed.Store(true)
		// The WebSocket close handshake, which the daemon answers by
		// closing too (as it would a {"type":"close"} frame). Its close
		// frame waits at most 5 s for a Write in progress, and the
		// daemon's answer at most 5 s; a Read in progress then ends.
		// Nothing is lost either way, so its error is no error.
		_ = t.ws.Close(websocket.StatusNormalClosure, "")
		t.cancel()
	})
	return nil
}
