package main

import (
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/guest"
)

func TestPolicy(t *testing.T) {
	p := &policy{}
	if err := p.Configure([]byte(`{"tokens": {"viewer-tok": "alice"}, "readOnly": ["old-tok"]}`)); err != nil {
		t.Fatal(err)
	}
	install := []domain.Action{domain.ActionAgentInstall}
	tests := []struct {
		token   string
		action  domain.Action
		implies []domain.Action
		want    domain.Decision
	}{
		{"viewer-tok", domain.ActionFSRead, nil, guest.Grant("alice")},
		{"viewer-tok", domain.ActionACPRead, nil, guest.Grant("alice")},
		{"viewer-tok", domain.ActionHealthRead, nil, guest.Grant("alice")},
		{"viewer-tok", domain.ActionMetricsRead, nil, guest.Grant("alice")},
		{"viewer-tok", domain.ActionACPSend, nil, guest.Grant("alice")},
		{"old-tok", domain.ActionACPSend, nil, guest.Grant("viewer")},
		{"viewer-tok", domain.ActionACPStart, nil, guest.Deny(403, "read-only token: acp.start is not allowed")},
		{"viewer-tok", domain.ActionACPStart, install, guest.Deny(403, "read-only token: acp.start+agent.install is not allowed")},
		{"viewer-tok", domain.ActionAgentInstall, nil, guest.Deny(403, "read-only token: agent.install is not allowed")},
		{"viewer-tok", domain.ActionACPStop, nil, guest.Deny(403, "read-only token: acp.stop is not allowed")},
		{"viewer-tok", domain.ActionFSWrite, nil, guest.Deny(403, "read-only token: fs.write is not allowed")},
		{"viewer-tok", domain.ActionConfigWrite, nil, guest.Deny(403, "read-only token: config.write is not allowed")},
		{"viewer-tok", domain.ActionProcessRead, nil, guest.Grant("alice")},
		{"viewer-tok", domain.ActionProcessRun, nil, guest.Deny(403, "read-only token: process.run is not allowed")},
		{"viewer-tok", domain.ActionProcessWrite, nil, guest.Deny(403, "read-only token: process.write is not allowed")},
		{"viewer-tok", domain.ActionProcessSignal, nil, guest.Deny(403, "read-only token: process.signal is not allowed")},
		{"admin", domain.ActionFSWrite, nil, guest.Pass()},
		{"", domain.ActionFSWrite, nil, guest.Pass()},
	}
	for _, tt := range tests {
		t.Run(tt.token+" "+string(tt.action), func(t *testing.T) {
			req := domain.AuthRequest{Action: tt.action, Implies: tt.implies}
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
	for _, bad := range []string{`null`, `{}`, `{"readOnly": "x"}`, `{"tokens": {"": "x"}}`} {
		if err := (&policy{}).Configure([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
