package guest

import (
	"cmp"
	"errors"

	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/abi"
)

var errNoPolicy = errors.New("no policy registered: call guest.Register in an init function")

// handleInit runs the registered policy's Configure and returns the answer
// of policy_init: empty for success, else the error message.
func handleInit(config []byte) []byte {
	if registered == nil {
		return []byte(errNoPolicy.Error())
	}
	if c, ok := registered.(Configurer); ok {
		if len(config) == 0 {
			config = []byte("null")
		}
		if err := c.Configure(config); err != nil {
			msg := err.Error()
			msg = cmp.Or(msg, "configure failed")
			return []byte(msg)
		}
	}
	return nil
}

// current is reused for every call: the host serves one call at a time
// per instance, and reusing it keeps an allow free of allocations.
var current Request

// handleAuthorize decides one request record and appends the answer record
// to out.
func handleAuthorize(record, out []byte) []byte {
	if registered == nil {
		return abi.AppendError(out, errNoPolicy.Error())
	}
	v, err := abi.ParseRequest(record)
	if err != nil {
		return abi.AppendError(out, err.Error())
	}
	current.reset(v)
	d := registered.Authorize(&current)
	if c, ok := registered.(Cacheable); ok && !current.opaque && c.CacheDecisions() {
		out = abi.AppendDecisionVary(out, d, &current.read)
	} else {
		out = abi.AppendDecision(out, d)
	}
	current.v = abi.RequestView{}
	return out
}
