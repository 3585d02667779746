package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/app/agents"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// agentsServer serves /v1/agents over a memory filesystem whose registry
// fails, so only the mock and launchers on disk can be installed.
func agentsServer(t *testing.T) (*httptest.Server, afero.Fs) {
	t.Helper()
	fs := afero.NewMemMapFs()
	in := &agents.Installer{Fs: fs, Dir: "/bin-dir", RegistryURL: "http://registry.test",
		Registry: &porttest.FakeRegistry{FetchFunc: func(context.Context) (domain.Registry, error) {
			return domain.Registry{}, errors.New("ACP registry: GET http://registry.test: connection refused")
		}}}
	ag := &agents.Agents{Fs: fs, InstallDir: "/bin-dir", SelfExe: "/self", Installer: in}
	start := time.Now().Add(-2 * time.Second)
	cat := &agents.Catalog{Agents: ag, Running: func() map[string]time.Time { return map[string]time.Time{"mock": start} }}
	srv := httptest.NewServer(New(Config{Catalog: cat}))
	t.Cleanup(srv.Close)
	return srv, fs
}

func call(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = io.Copy(&b, resp.Body)
	return resp.StatusCode, strings.TrimSpace(b.String())
}

func TestAgentsRoutes(t *testing.T) {
	srv, _ := agentsServer(t)

	st, body := call(t, http.MethodGet, srv.URL+"/v1/agents", "")
	if st != 200 || !strings.HasPrefix(body, `{"agents":[{"id":"claude","installed":false,"credentialsAvailable":`) {
		t.Fatalf("list: %d %s", st, body)
	}
	var list struct{ Agents []domain.AgentInfo }
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Agents) != 7 {
		t.Fatalf("list: %v, %d agents", err, len(list.Agents))
	}
	if s := list.Agents[6].ServerStatus; s == nil || s.Status != "running" || s.UptimeMs < 2000 {
		t.Errorf("mock serverStatus = %+v", s)
	}

	st, body = call(t, http.MethodGet, srv.URL+"/v1/agents/mock?config=true&no_cache=true", "")
	if st != 200 || !strings.Contains(body, `{"id":"mock","installed":true,"credentialsAvailable":true,"version":"builtin","capabilities":{"planMode":true,`) || !strings.Contains(body, `"configOptions":[`) {
		t.Fatalf("mock: %d %s", st, body)
	}

	st, body = call(t, http.MethodGet, srv.URL+"/v1/agents/nobody", "")
	if st != 400 || !strings.Contains(body, `"type":"urn:sandbox-agent:error:unsupported_agent"`) || !strings.Contains(body, `"agent":"nobody"`) {
		t.Fatalf("unknown: %d %s", st, body)
	}
}

func TestAgentInstallRoute(t *testing.T) {
	srv, _ := agentsServer(t)
	for _, body := range []string{"", "{}", `{"reinstall":false}`} {
		st, got := call(t, http.MethodPost, srv.URL+"/v1/agents/mock/install", body)
		if st != 200 || got != `{"already_installed":true,"artifacts":[]}` {
			t.Errorf("install mock with %q: %d %s", body, st, got)
		}
	}
	st, got := call(t, http.MethodPost, srv.URL+"/v1/agents/claude/install", "{}")
	if st != 500 || !strings.Contains(got, `"type":"urn:sandbox-agent:error:install_failed"`) ||
		!strings.Contains(got, `"detail":"install failed: claude"`) || !strings.Contains(got, `"stderr":"fetch registry: ACP registry: GET http://registry.test`) {
		t.Errorf("failed install: %d %s", st, got)
	}
	st, got = call(t, http.MethodPost, srv.URL+"/v1/agents/nobody/install", "{}")
	if st != 400 || !strings.Contains(got, "unsupported_agent") {
		t.Errorf("unknown install: %d %s", st, got)
	}
	st, got = call(t, http.MethodPost, srv.URL+"/v1/agents/mock/install", "[1]")
	if st/100 != 4 || !strings.Contains(got, "urn:sandbox-agent:error:invalid_request") {
		t.Errorf("bad body: %d %s", st, got)
	}
}
