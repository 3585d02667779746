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

// Cacheable is implemented by policies whose decisions the daemon may
// reuse. CacheDecisions returning true promises that every decision
// depends only on the policy's configuration and on what it read through
// the Request's accessors: not on the clock, random numbers, or state kept
// from earlier requests. The daemon then remembers each decision with what
// was read (the Request notes it) and answers a later request that is
// alike in all of it without calling the module, sparing the module call
// (10 to 15 µs for a Go guest on a busy daemon). As a safeguard the daemon
// never reuses a decision made while the module read the clock or random
// bytes. A policy that cannot make the promise (one whose tokens expire,
// like examples/hmactoken) does not implement Cacheable, or returns false.
type Cacheable interface {
	CacheDecisions() bool
}

// registered is the policy the exports call.
var registered Policy

// Register makes p the module's policy. Call it from an init function of
// the main package (a c-shared module never runs main); a second call
// replaces the first.
func Register(p Policy) { registered = p }

// Pass has no opinion: the next policy decides, then the daemon's built-in
// token check (--token, --token-file), or, without a token configured, the
// request goes through.
func Pass() domain.Decision { return domain.Decision{Verdict: domain.Pass} }

// Grant lets the request through, authenticated as principal (a label
// such as the token's name, never the token itself: the daemon logs it).
// No later policy is asked and the built-in token check is skipped. An
// empty principal becomes the policy's name.
func Grant(principal string) domain.Decision {
	return domain.Decision{Verdict: domain.Grant, Principal: principal}
}

// Identify authenticates the request as principal without deciding it: a
// pass that later policies see with Request.Principal set, so one policy
// can authenticate and another authorise. When no later policy denies or
// grants, the request goes through as principal, without the built-in
// token check.
func Identify(principal string) domain.Decision {
	return domain.Decision{Verdict: domain.Pass, Principal: principal}
}

// Deny refuses the request: the daemon answers status (403 when zero or
// outside 400-599) with a permission_denied problem whose details.message
// is msg (401 answers are token_invalid problems with a
// WWW-Authenticate: Bearer header).
func Deny(status int, msg string) domain.Decision {
	return domain.Decision{Verdict: domain.Deny, Status: status, Message: msg}
}

// Allow is the ABI v1 name of Pass, kept so v1 policies still compile.
//
// Deprecated: use Pass, or Grant to authenticate.
func Allow() domain.Decision { return Pass() }
