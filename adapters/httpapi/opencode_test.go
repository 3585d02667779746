package httpapi

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// fakeOpenCode stands for adapters/opencode: it describes every request
// as acp.send on the agent a body names (or "mock"), and answers with the
// body it read.
type fakeOpenCode struct {
	mu    sync.Mutex
	paths []string
}

func (f *fakeOpenCode) Describe(r *http.Request, body []byte, req *domain.AuthRequest) {
	req.Action, req.Agent = domain.ActionACPSend, "mock"
	if strings.Contains(string(body), "claude") {
		req.Agent = "claude"
	}
}

func (f *fakeOpenCode) StartAllowed(ctx context.Context, _ bool) context.Context { return ctx }

func (f *fakeOpenCode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.paths = append(f.paths, r.URL.Path)
	f.mu.Unlock()
	b, _ := io.ReadAll(r.Body)
	_, _ = w.Write(b)
}

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

func TestOpenCodeTokenOrPassword(t *testing.T) {
	oc := &fakeOpenCode{}
	srv := httptest.NewServer(New(Config{Token: "s3cret", OpenCode: oc}))
	defer srv.Close()
	for _, tc := range []struct {
		name, auth string
		want       int
	}{
		{"none", "", http.StatusUnauthorized},
		{"bearer", "Bearer s3cret", http.StatusOK},
		{"wrong bearer", "Bearer nope", http.StatusUnauthorized},
		{"opencode --password", basic("opencode", "s3cret"), http.StatusOK},
		{"another user name", basic("me", "s3cret"), http.StatusOK},
		{"wrong password", basic("opencode", "nope"), http.StatusUnauthorized},
		{"not base64", "Basic !!!", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", srv.URL+"/opencode/session", nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	if len(oc.paths) != 3 {
		t.Errorf("the adapter served %v: only authorised requests reach it", oc.paths)
	}
}

func TestOpenCodePoliciesSeeTheAgentOfTheBody(t *testing.T) {
	rec := &recorder{}
	oc := &fakeOpenCode{}
	srv := httptest.NewServer(New(Config{Authorizer: rec, OpenCode: oc}))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/opencode/session/ses_1/message", "application/json", strings.NewReader(`{"model":{"providerID":"claude"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := rec.take()
	if len(got) != 1 || got[0].Action != domain.ActionACPSend || got[0].Agent != "claude" ||
		got[0].Route != openCodeRoute || got[0].OperationID != openCodeOpID || got[0].Path != "/opencode/session/ses_1/message" {
		t.Fatalf("the policies saw %+v", got)
	}
	if resp.StatusCode != 418 {
		t.Errorf("status %d, want the policy's 418", resp.StatusCode)
	}
}

func TestOpenCodeBodyStillReadableAfterPolicies(t *testing.T) {
	grant := grantAll{}
	oc := &fakeOpenCode{}
	srv := httptest.NewServer(New(Config{Authorizer: grant, OpenCode: oc}))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/opencode/session", "application/json", strings.NewReader(`{"title":"t"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != `{"title":"t"}` {
		t.Errorf("the adapter read %q", b)
	}
}

type grantAll struct{}

func (grantAll) Authorize(context.Context, domain.AuthRequest) (domain.Decision, error) {
	return domain.Decision{Verdict: domain.Grant, Principal: "p"}, nil
}

func TestOpenCodeBrowserGuards(t *testing.T) {
	oc := &fakeOpenCode{}
	srv := httptest.NewServer(New(Config{OpenCode: oc, CheckHost: true}))
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/opencode/session", strings.NewReader(`{}`))
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin POST: %d, want 403", resp.StatusCode)
	}
	req, _ = http.NewRequest("GET", srv.URL+"/opencode/session", nil)
	req.Host = "rebound.example"
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("foreign Host: %d, want 421", resp.StatusCode)
	}
	if len(oc.paths) != 0 {
		t.Errorf("the adapter served %v", oc.paths)
	}
}

func TestOpenCodeUnmountedIs404(t *testing.T) {
	srv := httptest.NewServer(New(Config{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/opencode/session")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("status %d", resp.StatusCode)
	}
}
