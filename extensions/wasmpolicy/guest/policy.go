package guest

import (
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Policy decides one request. An instance of a policy module serves one
// request at a time, so a Policy needs no locking; instances do not share
// memory and may be replaced at any time, so it must not rely on state
// carried from one request to the next either.
type Policy interface {
	Authorize(req *Request) domain.Decision
}

// Configurer is implemented by policies that take a configuration.
// Configure is called once per instance, before any Authorize, with the
// JSON document the operator passed with --policy FILE,config=FILE ("null"
// when none). An error refuses the policy at load.
type Configurer interface {
	Configure(config []byte) error
}

// registered is the policy the exports call.
var registered Policy

// Register makes p the module's policy. Call it from an init function of
// the main package (a c-shared module never runs main); a second call
// replaces the first.
func Register(p Policy) { registered = p }

// Allow lets the request through (to the next policy, if any).
func Allow() domain.Decision { return domain.Decision{Allow: true} }

// Deny refuses the request: the daemon answers status (403 when zero or
// outside 400-599) with a permission_denied problem whose details.message
// is msg.
func Deny(status int, msg string) domain.Decision {
	return domain.Decision{Status: status, Message: msg}
}
