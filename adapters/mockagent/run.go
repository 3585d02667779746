package mockagent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Options configure the mock.
type Options struct {
	// Version is agentInfo.version in the initialize answer.
	Version string
}

// testMethods are the requests the router answers with {"echoedMethod": …}
// for transport tests (docs/mock-agent.md lists them), besides any method under
// "_mock/". Every other method the SDK does not implement gets -32601.
var testMethods = map[string]bool{
	"echo": true, "ping": true, "other": true,
	"x/y": true, "x/echo": true, "a/b": true, "echo/me": true,
	"bench/echo": true, "bench/ping": true,
}

func isTestMethod(m string) bool { return testMethods[m] || strings.HasPrefix(m, "_mock/") }

const (
	// sdkMaxLine is the longest line (with its line ending) acp-go-sdk's
	// reader takes: a longer one would end its connection, so the router
	// answers it instead.
	sdkMaxLine = 10 << 20
	// maxLine bounds one stdin line; past it the mock stops reading (the
	// daemon's own limit on a POST body is lower).
	maxLine = 256 << 20
)

// lineWriter serialises whole-line writes from the SDK and the router,
// and keeps count of the requests handed to the SDK that it has not
// answered yet, so that the mock answers them all before it exits. The SDK
// writes one message per Write.
type lineWriter struct {
	mu      sync.Mutex
	w       io.Writer
	pending map[string]int // canonical request id -> requests not yet answered
	drain   chan struct{}  // closed once pending is empty, when asked for
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.w.Write(p)
	if len(l.pending) > 0 {
		if f, perr := domain.ParseFrame(bytes.TrimRight(p, "\n")); perr == nil && f.Kind == domain.FrameResponse {
			key := f.IDKey()
			if l.pending[key]--; l.pending[key] <= 0 {
				delete(l.pending, key)
			}
			if len(l.pending) == 0 && l.drain != nil {
				close(l.drain)
				l.drain = nil
			}
		}
	}
	return n, err
}

// answer writes one of the router's own lines (not counted as an answer
// of the SDK's).
func (l *lineWriter) answer(p []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.w.Write(p)
	return err
}

// sent counts a request handed to the SDK.
func (l *lineWriter) sent(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending == nil {
		l.pending = map[string]int{}
	}
	l.pending[key]++
}

// drained is closed once every request handed to the SDK is answered.
func (l *lineWriter) drained() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan struct{})
	if len(l.pending) == 0 {
		close(ch)
	} else {
		l.drain = ch
	}
	return ch
}

// Run serves the mock agent on the given streams until stdin ends. Then the
// turns still running are cancelled (they answer cancelled, as after
// session/cancel), every request gets its answer, and Run returns (bounded
// by 10 s, or ctx).
func Run(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, opts Options) error {
	out := &lineWriter{w: stdout}
	toSDK, sdkIn := io.Pipe()
	a := newAgent(stderr, opts.Version)
	a.conn = acp.NewAgentSideConnection(a, out, toSDK)

	go func() {
		err := route(stdin, sdkIn, out, stderr)
		sdkIn.CloseWithError(err)
	}()
	select {
	case <-a.conn.Done():
	case <-ctx.Done():
		return nil
	}
	a.cancelTurns()
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-out.drained():
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}

// route reads stdin line by line. It answers itself what the SDK would not
// answer as an agent must: lines that are not JSON-RPC messages (-32700,
// -32600, as the stdio bridge does), the test methods (an echo), requests
// too long for the SDK's reader; it drops notifications of test methods and
// hands everything else to the SDK unchanged.
func route(stdin io.Reader, sdk io.Writer, out *lineWriter, stderr io.Writer) error {
	r := bufio.NewReaderSize(stdin, 64<<10)
	for {
		line, err := readLine(r)
		if len(line) > 0 {
			answer, request, toSDK := routeLine(line, stderr)
			var werr error
			switch {
			case answer != nil:
				werr = out.answer(append(answer, '\n'))
			case toSDK:
				if line[len(line)-1] != '\n' {
					line = append(line, '\n')
				}
				if request != "" {
					out.sent(request)
				}
				_, werr = sdk.Write(line)
			}
			if werr != nil {
				return werr
			}
		}
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// readLine reads one line with its line ending (none at EOF), up to
// maxLine bytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > maxLine {
			return nil, fmt.Errorf("a line longer than %d bytes", maxLine)
		}
		line = append(line, chunk...)
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
}

// routeLine decides what happens to one stdin line: an answer to write, or
// whether to hand it to the SDK (with the canonical id of a request).
func routeLine(line []byte, stderr io.Writer) (answer []byte, request string, toSDK bool) {
	msg := bytes.TrimRight(line, "\r\n")
	if len(bytes.TrimSpace(msg)) == 0 {
		return nil, "", false
	}
	f, bad := domain.CheckMessage(msg)
	switch {
	case bad != nil:
		return bad.Response(), "", false
	case f.Kind == domain.FrameNotification && isTestMethod(f.Method):
		return nil, "", false
	case f.Kind != domain.FrameRequest:
		if len(line) >= sdkMaxLine {
			fmt.Fprintf(stderr, "mock: dropped a %s of %d bytes (the SDK reads lines up to %d bytes)\n", f.Kind, len(line), sdkMaxLine)
			return nil, "", false
		}
		return nil, "", true
	case isTestMethod(f.Method):
		method, _ := json.Marshal(f.Method)
		return []byte(`{"jsonrpc":"2.0","id":` + string(f.ID) + `,"result":{"echoedMethod":` + string(method) + `}}`), "", false
	case len(line) >= sdkMaxLine:
		data, _ := json.Marshal(map[string]any{"error": fmt.Sprintf("a message of %d bytes is over the mock's limit of %d for ACP methods", len(line), sdkMaxLine-1)})
		return []byte(`{"jsonrpc":"2.0","id":` + string(f.ID) + `,"error":{"code":-32603,"message":"Internal error","data":` + string(data) + `}}`), "", false
	}
	return nil, f.IDKey(), true
}
