// Command denymethods is an auth policy refusing ACP methods by pattern:
//
//	{"deny": ["terminal/*", "session/set_mode"], "status": 403}
//
// Patterns use path.Match syntax, so "terminal/*" matches every method
// under terminal/ and "*" every method without a slash. Only ACP POSTs
// carrying a method (requests and notifications) are checked; the JSON-RPC
// method is peeked by the daemon, and the body itself never reaches the
// policy. Status defaults to 403. Everything else passes: this policy
// authenticates nobody, so place it after the policies that grant (a grant
// ends the chain) or after one that identifies (hmactoken), or rely on the
// built-in token check.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o denymethods.wasm .
package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"path"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/guest"
)

type policy struct {
	Deny   []string `json:"deny"`
	Status int      `json:"status"`
}

func (p *policy) Configure(config []byte) error {
	if err := json.Unmarshal(config, p); err != nil {
		return err
	}
	for _, pat := range p.Deny {
		if _, err := path.Match(pat, ""); err != nil {
			return fmt.Errorf("pattern %q: %w", pat, err)
		}
	}
	p.Status = cmp.Or(p.Status, 403)
	return nil
}

func (p *policy) Authorize(req *guest.Request) domain.Decision {
	method := req.RPCMethod()
	if method == "" {
		return guest.Pass()
	}
	for _, pat := range p.Deny {
		if ok, _ := path.Match(pat, method); ok {
			return guest.Deny(p.Status, "ACP method "+method+" is not allowed")
		}
	}
	return guest.Pass()
}

// CacheDecisions: each decision depends only on the configuration and
// on what Authorize reads from the request, so the daemon may reuse it for
// requests alike in that (guest.Cacheable).
func (p *policy) CacheDecisions() bool { return true }

func init() { guest.Register(&policy{}) }

func main() {}
