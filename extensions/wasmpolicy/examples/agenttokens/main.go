// Command agenttokens is an auth policy granting bearer tokens the use of
// some agents:
//
//	{"tokens": {"tok-alice": {"label": "alice", "agents": ["mock", "claude"]},
//	            "tok-ci":    {"label": "ci", "agents": ["*"]}}}
//
// The label is the principal the daemon logs (never the token). The older
// form {"tokens": {"tok-alice": ["mock"]}} is accepted; its label is
// "agents-" and the first 8 hex digits of the token's SHA-256.
//
// A known token is granted every request that names no agent and every
// request on an agent in its list ("*" for all): a POST to
// /v1/acp/{id}?agent=, /v1/agents/{agent}/..., or any request to a server
// id running that agent. A request on another agent is denied 403. Other
// tokens, and requests without one, pass: run the daemon with --token (or
// --token-file) so the admin token passes the built-in check and
// strangers are refused with 401.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o agenttokens.wasm .
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/guest"
)

type grant struct {
	Label  string   `json:"label"`
	Agents []string `json:"agents"`
}

// UnmarshalJSON reads {"label", "agents"} or a bare list of agents.
func (g *grant) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '[' {
		return json.Unmarshal(b, &g.Agents)
	}
	type plain grant
	return json.Unmarshal(b, (*plain)(g))
}

type policy struct {
	Tokens map[string]*grant `json:"tokens"`
}

func (p *policy) Configure(config []byte) error {
	if err := json.Unmarshal(config, p); err != nil {
		return err
	}
	delete(p.Tokens, "")
	if len(p.Tokens) == 0 {
		return errors.New(`config needs {"tokens": {"<token>": {"label": "<name>", "agents": ["<agent>", ...]}}}`)
	}
	for tok, g := range p.Tokens {
		if g == nil {
			return errors.New("a token needs a label and a list of agents")
		}
		if g.Label == "" {
			sum := sha256.Sum256([]byte(tok))
			g.Label = "agents-" + hex.EncodeToString(sum[:4])
		}
	}
	return nil
}

func (p *policy) Authorize(req *guest.Request) domain.Decision {
	g, ok := p.Tokens[req.Bearer()]
	if !ok {
		return guest.Pass()
	}
	agent := req.Agent()
	if agent == "" || slices.Contains(g.Agents, "*") || slices.Contains(g.Agents, agent) {
		return guest.Grant(g.Label)
	}
	return guest.Deny(403, "this token may not use agent "+agent)
}

// CacheDecisions: each decision depends only on the configuration and
// on what Authorize reads from the request, so the daemon may reuse it for
// requests alike in that (guest.Cacheable).
func (p *policy) CacheDecisions() bool { return true }

func init() { guest.Register(&policy{}) }

func main() {}
