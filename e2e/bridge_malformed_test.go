package e2e

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// malformedLines are hand-written stdin lines that are not JSON-RPC
// messages, each with the one answer a stdio agent must give (JSON-RPC 2.0
// §5.1), and valid requests between them that show the session goes on.
var malformedLines = []struct{ send, want string }{
	{`{"jsonrpc":"2.0","id":1,"method":"initialize"`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error","data":"the line is not JSON"}}`},
	{initMsg, `"protocolVersion":1`},
	{`[]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request","data":"JSON-RPC batches are not supported"}}`},
	{`[{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request","data":"JSON-RPC batches are not supported"}}`},
	{`42`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request","data":"a message is a JSON object"}}`},
	{`{"jsonrpc":"2.0","id":3}`, `{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"Invalid Request","data":"a request needs a \"method\""}}`},
	{`{"jsonrpc":"1.0","id":"v","method":"session/list","params":{}}`, `{"jsonrpc":"2.0","id":"v","error":{"code":-32600,"message":"Invalid Request","data":"\"jsonrpc\" must be \"2.0\""}}`},
	{`{"jsonrpc":"2.0","id":{"x":1},"method":"session/list","params":{}}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request","data":"\"id\" must be a string, a number or null"}}`},
	{`{"jsonrpc":"2.0","id":4,"method":"session/list","params":"all"}`, `{"jsonrpc":"2.0","id":4,"error":{"code":-32600,"message":"Invalid Request","data":"\"params\" must be an object or an array"}}`},
	{`{"jsonrpc":"2.0","id":5,"id":6,"method":"session/list"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request","data":"member \"id\" appears more than once"}}`},
	{`{"jsonrpc":"2.0","id":7,"result":{},"error":{"code":1,"message":"m"}}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request","data":"a response has \"result\" or \"error\", not both"}}`},
	{`{"foo":"bar"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request","data":"not a JSON-RPC message: no \"method\", \"id\", \"result\" or \"error\""}}`},
	{`{"jsonrpc":"2.0","id":8,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`, `"sessionId":"mock-1"`},
}

// TestBridgeAnswersMalformedLines: `sandbox-agent acp` answers each line
// that is not a JSON-RPC message on stdout, as the mock run directly does
// (the same bytes), and goes on: the requests between them are answered
// and stdin's end is a clean exit.
func TestBridgeAnswersMalformedLines(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	for _, path := range []struct {
		name string
		peer func(t *testing.T) *pipePeer
	}{
		{"mock", startMockProcess},
		{"bridge", func(t *testing.T) *pipePeer { return bridgePeer(t, d) }},
	} {
		t.Run(path.name, func(t *testing.T) {
			p := path.peer(t)
			for _, l := range malformedLines {
				p.send(t, l.send)
				got := p.next(t, 20*time.Second)
				if got != l.want && !(strings.HasPrefix(l.want, `"`) && strings.Contains(got, l.want)) {
					t.Fatalf("sent %s\n got %s\nwant %s", l.send, got, l.want)
				}
			}
		})
	}
}

// TestBridgeAnswerMidStream: answers of the bridge's own, given while the
// agent's messages stream to stdout, land between whole lines: every stdout
// line stays one JSON message, and the stream is complete. (Whether a
// given answer meets a line half written is timing; the unit test
// TestStdoutLinesAnswerBetweenLines makes that case certain.)
func TestBridgeAnswerMidStream(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	p := bridgePeer(t, d)
	p.send(t, initMsg)
	p.next(t, 20*time.Second)
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	p.next(t, 20*time.Second)
	const n, bad = 20000, 200
	p.send(t, promptMsg(3, "mock-1", "stream 20000"))
	sent := make(chan struct{})
	chunks, answers := 0, 0
	for {
		l := p.next(t, 30*time.Second)
		var m struct {
			ID    json.RawMessage `json:"id"`
			Error *struct{ Code int }
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("stdout line is not JSON: %.200s", l)
		}
		switch {
		case m.Error != nil && m.Error.Code == -32700:
			answers++
		case strings.Contains(l, `"mock: chunk `):
			if chunks++; chunks == 1 {
				// The stream is flowing: answers are due while it does.
				go func() {
					defer close(sent)
					for i := range bad {
						if _, err := io.WriteString(p.stdin, `{"bad":`+strings.Repeat(" ", i%7)+"\n"); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
		}
		if string(m.ID) == "3" {
			break
		}
	}
	<-sent
	for answers < bad {
		if l := p.next(t, 20*time.Second); strings.Contains(l, `-32700`) {
			answers++
		}
	}
	if chunks != n {
		t.Fatalf("%d chunks, want %d", chunks, n)
	}
}
