package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// TestCompatACPStd runs the official @agentclientprotocol/sdk 2.4.0 client
// (createHttpStream and createWebSocketStream) against /acp/mock:
// initialize, session/new, a prompt, a permission request answered,
// `stream 1000` in order, cancel, close (and the instance gone after).
func TestCompatACPStd(t *testing.T) {
	t.Parallel()
	for _, tr := range []string{"http", "ws"} {
		t.Run(tr, func(t *testing.T) {
			d := harness.Start(t, harness.Options{})
			runNode(t, "acp-std.mjs", 120*time.Second, "BASE_URL="+d.URL, "TRANSPORT="+tr)
		})
		t.Run(tr+" token", func(t *testing.T) {
			d := harness.Start(t, harness.Options{Args: []string{"--token", "s3cret"}})
			runNode(t, "acp-std.mjs", 120*time.Second, "BASE_URL="+d.URL, "TRANSPORT="+tr, "TOKEN=s3cret")
		})
	}
}

const stdInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`

// stdConnect creates a Streamable HTTP connection and returns its id.
func stdConnect(t *testing.T, d *harness.Daemon, headers ...string) string {
	t.Helper()
	st, h, b := d.Do(http.MethodPost, "/acp/mock", []byte(stdInit), append([]string{"Content-Type", "application/json"}, headers...)...)
	if st != http.StatusOK || !strings.Contains(string(b), `"protocolVersion":1`) {
		t.Fatalf("initialize: %d %s", st, b)
	}
	id := h.Get("Acp-Connection-Id")
	if id == "" {
		t.Fatal("initialize answered without Acp-Connection-Id")
	}
	return id
}

// TestACPStdErrors checks every refusal of /acp/{agent}: status and a
// problem+json body.
func TestACPStdErrors(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	id := stdConnect(t, d)
	sess := func() string {
		st, _, _ := d.Do(http.MethodPost, "/acp/mock", []byte(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`),
			"Content-Type", "application/json", "Acp-Connection-Id", id)
		if st != http.StatusAccepted {
			t.Fatalf("session/new: %d", st)
		}
		return "mock-x"
	}()
	open := d.Stream("/acp/mock", "Acp-Connection-Id", id) // the connection stream's one reader
	defer open.Close()
	ct := []string{"Content-Type", "application/json"}
	cid := []string{"Acp-Connection-Id", id}
	with := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	notif := `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sess + `"}}`
	tests := []struct {
		name    string
		method  string
		path    string
		body    string
		headers []string
		status  int
		detail  string
	}{
		{"post not json", "POST", "/acp/mock", stdInit, []string{"Content-Type", "text/plain"}, 415, "unsupported media type"},
		{"post no content type", "POST", "/acp/mock", stdInit, nil, 415, "unsupported media type"},
		{"post batch", "POST", "/acp/mock", "[" + stdInit + "]", ct, 501, "batches"},
		{"post batch on connection", "POST", "/acp/mock", " [{}]", with(ct, cid), 501, "batches"},
		{"post not json body", "POST", "/acp/mock", "{", ct, 400, "invalid JSON body"},
		{"post not object", "POST", "/acp/mock", `"x"`, ct, 400, "JSON-RPC object"},
		{"post missing connection id", "POST", "/acp/mock", notif, ct, 400, "missing Acp-Connection-Id"},
		{"post unknown connection id", "POST", "/acp/mock", notif, with(ct, []string{"Acp-Connection-Id", "nope", "Acp-Session-Id", sess}), 404, "unknown Acp-Connection-Id"},
		{"post other agent's connection", "POST", "/acp/test", notif, with(ct, cid, []string{"Acp-Session-Id", sess}), 404, "unknown Acp-Connection-Id"},
		{"post session mismatch", "POST", "/acp/mock", notif, with(ct, cid, []string{"Acp-Session-Id", "other"}), 400, "does not match"},
		{"post session missing", "POST", "/acp/mock", notif, with(ct, cid), 400, "missing Acp-Session-Id"},
		{"post initialize on connection", "POST", "/acp/mock", stdInit, with(ct, cid), 400, "not allowed on an existing connection"},
		{"post unknown agent", "POST", "/acp/nosuch", stdInit, ct, 400, "unsupported agent"},
		{"post body too large", "POST", "/acp/mock", `{"x":"` + strings.Repeat("a", 2<<20) + `"}`, with(ct, cid), 413, "payload too large"},
		{"get accept json", "GET", "/acp/mock", "", with(cid, []string{"Accept", "application/json"}), 406, "text/event-stream"},
		{"get accept wildcard", "GET", "/acp/mock", "", with(cid, []string{"Accept", "*/*"}), 406, "text/event-stream"},
		{"get missing connection id", "GET", "/acp/mock", "", []string{"Accept", "text/event-stream"}, 400, "missing Acp-Connection-Id"},
		{"get unknown connection id", "GET", "/acp/mock", "", []string{"Accept", "text/event-stream", "Acp-Connection-Id", "nope"}, 404, "unknown Acp-Connection-Id"},
		{"get bad Last-Event-ID", "GET", "/acp/mock", "", with(cid, []string{"Accept", "text/event-stream", "Last-Event-ID", "x"}), 400, "Last-Event-ID"},
		{"get second reader", "GET", "/acp/mock", "", with(cid, []string{"Accept", "text/event-stream"}), 409, "already has a reader"},
		{"delete missing connection id", "DELETE", "/acp/mock", "", nil, 400, "missing Acp-Connection-Id"},
		{"delete unknown connection id", "DELETE", "/acp/mock", "", []string{"Acp-Connection-Id", "nope"}, 404, "unknown Acp-Connection-Id"},
		{"websocket bad version", "GET", "/acp/mock", "", []string{"Upgrade", "websocket", "Connection", "Upgrade", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version", "8"}, 400, "Sec-WebSocket-Version"},
		{"websocket cross origin", "GET", "/acp/mock", "", []string{"Upgrade", "websocket", "Connection", "Upgrade", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version", "13", "Origin", "https://evil.example"}, 403, "permission denied"},
		{"wrong method", "PUT", "/acp/mock", "", nil, 405, "method not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body []byte
			if tt.body != "" {
				body = []byte(tt.body)
			}
			dd := d
			if tt.name == "post body too large" {
				d2 := harness.Start(t, harness.Options{Args: []string{"--max-acp-body", "1048576"}})
				id2 := stdConnect(t, d2)
				tt.headers = with(ct, []string{"Acp-Connection-Id", id2})
				dd = d2
			}
			st, h, b := dd.Do(tt.method, tt.path, body, tt.headers...)
			if st != tt.status {
				t.Fatalf("status %d, want %d: %s", st, tt.status, b)
			}
			if got := h.Get("Content-Type"); got != "application/problem+json" {
				t.Errorf("Content-Type %q, want application/problem+json", got)
			}
			var p struct {
				Status int    `json:"status"`
				Detail string `json:"detail"`
			}
			if err := json.Unmarshal(b, &p); err != nil || p.Status != tt.status || !strings.Contains(p.Detail, tt.detail) {
				t.Errorf("problem %s, want status %d and detail containing %q", b, tt.status, tt.detail)
			}
		})
	}
	// No refused request left an instance behind: only the one connection.
	st, _, b := d.Do(http.MethodGet, "/v1/acp", nil)
	var list struct{ Servers []struct{ ServerID string } }
	if st != 200 || json.Unmarshal(b, &list) != nil || len(list.Servers) != 1 || list.Servers[0].ServerID != id {
		t.Errorf("GET /v1/acp after refusals: %d %s", st, b)
	}
	if st, _, b := d.Do(http.MethodDelete, "/acp/mock", nil, cid...); st != http.StatusAccepted {
		t.Errorf("DELETE: %d %s", st, b)
	}
	for {
		ev, err := open.Next() // what was buffered, then the end
		if err != nil {
			if err != io.EOF {
				t.Errorf("connection stream after DELETE: %v, want EOF", err)
			}
			break
		}
		if !strings.Contains(ev.Data, `"id":2`) && !strings.Contains(ev.Data, "_adapter/agent_exited") {
			t.Errorf("connection stream carried %s", ev.Data)
		}
	}
}

// TestACPStdToken: the bearer token guards /acp as it guards /v1.
func TestACPStdToken(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: []string{"--token", "s3cret"}})
	for _, h := range [][]string{nil, {"Authorization", "Bearer wrong"}} {
		st, hdr, b := d.Do(http.MethodPost, "/acp/mock", []byte(stdInit), append([]string{"Content-Type", "application/json"}, h...)...)
		if st != http.StatusUnauthorized || hdr.Get("WWW-Authenticate") != "Bearer" {
			t.Errorf("POST without the token: %d %s", st, b)
		}
		c, err := dialWS(t, d.URL+"/acp/mock", h...)
		if err != nil || c.Resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("WebSocket without the token: %v %v", c, err)
		}
	}
	// Every path under /acp needs the token, unknown ones too.
	for _, p := range []string{"/acp", "/acp/", "/acp/mock/x", "/acp/mock/../../v1/health"} {
		if st, _, b := d.Do(http.MethodGet, p, nil); st != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d %s", p, st, b)
		}
	}
	id := stdConnect(t, d, "Authorization", "Bearer s3cret")

	// A browser cannot set headers on a WebSocket: the upgrade takes the
	// token as ?access_token=, as the processes terminal does.
	c, err := dialWS(t, wsURL(d, "mock")+"?access_token=wrong")
	if err != nil || c.Resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("WebSocket with a wrong access_token: %v %v", c, err)
	}
	c, err = dialWS(t, wsURL(d, "mock")+"?access_token=s3cret")
	if err != nil || c.Resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("WebSocket with access_token: %v %v", c, err)
	}
	c.send(t, stdInit)
	if got := c.readText(t, 10*time.Second); !strings.Contains(got, `"id":1`) {
		t.Errorf("initialize over a socket opened with access_token: %s", got)
	}
	c.Close()
	// Only there: the SSE stream and the other methods take the header.
	for _, r := range []struct {
		method  string
		headers []string
	}{
		{http.MethodGet, []string{"Accept", "text/event-stream", "Acp-Connection-Id", id}},
		{http.MethodPost, []string{"Content-Type", "application/json", "Acp-Connection-Id", id}},
		{http.MethodDelete, []string{"Acp-Connection-Id", id}},
	} {
		var body []byte
		if r.method == http.MethodPost {
			body = []byte(`{"jsonrpc":"2.0","id":2,"method":"x/echo"}`)
		}
		if st, _, b := d.Do(r.method, "/acp/mock?access_token=s3cret", body, r.headers...); st != http.StatusUnauthorized {
			t.Errorf("%s with access_token: %d %s", r.method, st, b)
		}
	}
}

