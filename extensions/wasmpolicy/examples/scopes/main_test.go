package main

import (
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/guest"
)

const config = `{"tokens": [
  {"token": "ci", "label": "ci-bot", "actions": ["acp.*", "agent.read", "fs.*"], "agents": ["mock"], "paths": ["/srv/work/"]},
  {"token": "ops", "label": "ops", "actions": ["*.read", "acp.stop"]}
]}`

func TestPolicy(t *testing.T) {
	p := &policy{}
	if err := p.Configure([]byte(config)); err != nil {
		t.Fatal(err)
	}
	install := []domain.Action{domain.ActionAgentInstall}
	tests := []struct {
		name, token string
		req         domain.AuthRequest
		want        domain.Decision
	}{
		{"start mock", "ci", domain.AuthRequest{Action: domain.ActionACPStart, Agent: "mock"}, guest.Grant("ci-bot")},
		{"start other agent", "ci", domain.AuthRequest{Action: domain.ActionACPStart, Agent: "claude"}, guest.Deny(403, "ci-bot may not use agent claude")},
		{"start implying install", "ci", domain.AuthRequest{Action: domain.ActionACPStart, Implies: install, Agent: "mock"}, guest.Deny(403, "ci-bot may not agent.install")},
		{"write inside", "ci", domain.AuthRequest{Action: domain.ActionFSWrite, FSPath: "/srv/work/a/b"}, guest.Grant("ci-bot")},
		{"write the prefix itself", "ci", domain.AuthRequest{Action: domain.ActionFSWrite, FSPath: "/srv/work"}, guest.Grant("ci-bot")},
		{"write a sibling", "ci", domain.AuthRequest{Action: domain.ActionFSWrite, FSPath: "/srv/workshop/x"}, guest.Deny(403, "ci-bot may not touch /srv/workshop/x")},
		{"move out", "ci", domain.AuthRequest{Action: domain.ActionFSWrite, FSPath: "/srv/work/a", FSDest: "/etc/a"}, guest.Deny(403, "ci-bot may not touch /etc/a")},
		{"unresolved path", "ci", domain.AuthRequest{Action: domain.ActionFSWrite}, guest.Deny(403, "ci-bot: the path could not be resolved")},
		{"config not in actions", "ci", domain.AuthRequest{Action: domain.ActionConfigWrite, FSPath: "/srv/work"}, guest.Deny(403, "ci-bot may not config.write")},
		{"health not in actions", "ci", domain.AuthRequest{Action: domain.ActionHealthRead}, guest.Deny(403, "ci-bot may not health.read")},
		{"ops reads anything", "ops", domain.AuthRequest{Action: domain.ActionFSRead, FSPath: "/etc/passwd"}, guest.Grant("ops")},
		{"ops stops", "ops", domain.AuthRequest{Action: domain.ActionACPStop, Agent: "claude"}, guest.Grant("ops")},
		{"ops may not send", "ops", domain.AuthRequest{Action: domain.ActionACPSend}, guest.Deny(403, "ops may not acp.send")},
		{"unknown token", "mallory", domain.AuthRequest{Action: domain.ActionFSWrite}, guest.Pass()},
		{"no token", "", domain.AuthRequest{Action: domain.ActionFSWrite}, guest.Pass()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req
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
	for _, bad := range []string{
		`null`, `{}`, `{"tokens": []}`,
		`{"tokens": [{"label": "x", "actions": ["*"]}]}`,
		`{"tokens": [{"token": "t", "actions": ["*"]}]}`,
		`{"tokens": [{"token": "t", "label": "x"}]}`,
		`{"tokens": [{"token": "t", "label": "x", "actions": ["read"]}]}`,
		`{"tokens": [{"token": "t", "label": "x", "actions": ["*"], "paths": ["rel"]}]}`,
		`{"tokens": [{"token": "t", "label": "x", "actions": ["*"]}, {"token": "t", "label": "y", "actions": ["*"]}]}`,
	} {
		if err := (&policy{}).Configure([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
