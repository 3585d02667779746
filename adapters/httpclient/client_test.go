package httpclient

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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

// Behind a router the daemon's token goes in the token header (Authorization
// carries the router's own), with the sandbox's address; without one, in
// Authorization, or in TokenHeader when set.
func TestClientHeaders(t *testing.T) {
	for _, c := range []struct {
		name   string
		client Client
		want   map[string]string
	}{
		{"plain", Client{Token: "t"}, map[string]string{"Authorization": "Bearer t"}},
		{"no token", Client{}, map[string]string{}},
		{"token header", Client{Token: "t", TokenHeader: "X-My-Token"}, map[string]string{"X-My-Token": "t"}},
		{"router", Client{Token: "t", Router: &Router{SandboxID: "sb", Namespace: "team", Port: 2468, Token: "r"}}, map[string]string{
			"Authorization": "Bearer r", "X-Sandbox-Agent-Token": "t", "X-Sandbox-Id": "sb", "X-Sandbox-Namespace": "team", "X-Sandbox-Port": "2468",
		}},
		{"router defaults", Client{Token: "t", TokenHeader: "X-Other", Router: &Router{SandboxID: "sb"}}, map[string]string{
			"X-Other": "t", "X-Sandbox-Id": "sb",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.client.headers()
			if len(got) != len(c.want) {
				t.Errorf("headers %v, want %v", got, c.want)
			}
			for k, v := range c.want {
				if got.Get(k) != v {
					t.Errorf("%s: %q, want %q (all: %v)", k, got.Get(k), v, got)
				}
			}
		})
	}
}

// A daemon (or whatever answers in its place, from inside a sandbox) that
// sends an answer without end cannot make the client hold it: a JSON
// answer is decoded from at most 64 MiB, an ACP answer read up to an agent
// line's limit, and the call fails.
func TestClientBoundsAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			io.Copy(io.Discard, r.Body)
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":"`)
		} else {
			io.WriteString(w, `{"agents":[`)
		}
		chunk := []byte(strings.Repeat(`{"id":"x"},`, 1<<10))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL}
	if _, err := c.ListAgents(context.Background(), false, false); err == nil {
		t.Fatal("an endless answer was decoded")
	}
	if _, err := c.PostACP(context.Background(), "s", "", []byte(`{"jsonrpc":"2.0","id":1,"method":"m"}`)); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("an endless ACP answer: %v", err)
	}
}
