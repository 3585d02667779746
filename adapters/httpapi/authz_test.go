package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/app/agents"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// fakeAuthorizer records requests and answers with decide.
type fakeAuthorizer struct {
	mu     sync.Mutex
	seen   []domain.AuthRequest
	decide func(domain.AuthRequest) (domain.Decision, error)
}

var _ ports.Authorizer = (*fakeAuthorizer)(nil)

func (f *fakeAuthorizer) Authorize(_ context.Context, req domain.AuthRequest) (domain.Decision, error) {
	f.mu.Lock()
	f.seen = append(f.seen, req)
	decide := f.decide
	f.mu.Unlock()
	return decide(req)
}

// setDecide changes the answer between requests.
func (f *fakeAuthorizer) setDecide(decide func(domain.AuthRequest) (domain.Decision, error)) {
	f.mu.Lock()
	f.decide = decide
	f.mu.Unlock()
}

func (f *fakeAuthorizer) requests() []domain.AuthRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]domain.AuthRequest(nil), f.seen...)
}

func authzServer(t *testing.T, decide func(domain.AuthRequest) (domain.Decision, error)) (*httptest.Server, *fakeAuthorizer) {
	t.Helper()
	fa := &fakeAuthorizer{decide: decide}
	srv := httptest.NewServer(New(Config{
		Instances:  acp.NewInstances(acp.DefaultOptions(), nil, nil),
		Token:      "tok",
		Authorizer: fa,
	}))
	t.Cleanup(srv.Close)
	return srv, fa
}

func allowAll(domain.AuthRequest) (domain.Decision, error) {
	return domain.Decision{Verdict: domain.Pass}, nil
}

func send(t *testing.T, srv *httptest.Server, method, target, body string, headers ...string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, srv.URL+target, rd)
	req.Header.Set("Authorization", "Bearer tok")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAuthorizerSeesRequest(t *testing.T) {
	srv, fa := authzServer(t, allowAll)
	if st, body := send(t, srv, "GET", "/v1/health?x=1&x=2", "", "X-Custom", "v"); st != 200 {
		t.Fatalf("status %d: %s", st, body)
	}
	got := fa.requests()
	if len(got) != 1 {
		t.Fatalf("authorizer called %d times", len(got))
	}
	r := got[0]
	if r.Method != "GET" || r.Route != "/v1/health" || r.OperationID != "get_v1_health" || r.Path != "/v1/health" ||
		!reflect.DeepEqual(r.Query, map[string][]string{"x": {"1", "2"}}) || r.RemoteAddr == "" || r.RPC != nil {
		t.Errorf("request: %+v", r)
	}
	if r.Headers["x-custom"][0] != "v" || r.Headers["authorization"][0] != "Bearer tok" || len(r.Headers["host"]) != 1 {
		t.Errorf("headers: %v", r.Headers)
	}
}

// The policies run first, then the token check: a request without the
// token reaches the policies, and is refused (401) when they all pass; a
// policy's grant lets it through without the token.
func TestPoliciesBeforeToken(t *testing.T) {
	srv, fa := authzServer(t, func(r domain.AuthRequest) (domain.Decision, error) {
		if r.Headers["x-key"] != nil {
			return domain.Decision{Verdict: domain.Grant, Principal: "key-holder"}, nil
		}
		return domain.Decision{Verdict: domain.Pass}, nil
	})
	get := func(headers ...string) (int, http.Header) {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/health", nil)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	if st, h := get(); st != 401 || h.Get("WWW-Authenticate") != "Bearer" || len(fa.requests()) != 1 {
		t.Errorf("no token, policies pass: %d %v, policies asked %d times", st, h, len(fa.requests()))
	}
	if st, _ := get("X-Key", "1"); st != 200 {
		t.Errorf("granted without the token: %d", st)
	}
	if st, _ := get("Authorization", "Bearer tok"); st != 200 {
		t.Errorf("token: %d", st)
	}
}

