// Command agenttokens is an auth policy mapping bearer tokens to the agents
// they may use. Run the daemon without --token and let this policy decide:
//
//	{"tokens": {"tok-alice": ["mock", "claude"], "tok-ci": ["*"]}}
//
// A request without a known token is answered 401. A known token may use
// every route, but a request naming an agent (POST /v1/acp/{id}?agent=,
// /v1/agents/{agent}/..., or any request to a server id running that agent)
// is answered 403 unless the agent is in the token's list ("*" allows all).
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o agenttokens.wasm .
package main

import (
	"encoding/json"
	"errors"
	"slices"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/guest"
)

type policy struct {
	Tokens map[string][]string `json:"tokens"`
}

func (p *policy) Configure(config []byte) error {
	if err := json.Unmarshal(config, p); err != nil {
		return err
	}
	if len(p.Tokens) == 0 {
		return errors.New(`config needs {"tokens": {"<token>": ["<agent>", ...]}}`)
	}
	return nil
}

func (p *policy) Authorize(req *guest.Request) domain.Decision {
	agents, ok := p.Tokens[req.Bearer()]
	if !ok {
		return guest.Deny(401, "unknown token")
	}
	agent := req.Agent()
	if agent == "" || slices.Contains(agents, "*") || slices.Contains(agents, agent) {
		return guest.Allow()
	}
	return guest.Deny(403, "this token may not use agent "+agent)
}

func init() { guest.Register(&policy{}) }

func main() {}
