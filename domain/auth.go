package domain

import (
	"errors"
	"strings"
)

// AuthRequest describes one HTTP request to the auth chain and its
// policies. The daemon decides what the request will do (Action, Implies)
// and on what (ServerID, Agent, FSPath, FSDest) before anything runs, so a
// policy never has to parse routes to guess. For ACP POSTs the JSON-RPC
// kind, id and method are peeked from the body (never decoded further), and
// an SSE stream is described once, when it opens (and judged again, on
// that description, at each reload). Route, method, path,
// query and headers stay available for special cases.
type AuthRequest struct {
	Method      string              `json:"method"`
	Route       string              `json:"route"`       // the route pattern, e.g. "/v1/acp/{server_id}"
	OperationID string              `json:"operationId"` // e.g. "post_v1_acp"
	Path        string              `json:"path"`
	Query       map[string][]string `json:"query,omitempty"`
	Headers     map[string][]string `json:"headers,omitempty"` // lower-case names
	RemoteAddr  string              `json:"remoteAddr"`
	ServerID    string              `json:"serverId,omitempty"`
	Agent       string              `json:"agent,omitempty"`
	RPC         *RPCInfo            `json:"rpc,omitempty"`

	// Action is what the request does (see Actions); Implies lists what it
	// does besides, e.g. agent.install for an acp.start of an agent that
	// is not installed yet. A policy that authorises by action must accept
	// every one of them (AllActions).
	Action  Action   `json:"action,omitempty"`
	Implies []Action `json:"implies,omitempty"`
	// FSPath is the filesystem path an fs.* request works on (config.*:
	// the directory), resolved as the daemon resolves it: relative paths
	// against the home directory or --fs-root, cleaned. FSDest is the
	// destination of a move. Symbolic links are not followed here; confine
	// with --fs-root when a link must not lead elsewhere.
	FSPath string `json:"fsPath,omitempty"`
	FSDest string `json:"fsDest,omitempty"`
	// Principal is who an earlier policy in the chain authenticated the
	// request as ("" when none did yet).
	Principal string `json:"principal,omitempty"`
	// Instance is the generation of the ACP instance ServerID named when
	// the request was described (0: none, so the POST is a start). It is
	// not shown to policies: the daemon carries it from the decision to
	// the execution, so a POST (or a stream, stderr, DELETE) judged on one
	// instance never runs on another, or on one started meanwhile under
	// the id.
	Instance uint64 `json:"-"`
}

// AllActions returns Action followed by Implies.
func (r *AuthRequest) AllActions() []Action {
	if r.Action == "" {
		return r.Implies
	}
	return append([]Action{r.Action}, r.Implies...)
}

// RPCInfo is what was peeked from an ACP POST body.
type RPCInfo struct {
	Kind   string `json:"kind"` // request, notification, response, other
	ID     string `json:"id,omitempty"`
	Method string `json:"method,omitempty"`
}

// Action names what a request does, in a small vocabulary that stays
// stable across releases: "<area>.<verb>". Policies and operators match on
// these names; a new route gets an existing action where one fits.
type Action string

// The action vocabulary. docs/auth.md ("Actions") and
// extensions/wasmpolicy/ABI.md list it with the routes behind each name.
const (
	ActionHealthRead    Action = "health.read"    // GET /v1/health
	ActionMetricsRead   Action = "metrics.read"   // GET /metrics
	ActionACPStart      Action = "acp.start"      // POST that starts an instance (a new server id); creating an OpenCode session
	ActionACPSend       Action = "acp.send"       // POST to an existing instance; an OpenCode prompt, reply or change
	ActionACPRead       Action = "acp.read"       // event stream, instance list, stderr tail; OpenCode's GETs
	ActionACPStop       Action = "acp.stop"       // DELETE an instance; deleting an OpenCode session
	ActionAgentRead     Action = "agent.read"     // list and describe agents
	ActionAgentInstall  Action = "agent.install"  // explicit install, or implied by acp.start
	ActionFSRead        Action = "fs.read"        // entries, file, stat
	ActionFSWrite       Action = "fs.write"       // put, delete, mkdir, move, upload-batch
	ActionConfigRead    Action = "config.read"    // GET MCP and skills entries
	ActionConfigWrite   Action = "config.write"   // PUT and DELETE MCP and skills entries
	ActionProcessRun    Action = "process.run"    // create or run a process, set the processes config
	ActionProcessRead   Action = "process.read"   // list and describe processes, read logs and config
	ActionProcessWrite  Action = "process.write"  // input, terminal resize, the terminal socket
	ActionProcessSignal Action = "process.signal" // stop, kill, delete a process
)