func TestDenyIsProblem(t *testing.T) {
	tests := []struct {
		name       string
		decision   domain.Decision
		err        error
		wantStatus int
		wantType   string
		wantMsg    string
	}{
		{"policy status", domain.Decision{Status: 429, Message: "slow down"}, nil, 429, "permission_denied", "slow down"},
		{"defaults", domain.Decision{Status: 200}, nil, 403, "permission_denied", "denied by policy"},
		{"authorizer error", domain.Decision{}, errors.New("boom"), 500, "internal", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := authzServer(t, func(domain.AuthRequest) (domain.Decision, error) { return tt.decision, tt.err })
			st, body := send(t, srv, "GET", "/v1/health", "")
			var p Problem
			if err := json.Unmarshal([]byte(body), &p); err != nil {
				t.Fatalf("%d %s: %v", st, body, err)
			}
			if st != tt.wantStatus || p.Type != "urn:sandbox-agent:error:"+tt.wantType {
				t.Errorf("got %d %s", st, body)
			}
			if tt.wantMsg != "" && (p.Detail != "permission denied" || p.Details["message"] != tt.wantMsg) {
				t.Errorf("body %s, want details.message %q", body, tt.wantMsg)
			}
		})
	}
}

func TestACPPostAuthorisedWithRPC(t *testing.T) {
	srv, fa := authzServer(t, func(r domain.AuthRequest) (domain.Decision, error) {
		if r.RPC != nil && strings.HasPrefix(r.RPC.Method, "terminal/") {
			return domain.Decision{Status: 403, Message: "no terminals"}, nil
		}
		return domain.Decision{Verdict: domain.Pass}, nil
	})
	st, body := send(t, srv, "POST", "/v1/acp/s1?agent=mock", `{"jsonrpc":"2.0","id":7,"method":"terminal/create"}`, "Content-Type", "application/json")
	if st != 403 || !strings.Contains(body, "no terminals") {
		t.Errorf("got %d %s", st, body)
	}
	got := fa.requests()
	want := domain.AuthRequest{Method: "POST", Route: "/v1/acp/{server_id}", OperationID: "post_v1_acp", Path: "/v1/acp/s1",
		ServerID: "s1", Agent: "mock", Action: domain.ActionACPStart, RPC: &domain.RPCInfo{Kind: "request", ID: "7", Method: "terminal/create"}}
	if len(got) != 1 {
		t.Fatalf("authorizer called %d times, want once (in the handler, not the middleware)", len(got))
	}
	g := got[0]
	g.Headers, g.Query, g.RemoteAddr = nil, nil, ""
	if !reflect.DeepEqual(g, want) {
		t.Errorf("got %+v\nwant %+v", g, want)
	}

	// A body that is not JSON is refused before any policy runs.
	if st, _ := send(t, srv, "POST", "/v1/acp/s1?agent=mock", `nope`, "Content-Type", "application/json"); st != 400 || len(fa.requests()) != 1 {
		t.Errorf("bad body: %d, authorizer called %d times", st, len(fa.requests()))
	}
}

// A stream is authorised once, when it opens; a denied one never opens.
func TestStreamAuthorisedAtOpen(t *testing.T) {
	srv, fa := authzServer(t, func(r domain.AuthRequest) (domain.Decision, error) {
		if r.ServerID != "secret" {
			return domain.Decision{Verdict: domain.Pass}, nil
		}
		return domain.Decision{Status: 403, Message: "not yours"}, nil
	})
	if st, body := send(t, srv, "GET", "/v1/acp/secret", "", "Accept", "text/event-stream"); st != 403 || !strings.Contains(body, "not yours") {
		t.Errorf("denied stream: %d %s", st, body)
	}
	if st, _ := send(t, srv, "GET", "/v1/acp/other", "", "Accept", "text/event-stream"); st != 404 {
		t.Errorf("allowed stream of an unknown id: %d, want 404 from the handler", st)
	}
	if got := fa.requests(); len(got) != 2 || got[1].OperationID != "get_v1_acp" || got[1].ServerID != "other" {
		t.Errorf("requests: %+v", got)
	}
}

