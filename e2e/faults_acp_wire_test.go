package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// A request whose id is an object, an array or a boolean can never be
// answered by id: JSON-RPC allows only a string, a number or null, so an
// agent answers it with id null (acp-go-sdk and the TypeScript SDK both do).
// The POST used to wait for that answer until the request timeout (120 s,
// forever with 0), and the agent's id-null error could answer another
// client's pending id-null request. Such a request is refused at once with
// a 400 problem, on both transports, and never reaches the agent.
func TestFaultStructuredRequestIDs(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	client := &http.Client{Timeout: 10 * time.Second}
	post := func(path string, body string, headers ...string) (int, []byte) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.URL+path, bytes.NewReader([]byte(body)))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("POST %s %s: %v (the POST hung)", path, body, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if st, b := post("/v1/acp/ids?agent=mock", initMsg); st != 200 {
		t.Fatalf("initialize: %d %s", st, b)
	}
	conn := stdConnect(t, d)
	for _, id := range []string{`{"a":1}`, `[1]`, `[]`, `true`, `false`} {
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"_mock/echo"}`
		for _, tc := range []struct {
			path    string
			headers []string
		}{
			{"/v1/acp/ids", nil},
			{"/acp/mock", []string{"Acp-Connection-Id", conn}},
		} {
			st, b := post(tc.path, body, tc.headers...)
			p := parseProblem(t, b)
			if st != 400 || p.Type != "urn:sandbox-agent:error:invalid_request" || !strings.Contains(p.Detail, "id must be a string, a number or null") {
				t.Fatalf("%s %s: %d %s", tc.path, body, st, b)
			}
		}
	}
	// Valid ids still pass, null included.
	for _, id := range []string{`null`, `0`, `-1.5e3`, `"x"`} {
		st, b := post("/v1/acp/ids", `{"jsonrpc":"2.0","id":`+id+`,"method":"_mock/echo"}`)
		if st != 200 || !strings.Contains(string(b), `"echoedMethod"`) {
			t.Fatalf("id %s: %d %s", id, st, b)
		}
	}
	// The agent saw none of the refused requests: nothing it wrote has id null
	// but the answer to the valid id-null request.
	s := d.Stream("/v1/acp/ids")
	defer s.Close()
	nulls := 0
	for {
		ev := s.NextWithin(t, 5*time.Second)
		if strings.Contains(ev.Data, `"id":null`) {
			nulls++
		}
		if strings.Contains(ev.Data, `"id":"x"`) {
			break
		}
	}
	if nulls != 1 {
		t.Fatalf("%d id-null answers on the stream, want 1", nulls)
	}
}

// A raw CR is whitespace to JSON, so an agent may write one inside a line,
// but it ends a line in Server-Sent Events: sent as it was, it cut the
// event's data in two for every SSE client (the JSON they got was broken,
// the rest taken for an unknown field). Such a line is compacted
// (whitespace only) before it is logged, as a POSTed body with raw line
// breaks is; the POST's answer is the same bytes as the stream's.
func TestFaultAgentLineWithCR(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t)})
	if st, b := d.Post("/v1/acp/cr?agent=test", `{"jsonrpc":"2.0","id":1,"method":"initialize"}`); st != 200 {
		t.Fatalf("initialize: %d %s", st, b)
	}
	st, b := d.Post("/v1/acp/cr", `{"jsonrpc":"2.0","id":2,"method":"crlf"}`)
	if want := `{"jsonrpc":"2.0","id":2,"result":{"ok":true}}`; st != 200 || string(b) != want {
		t.Fatalf("crlf: %d %q, want %q", st, b, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.URL+"/v1/acp/cr", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Read the wire itself: the check is that no line of it holds a CR.
	r := bufio.NewReader(resp.Body)
	for got := 0; got < 5; { // initialize's answer, 3 lines with CRs, crlf's answer
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if strings.ContainsRune(line, '\r') {
			t.Fatalf("a raw CR on the event stream: %q", line)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			got++
			if !json.Valid([]byte(data)) {
				t.Fatalf("event data is not JSON: %q", data)
			}
		}
	}
}

// A WebSocket text frame must be UTF-8 (RFC 6455 8.1): Node's ws, the SDK's
// WebSocket in Node, and browsers fail the whole connection on one that is
// not (ws: "invalid UTF-8 sequence", close 1006). An agent line whose JSON
// strings hold invalid UTF-8 went out as it was and so ended the
// connection. On the WebSocket each invalid byte becomes U+FFFD, which is
// what a JSON decoder makes of it; the SSE streams keep the bytes.
func TestFaultAgentInvalidUTF8OnWebSocket(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t)})
	c, _ := wsConnectTo(t, d, "test")
	defer c.Close()
	c.send(t, `{"jsonrpc":"2.0","id":2,"method":"badutf8"}`)
	note := c.readText(t, 10*time.Second)
	if !utf8.ValidString(note) {
		t.Fatalf("a text frame that is not UTF-8: %q", note)
	}
	var m struct {
		Params struct{ S string } `json:"params"`
	}
	if err := json.Unmarshal([]byte(note), &m); err != nil || m.Params.S != "a\uFFFDb\uFFFD" {
		t.Fatalf("notification %q: %v, s = %q", note, err, m.Params.S)
	}
	if got := c.readText(t, 10*time.Second); got != `{"jsonrpc":"2.0","id":2,"result":{}}` {
		t.Fatalf("answer: %q", got)
	}
}

// Acp-Connection-Id and Acp-Session-Id are single-valued. Given twice with
// different values, the daemon acted on the first while a proxy or a policy
// reading the headers could take the last (as with Authorization, which
// is refused given twice): a POST, GET or DELETE with either header more
// than once is 400, and does nothing.
func TestFaultACPStdRepeatedHeaders(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	cid := stdConnect(t, d)
	other := stdConnect(t, d)
	do := func(method, body string, headers ...string) (int, []byte) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, method, d.URL+"/acp/mock", strings.NewReader(body))
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Add(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %v: %v", method, headers, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	ct := "Content-Type"
	const js = "application/json"
	sse := "text/event-stream"
	for _, tc := range []struct {
		method, body string
		headers      []string
	}{
		{"POST", `{"jsonrpc":"2.0","method":"_mock/n"}`, []string{ct, js, "Acp-Connection-Id", cid, "Acp-Connection-Id", other}},
		{"POST", `{"jsonrpc":"2.0","method":"_mock/n","params":{"sessionId":"a"}}`, []string{ct, js, "Acp-Connection-Id", cid, "Acp-Session-Id", "a", "Acp-Session-Id", "b"}},
		{"GET", "", []string{"Accept", sse, "Acp-Connection-Id", cid, "Acp-Connection-Id", other}},
		{"GET", "", []string{"Accept", sse, "Acp-Connection-Id", cid, "Acp-Session-Id", "a", "Acp-Session-Id", "b"}},
		{"DELETE", "", []string{"Acp-Connection-Id", other, "Acp-Connection-Id", cid}},
	} {
		st, b := do(tc.method, tc.body, tc.headers...)
		p := parseProblem(t, b)
		if st != 400 || !strings.Contains(p.Detail, "more than one Acp-") {
			t.Fatalf("%s %v: %d %s", tc.method, tc.headers, st, b)
		}
	}
	// Both connections are still there.
	for _, id := range []string{cid, other} {
		if !listed(t, d, id) {
			t.Fatalf("connection %s gone after refused requests", id)
		}
	}
}

// A WebSocket upgrade the WebSocket library refuses (a Sec-WebSocket-Key
// that is not 16 bytes of base64, or given twice) was only found after the
// agent had started: every such request started and stopped an agent
// process, and was answered in text/plain. They are refused first, with a
// problem, and start nothing; so is a HEAD upgrade.
func TestFaultACPStdBadWebSocketKey(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	for _, keys := range [][]string{{"bad"}, {"dGhlIHNhbXBsZSBub25jZQ"}, {"AAAA"}, {"dGhlIHNhbXBsZSBub25jZQ==", "dGhlIHNhbXBsZSBub25jZQ=="}} {
		req, _ := http.NewRequest(http.MethodGet, d.URL+"/acp/mock", nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		for _, k := range keys {
			req.Header.Add("Sec-WebSocket-Key", k)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("key %q: %d %q %s", keys, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
	}
	// HEAD is served by the GET route; the library refuses to upgrade it.
	req, _ := http.NewRequest(http.MethodHead, d.URL+"/acp/mock", nil)
	for k, v := range map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("HEAD upgrade: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if strings.Contains(d.Logs(), "agent started") {
		t.Fatalf("a refused upgrade started an agent:\n%s", harness.Tail(d.Logs(), 20))
	}
}
