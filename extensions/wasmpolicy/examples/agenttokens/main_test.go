package main

import (
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/guest"
)

func TestPolicy(t *testing.T) {
	p := &policy{}
	if err := p.Configure([]byte(`{"tokens": {"alice-tok": {"label": "alice", "agents": ["mock"]}, "ci-tok": ["*"]}}`)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, token, agent string
		want               domain.Decision
	}{
		{"allowed agent", "alice-tok", "mock", guest.Grant("alice")},
		{"other agent", "alice-tok", "claude", guest.Deny(403, "this token may not use agent claude")},
		{"no agent named", "alice-tok", "", guest.Grant("alice")},
		{"wildcard, legacy form", "ci-tok", "claude", guest.Grant("agents-0f3bcc44")},
		{"unknown token", "mallory", "mock", guest.Pass()},
		{"no token", "", "", guest.Pass()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := domain.AuthRequest{Method: "POST", Action: domain.ActionACPStart, Agent: tt.agent}
			if tt.token != "" {
				req.Headers = map[string][]string{"authorization": {"Bearer " + tt.token}}
			}
			if got := p.Authorize(guest.NewRequest(req)); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestConfigure(t *testing.T) {
	for _, bad := range []string{`null`, `{}`, `{"tokens": []}`, `nope`, `{"tokens": {"t": null}}`} {
		if err := (&policy{}).Configure([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
