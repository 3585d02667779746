package opencode

import (
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

func statMode(path string) (os.FileMode, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Mode().Perm(), nil
}

func TestDescribe(t *testing.T) {
	h := newHarness(t, harnessOptions{cfg: func(c *Config) {
		c.Installed = func(agent string) bool { return agent != "claude" }
	}})
	bound := h.newSession()
	h.prompt(bound, "hi")
	fresh := h.newSession()
	for _, tc := range []struct {
		method, path, body string
		action             domain.Action
		agent              string
		install            bool
	}{
		{"GET", "/opencode/event", "", domain.ActionACPRead, "", false},
		{"GET", "/opencode/session", "", domain.ActionACPRead, "", false},
		{"GET", "/opencode/session/" + bound + "/message", "", domain.ActionACPRead, "fake", false},
		{"POST", "/opencode/session", `{}`, domain.ActionACPStart, "fake", false},
		{"POST", "/opencode/session", `{"model":{"providerID":"claude","id":"sonnet"}}`, domain.ActionACPStart, "claude", true},
		{"POST", "/opencode/session/" + bound + "/message", `{"model":{"providerID":"claude","modelID":"x"}}`, domain.ActionACPSend, "fake", false},
		{"POST", "/opencode/session/" + fresh + "/message", `{"model":{"providerID":"claude","modelID":"x"}}`, domain.ActionACPSend, "claude", true},
		{"POST", "/opencode/session/" + fresh + "/prompt_async", ``, domain.ActionACPSend, "fake", false},
		{"POST", "/opencode/session/" + fresh + "/command", `{"model":"claude/opus"}`, domain.ActionACPSend, "claude", true},
		{"POST", "/opencode/session/" + bound + "/abort", ``, domain.ActionACPSend, "fake", false},
		{"DELETE", "/opencode/session/" + bound, ``, domain.ActionACPStop, "fake", false},
		{"POST", "/opencode/permission/per_1/reply", `{}`, domain.ActionACPSend, "", false},
		{"PATCH", "/opencode/config", `{}`, domain.ActionACPSend, "", false},
		{"POST", "/opencode/tui/append-prompt", `{}`, domain.ActionACPSend, "", false},
	} {
		t.Run(tc.method+" "+tc.path+" "+tc.body, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			var req domain.AuthRequest
			h.a.Describe(r, []byte(tc.body), &req)
			if req.Action != tc.action || req.Agent != tc.agent || slices.Contains(req.Implies, domain.ActionAgentInstall) != tc.install {
				t.Errorf("action %q agent %q implies %v; want %q %q install=%v", req.Action, req.Agent, req.Implies, tc.action, tc.agent, tc.install)
			}
		})
	}
}
