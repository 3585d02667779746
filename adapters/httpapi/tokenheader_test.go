package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/app/processes"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Behind a router that drops Authorization (agent-sandbox's
// sandbox-router), the token comes in Config.TokenHeader: bare or as
// "Bearer <token>", before Authorization (which then carries the router's
// own token, if anything), on every route and on WebSocket upgrades.
func TestTokenHeader(t *testing.T) {
	srv := plainServer(t, Config{Token: "s3cret", TokenHeader: "X-Sandbox-Agent-Token"})
	for _, c := range []struct {
		name    string
		headers map[string]string
		status  int
	}{
		{"bare token in the header", map[string]string{"X-Sandbox-Agent-Token": "s3cret"}, 200},
		{"bearer form in the header", map[string]string{"X-Sandbox-Agent-Token": "Bearer s3cret"}, 200},
		{"header name in another case", map[string]string{"x-sandbox-agent-token": "s3cret"}, 200},
		{"the header wins over a router's Authorization", map[string]string{"X-Sandbox-Agent-Token": "s3cret", "Authorization": "Bearer router-token"}, 200},
		{"a wrong token in the header is not rescued by Authorization", map[string]string{"X-Sandbox-Agent-Token": "nope", "Authorization": "Bearer s3cret"}, 401},
		{"Authorization alone still works", map[string]string{"Authorization": "Bearer s3cret"}, 200},
		{"wrong token", map[string]string{"X-Sandbox-Agent-Token": "s3cre"}, 401},
		{"none", nil, 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, path := range []string{"/v1/health", "/v1/acp", "/v1/nope", "/metrics"} {
				resp, body := doHTTP(t, "GET", srv.URL+path, "", c.headers)
				want := c.status
				if want == 200 && path == "/v1/nope" {
					want = 404
				}
				if resp.StatusCode != want {
					t.Errorf("%s: status %d, want %d: %s", path, resp.StatusCode, want, body)
				}
			}
		})
	}

	// A policy sees the token where it looks for one: the authorization
	// header.
	fa := &fakeAuthorizer{decide: allowAll}
	psrv := httptest.NewServer(New(Config{
		Instances: acp.NewInstances(acp.DefaultOptions(), nil, nil),
		Token:     "tok", TokenHeader: "X-Sandbox-Agent-Token", Authorizer: fa,
	}))
	t.Cleanup(psrv.Close)
	if resp, body := doHTTP(t, "GET", psrv.URL+"/v1/health", "", map[string]string{"X-Sandbox-Agent-Token": "tok"}); resp.StatusCode != 200 {
		t.Fatalf("with a policy: %d %s", resp.StatusCode, body)
	}
	if got := fa.requests(); len(got) != 1 || got[0].Headers["authorization"][0] != "Bearer tok" {
		t.Errorf("the policy saw %+v", got)
	}
}

// --health-public: /v1/health answers without the token and without the
// policies (probes have neither); every other route still needs both.
func TestHealthPublic(t *testing.T) {
	fa := &fakeAuthorizer{decide: func(domain.AuthRequest) (domain.Decision, error) {
		return domain.Decision{Verdict: domain.Deny, Status: 403, Message: "no"}, nil
	}}
	srv := httptest.NewServer(New(Config{
		Instances: acp.NewInstances(acp.DefaultOptions(), nil, nil),
		Token:     "tok", HealthPublic: true, Authorizer: fa,
	}))
	t.Cleanup(srv.Close)
	if resp, body := doHTTP(t, "GET", srv.URL+"/v1/health", "", nil); resp.StatusCode != 200 {
		t.Errorf("health: %d %s", resp.StatusCode, body)
	}
	if len(fa.requests()) != 0 {
		t.Errorf("a policy judged the public health route")
	}
	for _, path := range []string{"/v1/acp", "/v1/agents", "/metrics"} {
		if resp, _ := doHTTP(t, "GET", srv.URL+path, "", nil); resp.StatusCode != 401 && resp.StatusCode != 403 {
			t.Errorf("%s without a token: %d", path, resp.StatusCode)
		}
	}
	closed := plainServer(t, Config{Token: "tok"})
	if resp, _ := doHTTP(t, "GET", closed.URL+"/v1/health", "", nil); resp.StatusCode != 401 {
		t.Errorf("health without --health-public: %d", resp.StatusCode)
	}
}