// /v1/agents/{agent} names the agent in its path.
func TestAgentFromPath(t *testing.T) {
	fa := &fakeAuthorizer{decide: func(domain.AuthRequest) (domain.Decision, error) {
		return domain.Decision{Status: 403, Message: "no"}, nil
	}}
	srv := httptest.NewServer(New(Config{Catalog: &agents.Catalog{}, Authorizer: fa}))
	defer srv.Close()
	if st, _ := send(t, srv, "POST", "/v1/agents/claude/install", "{}", "Content-Type", "application/json"); st != 403 {
		t.Errorf("status %d", st)
	}
	if got := fa.requests(); len(got) != 1 || got[0].Agent != "claude" || got[0].OperationID != "post_v1_agent_install" || got[0].Route != "/v1/agents/{agent}/install" {
		t.Errorf("requests: %+v", got)
	}
}

// ACP's standard transport goes through the same chain: the token, and the
// policies with the JSON-RPC peeked from each POST (the POST is authorised
// in its handler only), and GET/DELETE in the middleware, each with its
// action and the connection id as the server id.
func TestACPStdAuthorised(t *testing.T) {
	srv, fa := authzServer(t, func(r domain.AuthRequest) (domain.Decision, error) {
		if r.RPC != nil && r.RPC.Method == "initialize" {
			return domain.Decision{Status: 403, Message: "no new connections"}, nil
		}
		if r.Action == domain.ActionACPStop {
			return domain.Decision{Status: 403, Message: "no stops"}, nil
		}
		return domain.Decision{Verdict: domain.Pass}, nil
	})
	st, body := send(t, srv, "POST", "/acp/mock", `{"jsonrpc":"2.0","id":1,"method":"initialize"}`, "Content-Type", "application/json")
	if st != 403 || !strings.Contains(body, "no new connections") {
		t.Errorf("got %d %s", st, body)
	}
	got := fa.requests()
	if len(got) != 1 {
		t.Fatalf("authorizer called %d times, want once", len(got))
	}
	g := got[0]
	g.Headers, g.Query, g.RemoteAddr = nil, nil, ""
	want := domain.AuthRequest{Method: "POST", Route: "/acp/{agent}", OperationID: "post_acp", Path: "/acp/mock",
		Agent: "mock", Action: domain.ActionACPStart, RPC: &domain.RPCInfo{Kind: "request", ID: "1", Method: "initialize"}}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("got %+v\nwant %+v", g, want)
	}

	// A message on a connection: acp.send, decided before the connection
	// is looked up (unknown: 404 once allowed).
	st, body = send(t, srv, "POST", "/acp/mock", `{"jsonrpc":"2.0","id":2,"method":"x/echo"}`, "Content-Type", "application/json", "Acp-Connection-Id", "c1")
	if st != 404 {
		t.Errorf("message to an unknown connection: %d %s", st, body)
	}
	got = fa.requests()
	if len(got) != 2 {
		t.Fatalf("authorizer called %d times, want 2", len(got))
	}
	if g := got[1]; g.Action != domain.ActionACPSend || g.ServerID != "c1" || g.Agent != "mock" || g.RPC == nil || g.RPC.Method != "x/echo" {
		t.Errorf("send: %+v", g)
	}

	if st, _ := send(t, srv, "GET", "/acp/mock", "", "Accept", "text/event-stream", "Acp-Connection-Id", "c1"); st != 404 {
		t.Errorf("stream of an unknown connection: %d", st)
	}
	if got := fa.requests(); len(got) != 3 || got[2].OperationID != "get_acp" || got[2].Action != domain.ActionACPRead || got[2].ServerID != "c1" || got[2].Agent != "mock" {
		t.Errorf("requests: %+v", got)
	}
	if st, body := send(t, srv, "DELETE", "/acp/mock", "", "Acp-Connection-Id", "c1"); st != 403 || !strings.Contains(body, "no stops") {
		t.Errorf("delete: %d %s", st, body)
	}
	if got := fa.requests(); len(got) != 4 || got[3].Action != domain.ActionACPStop || got[3].ServerID != "c1" {
		t.Errorf("requests: %+v", got)
	}
	// A WebSocket upgrade creates a connection: acp.start, no server id
	// yet, decided before the upgrade.
	fa.setDecide(func(domain.AuthRequest) (domain.Decision, error) {
		return domain.Decision{Status: 403, Message: "no sockets"}, nil
	})
	st, body = send(t, srv, "GET", "/acp/mock", "", "Connection", "Upgrade", "Upgrade", "websocket",
		"Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	if st != 403 || !strings.Contains(body, "no sockets") {
		t.Errorf("upgrade: %d %s", st, body)
	}
	if got := fa.requests(); len(got) != 5 || got[4].Action != domain.ActionACPStart || got[4].ServerID != "" || got[4].Agent != "mock" {
		t.Errorf("requests: %+v", got)
	}

	// The token applies to /acp as to /v1: a policy's pass leaves the
	// token check, also on a POST decided in its handler.
	fa.setDecide(allowAll)
	req, _ := http.NewRequest("POST", srv.URL+"/acp/mock", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"x/echo"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Acp-Connection-Id", "c1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("no token: %d, want 401", resp.StatusCode)
	}
}

