// Command scopes is an auth policy granting bearer tokens a scope: the
// actions they may perform, the agents they may use and the filesystem
// paths they may touch.
//
//	{"tokens": [
//	  {"token": "tok-ci", "label": "ci",
//	   "actions": ["acp.*", "agent.read", "fs.*", "health.read"],
//	   "agents": ["mock"], "paths": ["/srv/work"]},
//	  {"token": "tok-ops", "label": "ops", "actions": ["*.read", "acp.stop"]}
//	]}
//
// A request with a listed token is granted, as its label, when
//
//   - every action it performs (its action and what it implies, e.g. an
//     acp.start of an agent not installed implies agent.install) matches
//     one of "actions": an exact name, "area.*", "*.verb" or "*";
//   - it names no agent, or "agents" is empty or holds that agent or "*";
//   - it touches no filesystem path (fs.*: the path and a move's
//     destination; config.*: the directory), or "paths" is empty, or every
//     such path lies inside one of "paths" (whole path elements: /srv/work
//     holds /srv/work/a, not /srv/workshop). Paths are compared as the
//     daemon resolved them, without following symbolic links: confine the
//     daemon with --fs-root when links must not lead elsewhere.
//
// Otherwise it is denied 403 with the reason. Other tokens, and requests
// without one, pass: run the daemon with --token (or --token-file) so the
// admin token passes the built-in check and strangers are refused (401).
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o scopes.wasm .
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/guest"
)

type scope struct {
	Token   string   `json:"token"`
	Label   string   `json:"label"`
	Actions []string `json:"actions"`
	Agents  []string `json:"agents"`
	Paths   []string `json:"paths"`
}

type policy struct {
	byToken map[string]*scope
}

func (p *policy) Configure(config []byte) error {
	var c struct {
		Tokens []*scope `json:"tokens"`
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return err
	}
	if len(c.Tokens) == 0 {
		return errors.New(`config needs {"tokens": [{"token", "label", "actions", "agents"?, "paths"?}, ...]}`)
	}
	p.byToken = map[string]*scope{}
	for i, s := range c.Tokens {
		switch {
		case s == nil || s.Token == "":
			return fmt.Errorf("tokens[%d]: token is required", i)
		case s.Label == "":
			return fmt.Errorf("tokens[%d]: label is required (it is what the daemon logs instead of the token)", i)
		case len(s.Actions) == 0:
			return fmt.Errorf("tokens[%d] (%s): actions is required", i, s.Label)
		case p.byToken[s.Token] != nil:
			return fmt.Errorf("tokens[%d] (%s): the same token is listed twice", i, s.Label)
		}
		for _, a := range s.Actions {
			if a != "*" && !strings.Contains(a, ".") {
				return fmt.Errorf("tokens[%d] (%s): action %q must be area.verb, area.*, *.verb or *", i, s.Label, a)
			}
		}
		for j, prefix := range s.Paths {
			if !path.IsAbs(prefix) {
				return fmt.Errorf("tokens[%d] (%s): path %q must be absolute", i, s.Label, prefix)
			}
			s.Paths[j] = path.Clean(prefix)
		}
		p.byToken[s.Token] = s
	}
	return nil
}

func (p *policy) Authorize(req *guest.Request) domain.Decision {
	s := p.byToken[req.Bearer()]
	if s == nil {
		return guest.Pass()
	}
	for _, a := range req.Actions() {
		if !slices.ContainsFunc(s.Actions, a.Match) {
			return guest.Deny(403, s.Label+" may not "+string(a))
		}
	}
	if agent := req.Agent(); agent != "" && len(s.Agents) > 0 &&
		!slices.Contains(s.Agents, "*") && !slices.Contains(s.Agents, agent) {
		return guest.Deny(403, s.Label+" may not use agent "+agent)
	}
	if len(s.Paths) > 0 {
		for _, pth := range []string{req.FSPath(), req.FSDest()} {
			if pth != "" && !inside(s.Paths, pth) {
				return guest.Deny(403, s.Label+" may not touch "+pth)
			}
		}
		if isFS(req.Actions()) && req.FSPath() == "" {
			return guest.Deny(403, s.Label+": the path could not be resolved")
		}
	}
	return guest.Grant(s.Label)
}

// inside reports whether p lies in one of prefixes, on whole elements.
func inside(prefixes []string, p string) bool {
	for _, root := range prefixes {
		if _, ok := domain.RootRelative(root, p); ok {
			return true
		}
	}
	return false
}

func isFS(actions []domain.Action) bool {
	for _, a := range actions {
		if a.Area() == "fs" || a.Area() == "config" {
			return true
		}
	}
	return false
}

// CacheDecisions: each decision depends only on the configuration and
// on what Authorize reads from the request, so the daemon may reuse it for
// requests alike in that (guest.Cacheable).
func (p *policy) CacheDecisions() bool { return true }

func init() { guest.Register(&policy{}) }

func main() {}