// Actions is the whole vocabulary, in documentation order.
var Actions = []Action{
	ActionHealthRead, ActionMetricsRead,
	ActionACPStart, ActionACPSend, ActionACPRead, ActionACPStop,
	ActionAgentRead, ActionAgentInstall,
	ActionFSRead, ActionFSWrite,
	ActionConfigRead, ActionConfigWrite,
	ActionProcessRun, ActionProcessRead, ActionProcessWrite, ActionProcessSignal,
}

// Area is the part before the dot ("acp" for "acp.send").
func (a Action) Area() string { area, _, _ := strings.Cut(string(a), "."); return area }

// Verb is the part after the dot ("send" for "acp.send").
func (a Action) Verb() string { _, verb, _ := strings.Cut(string(a), "."); return verb }

// Match reports whether a matches pattern: an exact name, "*" (anything),
// "<area>.*" or "*.<verb>" (e.g. "*.read").
//
// It splits each string once, by hand: policies call it inside a Go wasm
// guest, where every function call is dear (a chain's decision paid
// microseconds for the Cuts of Area and Verb).
func (a Action) Match(pattern string) bool {
	if pattern == "*" {
		return true
	}
	dot := strings.IndexByte(pattern, '.')
	if dot < 0 {
		return false
	}
	area, verb := pattern[:dot], pattern[dot+1:]
	aArea, aVerb := string(a), ""
	if i := strings.IndexByte(aArea, '.'); i >= 0 {
		aArea, aVerb = aArea[:i], aArea[i+1:]
	}
	return (area == "*" || area == aArea) && (verb == "*" || verb == aVerb)
}

// Verdict is a policy's answer in the auth chain.
type Verdict uint8

const (
	// Deny stops the chain: the request is refused with the decision's
	// status and message. It is the zero value, so a Decision that says
	// nothing refuses.
	Deny Verdict = iota
	// Pass has no opinion: the next policy decides, then the built-in
	// token check. A pass that names a principal authenticates the request
	// without authorising it: later policies see the principal, and if
	// none of them decides, the request goes through as that principal
	// without the token check.
	Pass
	// Grant stops the chain and lets the request through, authenticated as
	// the decision's principal; the built-in token check is skipped.
	Grant
)

func (v Verdict) String() string {
	switch v {
	case Deny:
		return "deny"
	case Pass:
		return "pass"
	case Grant:
		return "grant"
	}
	return "unknown"
}

// MarshalText writes "deny", "pass" or "grant".
func (v Verdict) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText reads what MarshalText writes ("allow" is read as pass, the
// ABI v1 meaning).
func (v *Verdict) UnmarshalText(b []byte) error {
	switch string(b) {
	case "deny":
		*v = Deny
	case "pass", "allow":
		*v = Pass
	case "grant":
		*v = Grant
	default:
		return errors.New("verdict must be deny, pass or grant")
	}
	return nil
}

// Decision is an answer of the auth chain or of one policy. A deny carries
// the HTTP status and message the daemon renders as a problem; a grant (or
// an authenticating pass) carries the principal, a label such as a
// token's name (never the token itself), which the daemon logs with every
// request.
type Decision struct {
	Verdict   Verdict `json:"verdict"`
	Status    int     `json:"status,omitempty"`
	Message   string  `json:"message,omitempty"`
	Principal string  `json:"principal,omitempty"`
	// By names who decided: the policy, "token" for the built-in check,
	// "" when nobody objected and no token is configured.
	By string `json:"by,omitempty"`
}

// Allowed reports whether the decision lets the request through (to the
// next policy, for a pass).
func (d Decision) Allowed() bool { return d.Verdict != Deny }
