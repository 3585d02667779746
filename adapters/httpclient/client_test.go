package httpclient

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

func TestClientAgents(t *testing.T) {
	var gotAuth, gotBody, gotQuery string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		gotQuery = r.URL.RawQuery
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
		switch r.URL.Path {
		case "/v1/agents":
			w.Write([]byte(`{"agents":[{"id":"claude","installed":true,"credentialsAvailable":false,"capabilities":{"planMode":true}}]}`))
		case "/v1/agents/claude/install":
			w.Write([]byte(`{"already_installed":false,"artifacts":[{"kind":"agent_process","path":"/p","source":"registry","version":"1"}]}`))
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(500)
			w.Write([]byte(`{"type":"urn:sandbox-agent:error:install_failed","title":"Install Failed","status":500,"detail":"install failed: x","agent":"x","details":{"stderr":"npm broke"}}`))
		}
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL + "/", Token: "tok"}
	ctx := context.Background()

	agents, err := c.ListAgents(ctx, true, true)
	if err != nil || len(agents) != 1 || !agents[0].Installed || !agents[0].Capabilities.PlanMode {
		t.Fatalf("list = %+v, %v", agents, err)
	}
	if gotAuth != "Bearer tok" || gotQuery != "config=true&no_cache=true" {
		t.Errorf("auth %q, query %q", gotAuth, gotQuery)
	}
	res, err := c.InstallAgent(ctx, "claude", domain.InstallOptions{Reinstall: true})
	if err != nil || res.AlreadyInstalled || res.Artifacts[0].Source != domain.SourceRegistry {
		t.Fatalf("install = %+v, %v", res, err)
	}
	var sent map[string]any
	if json.Unmarshal([]byte(gotBody), &sent) != nil || sent["reinstall"] != true {
		t.Errorf("body %s", gotBody)
	}
	_, err = c.InstallAgent(ctx, "x", domain.InstallOptions{})
	var p *Problem
	if !errors.As(err, &p) || p.Status != 500 || p.Type != "urn:sandbox-agent:error:install_failed" || p.Details["stderr"] != "npm broke" {
		t.Fatalf("err = %#v", err)
	}
}
