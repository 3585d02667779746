package httpapi

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// What the chain judged is what runs. The race of issue 20, forced: a POST
// without ?agent to an id with no instance is judged as acp.start (no
// agent, granted, as the agenttokens policy grants it); while that
// decision is being taken an admin starts a forbidden agent under the id.
// The POST is not delivered to it: it is judged again as what it now is,
// acp.send to the forbidden agent, and denied.
func TestPostRunsWhatWasJudged(t *testing.T) {
	fa := &fakeAuthorizer{}
	f := newACPFixture(t, acp.Options{}, Config{Authorizer: fa, Token: "admin"})
	racingChain(t, f, fa, func(req domain.AuthRequest) bool { return req.Action == domain.ActionACPStart })
	req, _ := http.NewRequest("POST", f.srv.URL+"/v1/acp/race", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"echo"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(b), "may not use agent forbidden") {
		t.Fatalf("the POST judged as a start reached the forbidden agent: %d %s", resp.StatusCode, b)
	}
	var actions []domain.Action
	for _, r := range fa.requests() {
		actions = append(actions, r.Action)
	}
	if len(actions) != 2 || actions[0] != domain.ActionACPStart || actions[1] != domain.ActionACPSend {
		t.Fatalf("decisions %v, want a start then, once the instance appeared, a send", actions)
	}
	if p := f.runner.Processes(); len(p) != 1 {
		t.Fatalf("%d agents started", len(p))
	}
}

// racingChain makes fa decide as the race tests need: the admin's token
// passes to the token check, agent forbidden is refused, anything else is
// granted to alice; while it decides the first request startNow picks, an
// admin starts agent forbidden under the id "race".
func racingChain(t *testing.T, f *acpFixture, fa *fakeAuthorizer, startNow func(domain.AuthRequest) bool) {
	var once sync.Once
	fa.setDecide(func(req domain.AuthRequest) (domain.Decision, error) {
		if req.Headers["authorization"][0] == "Bearer admin" {
			return domain.Decision{Verdict: domain.Pass}, nil
		}
		if startNow(req) {
			once.Do(func() {
				_, err := f.instances.Post(context.Background(), acp.PostRequest{
					ServerID: "race", Agent: "forbidden", HasAgent: true, Frame: mustFrame(t, `{"jsonrpc":"2.0","method":"n"}`),
					Judged: &acp.Judgement{}})
				if err != nil {
					t.Error(err)
				}
			})
		}
		if req.Agent == "forbidden" {
			return domain.Decision{Status: 403, Message: "this token may not use agent forbidden"}, nil
		}
		return domain.Decision{Verdict: domain.Grant, Principal: "alice"}, nil
	})
}

func mustFrame(t *testing.T, s string) domain.Frame {
	t.Helper()
	f, err := domain.ParseFrame([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// The same race on the routes of an existing instance: GET /v1/acp/{id}
// (the stream), its stderr and DELETE, sent by alice for an id with no
// instance, are judged on no agent (granted, as agenttokens grants them);
// while that decision is being taken an admin starts a forbidden agent
// under the id. Each acts on what was judged, no instance: the stream and
// stderr are 404 (as if sent just before the start), the DELETE stops
// nothing. Before the fix alice read the forbidden agent's stream and
// stderr, and stopped it.
func TestReadAndStopRunWhatWasJudged(t *testing.T) {
	for _, tc := range []struct {
		method, path, accept string
		status               int
	}{
		{"GET", "/v1/acp/race", "text/event-stream", 404},
		{"GET", "/v1/acp/race/stderr", "", 404},
		{"DELETE", "/v1/acp/race", "", 204},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			fa := &fakeAuthorizer{}
			f := newACPFixture(t, acp.Options{}, Config{Authorizer: fa, Token: "admin"})
			racingChain(t, f, fa, func(req domain.AuthRequest) bool { return req.Agent != "forbidden" })
			req, _ := http.NewRequest(tc.method, f.srv.URL+tc.path, nil)
			req.Header.Set("Authorization", "Bearer alice")
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("alice's %s %s, judged on no instance: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
			}
			if agent, _ := f.instances.Instance("race"); agent != "forbidden" {
				t.Errorf("the admin's instance is gone after alice's %s %s (agent %q)", tc.method, tc.path, agent)
			}
		})
	}
}
