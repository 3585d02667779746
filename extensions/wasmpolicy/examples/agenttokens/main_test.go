package main

import (
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/guest"
)

func TestPolicy(t *testing.T) {
	p := &policy{}
	if err := p.Configure([]byte(`{"tokens": {"alice": ["mock"], "ci": ["*"]}}`)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, token, agent string
		want               domain.Decision
	}{
		{"allowed agent", "alice", "mock", guest.Allow()},
		{"other agent", "alice", "claude", guest.Deny(403, "this token may not use agent claude")},
		{"no agent named", "alice", "", guest.Allow()},
		{"wildcard", "ci", "claude", guest.Allow()},
		{"unknown token", "mallory", "mock", guest.Deny(401, "unknown token")},
		{"no token", "", "", guest.Deny(401, "unknown token")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := domain.AuthRequest{Method: "POST", OperationID: "post_v1_acp", Agent: tt.agent}
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
	for _, bad := range []string{`null`, `{}`, `{"tokens": []}`, `nope`} {
		if err := (&policy{}).Configure([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
