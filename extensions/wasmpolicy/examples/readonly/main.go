// Command readonly is an auth policy for read-only bearer tokens:
//
//	{"readOnly": ["tok-viewer"]}
//
// A request with one of these tokens may read anything (GET, HEAD) and talk
// to agents (POST /v1/acp/{id}), but may not write or delete files or
// config, install agents, stop agent instances, or start, signal or write
// to processes (the terminal socket included): every other method is
// answered 403. Requests with other tokens are left to the bearer check and
// the other policies.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o readonly.wasm .
package main

import (
	"encoding/json"
	"errors"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/guest"
)

type policy struct {
	readOnly map[string]bool
}

func (p *policy) Configure(config []byte) error {
	var c struct {
		ReadOnly []string `json:"readOnly"`
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return err
	}
	if len(c.ReadOnly) == 0 {
		return errors.New(`config needs {"readOnly": ["<token>", ...]}`)
	}
	p.readOnly = map[string]bool{}
	for _, t := range c.ReadOnly {
		p.readOnly[t] = true
	}
	return nil
}

func (p *policy) Authorize(req *guest.Request) domain.Decision {
	if !p.readOnly[req.Bearer()] {
		return guest.Allow()
	}
	// A process's terminal socket is opened with GET but writes to the
	// process: not for read-only tokens. Its logs and listings are.
	if req.OperationID() == "get_v1_process_terminal_ws" {
		return guest.Deny(403, "read-only token: a process terminal is not allowed")
	}
	switch req.Method() {
	case "GET", "HEAD", "OPTIONS":
		return guest.Allow()
	}
	// Talking to an agent is allowed; what the agent itself may do is the
	// agent's permission model, not the HTTP API's.
	if req.OperationID() == "post_v1_acp" {
		return guest.Allow()
	}
	return guest.Deny(403, "read-only token: "+req.Method()+" "+req.Route()+" is not allowed")
}

func init() { guest.Register(&policy{}) }

func main() {}