// ?access_token= is a credential on the two WebSocket routes only (the
// terminal's, on any GET, as the reference reads it, and /acp/{agent}'s
// upgrade), as docs/auth.md says: not on another route whose path merely ends as
// the terminal's does (an id holding an escaped '/': GET
// /v1/processes/x%2Fterminal%2Fws is the process route), not on an
// unknown path under /acp with an Upgrade header. Each of these once
// took the query's token (404 past the token check, not 401).
func TestQueryTokenOnlyOnTheSockets(t *testing.T) {
	srv := plainServer(t, Config{Token: "tok", Processes: &processes.Service{}})
	upgrade := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
	for _, c := range []struct {
		name, target string
		headers      map[string]string
		want         int // 0: anything but 401
	}{
		{"the process route, its id ending in /terminal/ws", "/v1/processes/x%2Fterminal%2Fws?access_token=tok", nil, 401},
		{"the same, with an Upgrade header", "/v1/processes/x%2Fterminal%2Fws?access_token=tok", upgrade, 401},
		// As the reference: the terminal's route takes it on a plain GET
		// too (its answer is the route's: no such process, not 401).
		{"the terminal's route without an upgrade", "/v1/processes/p1/terminal/ws?access_token=tok", nil, 0},
		{"the same, a wrong token", "/v1/processes/p1/terminal/ws?access_token=nope", nil, 401},
		{"/acp/{agent} without an upgrade (its SSE GET)", "/acp/mock?access_token=tok", nil, 401},
		{"an unknown path under /acp, upgrading", "/acp/mock/x?access_token=tok", upgrade, 401},
		{"an unknown path under /v1, upgrading", "/v1/processes/p1/terminal/ws/x?access_token=tok", upgrade, 401},
		// Past the token check: no such process (404), not 401.
		{"the terminal's upgrade", "/v1/processes/p1/terminal/ws?access_token=tok", upgrade, 0},
		{"the terminal's upgrade, a wrong token", "/v1/processes/p1/terminal/ws?access_token=nope", upgrade, 401},
		{"/acp/{agent}'s upgrade", "/acp/mock?access_token=tok", upgrade, 0},
	} {
		resp, body := doHTTP(t, "GET", srv.URL+c.target, "", c.headers)
		if got := resp.StatusCode; (c.want != 0 && got != c.want) || (c.want == 0 && got == 401) {
			t.Errorf("%s: GET %s: %d, want %d: %s", c.name, c.target, got, c.want, body)
		}
	}
}

// The headers a router adds (X-Forwarded-*, Forwarded, X-Real-IP,
// X-Sandbox-*) decide nothing: a caller reaching the daemon directly can
// send them too (docs/deploying.md). The Host check reads Host, the
// Origin check compares with Host, and a policy's remoteAddr is the
// connection's peer.
func TestForwardedHeadersDecideNothing(t *testing.T) {
	forwarded := map[string]string{
		"X-Forwarded-Host": "localhost", "X-Forwarded-Proto": "https", "X-Forwarded-For": "10.9.8.7",
		"Forwarded": "for=10.9.8.7;host=localhost;proto=https", "X-Real-Ip": "10.9.8.7",
		"X-Sandbox-Id": "box", "X-Sandbox-Agent-Token": "tok",
	}
	with := func(extra map[string]string) map[string]string {
		h := map[string]string{}
		for k, v := range forwarded {
			h[k] = v
		}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	fa := &fakeAuthorizer{decide: allowAll}
	srv := plainServer(t, Config{Token: "tok", TokenHeader: "X-Sandbox-Agent-Token", CheckHost: true, Authorizer: fa})
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, c := range []struct {
		name   string
		hdr    map[string]string
		status int
	}{
		{"a rebinding name, forwarded as localhost", with(map[string]string{"Host": "evil.example"}), 421},
		{"another site's POST, its host forwarded", with(map[string]string{"Origin": "https://evil.example", "X-Forwarded-Host": "evil.example"}), 403},
		{"the daemon's own origin, forwarded as https", with(map[string]string{"Origin": "http://" + host}), 404},
	} {
		resp, _ := doHTTP(t, "POST", srv.URL+"/v1/nope", "", c.hdr)
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.status)
		}
	}
	if resp, body := doHTTP(t, "GET", srv.URL+"/v1/health", "", forwarded); resp.StatusCode != 200 {
		t.Fatalf("health: %d %s", resp.StatusCode, body)
	}
	got := fa.requests()
	if len(got) != 1 || !strings.HasPrefix(got[0].RemoteAddr, "127.0.0.1:") {
		t.Errorf("the policy saw %+v, want the peer's address", got)
	}
}