// TestACPStdSessionStreams: a session's stream takes that session's
// messages (the TypeScript SDK opens one per session); the connection's
// stream takes the rest; nothing goes out twice; Last-Event-ID resumes.
func TestACPStdSessionStreams(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	id := stdConnect(t, d)
	conn := d.Stream("/acp/mock", "Acp-Connection-Id", id)
	ct := []string{"Content-Type", "application/json", "Acp-Connection-Id", id}
	if st, _, b := d.Do(http.MethodPost, "/acp/mock", []byte(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`), ct...); st != http.StatusAccepted {
		t.Fatalf("session/new: %d %s", st, b)
	}
	ev := conn.NextWithin(t, 10*time.Second)
	var res struct {
		Result struct{ SessionID string } `json:"result"`
	}
	if err := json.Unmarshal([]byte(ev.Data), &res); err != nil || res.Result.SessionID == "" {
		t.Fatalf("session/new response on the connection stream: %s", ev.Data)
	}
	sid := res.Result.SessionID
	sess := d.Stream("/acp/mock", "Acp-Connection-Id", id, "Acp-Session-Id", sid)
	prompt := `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"stream 50"}]}}`
	if st, _, b := d.Do(http.MethodPost, "/acp/mock", []byte(prompt), append(ct, "Acp-Session-Id", sid)...); st != http.StatusAccepted {
		t.Fatalf("prompt: %d %s", st, b)
	}
	var lastID string
	for i := 1; ; i++ {
		ev := sess.NextWithin(t, 10*time.Second)
		if strings.Contains(ev.Data, `"stopReason"`) {
			if i != 51 {
				t.Fatalf("turn ended after %d updates, want 50", i-1)
			}
			break
		}
		if want := `"mock: chunk ` + strconv.Itoa(i) + `"`; !strings.Contains(ev.Data, want) {
			t.Fatalf("update %d: %s, want %s", i, ev.Data, want)
		}
		if i == 10 {
			lastID = ev.ID
		}
	}
	// The connection stream saw none of it.
	ext := `{"jsonrpc":"2.0","id":4,"method":"_mock/echo","params":{}}`
	if st, _, _ := d.Do(http.MethodPost, "/acp/mock", []byte(ext), ct...); st != http.StatusAccepted {
		t.Fatal("ext POST refused")
	}
	if ev := conn.NextWithin(t, 10*time.Second); !strings.Contains(ev.Data, `"id":4`) {
		t.Fatalf("connection stream got %s, want the echo response (and no session traffic)", ev.Data)
	}
	// Resume: a new reader of the session stream, after event lastID.
	sess.Close()
	var again *harness.Stream
	for i := 0; i < 50; i++ { // the old reader's release is asynchronous
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.URL+"/acp/mock", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Acp-Connection-Id", id)
		req.Header.Set("Acp-Session-Id", sid)
		req.Header.Set("Last-Event-ID", lastID)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusConflict {
			resp.Body.Close()
			cancel()
			time.Sleep(20 * time.Millisecond)
			continue
		}
		again = harness.NewStream(resp, cancel)
		t.Cleanup(again.Close)
		break
	}
	if again == nil {
		t.Fatal("session stream still busy")
	}
	if ev := again.NextWithin(t, 10*time.Second); !strings.Contains(ev.Data, `"mock: chunk 11"`) {
		t.Fatalf("resumed after %s: %s, want chunk 11", lastID, ev.Data)
	}
}

// TestH2C: every route answers HTTP/2 with prior knowledge on the plain
// port, SSE included, and the standard transport works over one HTTP/2
// connection; HTTP/1.1 still works beside it.
func TestH2C(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	dials := 0
	tr := &http.Transport{Protocols: &p, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials++
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}, TLSClientConfig: &tls.Config{}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	do := func(method, path, body string, headers ...string) *http.Response {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, d.URL+path, rd)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s over h2c: %v", method, path, err)
		}
		if resp.ProtoMajor != 2 {
			t.Fatalf("%s %s: %s, want HTTP/2", method, path, resp.Proto)
		}
		return resp
	}
	for _, path := range []string{"/", "/v1/health", "/v1/agents", "/openapi.json", "/metrics"} {
		resp := do(http.MethodGet, path, "")
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s over h2c: %d", path, resp.StatusCode)
		}
	}
	resp := do(http.MethodPost, "/acp/mock", stdInit, "Content-Type", "application/json")
	id := resp.Header.Get("Acp-Connection-Id")
	resp.Body.Close()
	if resp.StatusCode != 200 || id == "" {
		t.Fatalf("initialize over h2c: %d %q", resp.StatusCode, id)
	}
	sse := do(http.MethodGet, "/acp/mock", "", "Accept", "text/event-stream", "Acp-Connection-Id", id)
	defer sse.Body.Close()
	resp = do(http.MethodPost, "/acp/mock", `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`,
		"Content-Type", "application/json", "Acp-Connection-Id", id)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("session/new over h2c: %d", resp.StatusCode)
	}
	s := harness.NewStream(sse, nil)
	if ev := s.NextWithin(t, 10*time.Second); !strings.Contains(ev.Data, `"sessionId"`) {
		t.Fatalf("stream over h2c: %s", ev.Data)
	}
	// /v1/acp's SSE over h2c as well.
	v1 := do(http.MethodGet, "/v1/acp/"+id, "", "Accept", "text/event-stream")
	defer v1.Body.Close()
	s1 := harness.NewStream(v1, nil)
	if ev := s1.NextWithin(t, 10*time.Second); ev.ID != "1" {
		t.Fatalf("/v1/acp stream over h2c: first event %+v", ev)
	}
	if dials != 1 {
		t.Errorf("%d TCP connections for all of it, want 1 (HTTP/2 multiplexing)", dials)
	}
	// HTTP/1.1 beside it.
	if st, _, _ := d.Do(http.MethodGet, "/v1/health", nil); st != 200 {
		t.Errorf("HTTP/1.1 health: %d", st)
	}
}