// Without policies the middleware decides every /acp request with its
// action (the token check), and a start implies agent.install when the
// agent cannot run yet, as on /v1/acp.
func TestACPStdTokenOnly(t *testing.T) {
	srv := httptest.NewServer(New(Config{Instances: acp.NewInstances(acp.DefaultOptions(), nil, nil), Token: "tok"}))
	defer srv.Close()
	do := func(method, target string, headers ...string) int {
		req, _ := http.NewRequest(method, srv.URL+target, nil)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	upgrade := []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}
	for _, c := range []struct {
		name, method, target string
		headers              []string
		want                 int
	}{
		{"unknown path under /acp", "GET", "/acp/mock/x", nil, 401},
		{"/acp itself", "GET", "/acp", nil, 401},
		{"/acp/", "POST", "/acp/", nil, 401},
		{"wrong method", "PUT", "/acp/mock", nil, 401},
		{"with the token, unknown path", "GET", "/acp/mock/x", []string{"Authorization", "Bearer tok"}, 404},
		{"with the token, wrong method", "PUT", "/acp/mock", []string{"Authorization", "Bearer tok"}, 405},
		{"stream", "GET", "/acp/mock", []string{"Accept", "text/event-stream", "Acp-Connection-Id", "c1"}, 401},
		// ?access_token= counts on the WebSocket upgrade only.
		{"stream, token in the query", "GET", "/acp/mock?access_token=tok", []string{"Accept", "text/event-stream", "Acp-Connection-Id", "c1"}, 401},
		{"delete, token in the query", "DELETE", "/acp/mock?access_token=tok", []string{"Acp-Connection-Id", "c1"}, 401},
		{"upgrade, no token", "GET", "/acp/mock", upgrade, 401},
		{"upgrade, wrong token in the query", "GET", "/acp/mock?access_token=nope", upgrade, 401},
		// Past the token: the instances have no launcher, so the agent
		// cannot start (an error, not 401).
		{"upgrade, token in the query", "GET", "/acp/mock?access_token=tok", upgrade, 0},
	} {
		got := do(c.method, c.target, c.headers...)
		if (c.want != 0 && got != c.want) || (c.want == 0 && (got == 401 || got < 400)) {
			t.Errorf("%s: %s %s: %d, want %d", c.name, c.method, c.target, got, c.want)
		}
	}
}
