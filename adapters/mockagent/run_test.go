package mockagent

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

// TestRouteEchoesUnknownRequests: requests the SDK does not know are
// answered by the router; everything else reaches the SDK unchanged.
func TestRouteEchoesUnknownRequests(t *testing.T) {
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":7,"method":"x/y","params":{}}`,
		`{"jsonrpc":"2.0","id":"s","method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","method":"note"}`,
		`{"jsonrpc":"2.0","id":"big","method":"_big/echo","params":{"blob":"` + strings.Repeat("a", 12<<20) + `"}}`,
	}, "\n") + "\n"
	var sdk, out strings.Builder
	if err := route(strings.NewReader(in), &sdk, &out); err != nil {
		t.Fatal(err)
	}
	wantOut := `{"jsonrpc":"2.0","id":7,"result":{"echoedMethod":"x/y"}}` + "\n" +
		`{"jsonrpc":"2.0","id":"big","result":{"echoedMethod":"_big/echo"}}` + "\n"
	if out.String() != wantOut {
		t.Errorf("router answered %q", out.String())
	}
	wantSDK := `{"jsonrpc":"2.0","id":"s","method":"initialize","params":{}}` + "\n" + `{"jsonrpc":"2.0","method":"note"}` + "\n"
	if sdk.String() != wantSDK {
		t.Errorf("SDK got %q", sdk.String())
	}
}

// TestRunPrompt plays a session through Run over pipes: initialize,
// session/new, a "stream 3" prompt, and exit at stdin EOF.
func TestRunPrompt(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), inR, outW, io.Discard); outW.Close() }()
	lines := bufio.NewScanner(outR)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	send := func(s string) {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	next := func() map[string]any {
		if !lines.Scan() {
			t.Fatalf("agent output ended: %v", lines.Err())
		}
		var m map[string]any
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("not JSON: %s", lines.Bytes())
		}
		return m
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	if r := next(); r["id"] != float64(1) || r["result"] == nil {
		t.Fatalf("initialize: %v", r)
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	sid := next()["result"].(map[string]any)["sessionId"].(string)
	if !strings.HasPrefix(sid, "mock-") {
		t.Fatalf("session id %q", sid)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"stream 3"}]}}`)
	var texts []string
	for {
		m := next()
		if m["id"] == float64(3) {
			if m["result"].(map[string]any)["stopReason"] != "end_turn" {
				t.Fatalf("prompt answer %v", m)
			}
			break
		}
		u := m["params"].(map[string]any)["update"].(map[string]any)
		texts = append(texts, u["content"].(map[string]any)["text"].(string))
	}
	if strings.Join(texts, "|") != "mock: chunk 1|mock: chunk 2|mock: chunk 3" {
		t.Errorf("updates %q", texts)
	}
	inW.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return at stdin EOF")
	}
}
