// Command readonly is an auth policy granting read-only bearer tokens:
//
//	{"tokens": {"tok-viewer": "viewer"}}
//
// (token → label; the label is the principal the daemon logs, never the
// token). The older form {"readOnly": ["tok-viewer"]} labels every token
// "viewer".
//
// A request with one of these tokens is granted when every action it
// performs is a read (*.read: health, agents, files, config, instances and
// their streams, metrics) or acp.send (talking to an instance that is
// already running); anything else is denied 403, including acp.start
// (starting an agent), agent.install (explicit, or implied by a start of an
// agent that is not installed), acp.stop, fs.write, config.write and the
// process.run, process.write (the terminal socket included) and
// process.signal of the processes API.
// Requests with other tokens, or none, pass: run the daemon with --token
// (or --token-file) so the admin token passes the built-in check and
// strangers are refused with 401.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o readonly.wasm .
package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"strings"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/guest"
)

// allowed are the actions a read-only token may perform.
var allowed = []string{"*.read", "acp.send"}

type policy struct {
	labels map[string]string // token → label
}

func (p *policy) Configure(config []byte) error {
	var c struct {
		Tokens   map[string]string `json:"tokens"`
		ReadOnly []string          `json:"readOnly"`
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return err
	}
	p.labels = map[string]string{}
	for tok, label := range c.Tokens {
		label = cmp.Or(label, "viewer")
		p.labels[tok] = label
	}
	for _, tok := range c.ReadOnly {
		p.labels[tok] = "viewer"
	}
	delete(p.labels, "")
	if len(p.labels) == 0 {
		return errors.New(`config needs {"tokens": {"<token>": "<label>", ...}}`)
	}
	return nil
}

func (p *policy) Authorize(req *guest.Request) domain.Decision {
	label, ok := p.labels[req.Bearer()]
	if !ok {
		return guest.Pass()
	}
	if req.ActionsWithin(allowed...) {
		return guest.Grant(label)
	}
	var names []string
	for _, a := range req.Actions() {
		names = append(names, string(a))
	}
	return guest.Deny(403, "read-only token: "+strings.Join(names, "+")+" is not allowed")
}

// CacheDecisions: each decision depends only on the configuration and
// on what Authorize reads from the request, so the daemon may reuse it for
// requests alike in that (guest.Cacheable).
func (p *policy) CacheDecisions() bool { return true }

func init() { guest.Register(&policy{}) }

func main() {}
