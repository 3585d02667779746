package guest

import (
	"bytes"
	"unsafe"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/abi"
)

// Request is the request being decided. It reads the host's record in
// place: each accessor copies just what it returns, so a policy pays only
// for the fields it looks at (decoding everything up front costs tens of
// microseconds inside a Go wasm guest). A Request is valid only during the
// Authorize call it was passed to; keep the strings, not the Request.
//
// A Request also notes what the policy read (which fields, headers and
// query parameters), so that a Cacheable policy's decision can be reused
// for requests alike in all of it.
type Request struct {
	v    abi.RequestView
	read abi.Vary
	// opaque is set once the whole request was copied out (AuthRequest):
	// the decision may depend on anything, so it is not cacheable.
	opaque bool
}

// reset points r at a new record and forgets what was read, keeping the
// lists' capacity (the SDK reuses one Request for every call).
func (r *Request) reset(v abi.RequestView) {
	r.v, r.opaque = v, false
	r.read.Fields = 0
	r.read.Headers = r.read.Headers[:0]
	r.read.Query = r.read.Query[:0]
}

func (r *Request) noteField(i int) { r.read.Fields |= 1 << i }

// noteName adds a header name to names unless it is there already, in
// any case (abi.EqualFoldASCII, as Header matches it).
func noteName(names []string, name string) []string {
	for _, n := range names {
		if n == name || abi.EqualFoldASCII(n, name) {
			return names
		}
	}
	return append(names, name)
}

// NewRequest builds a Request from a domain.AuthRequest, for testing
// policies natively.
func NewRequest(r domain.AuthRequest) *Request {
	v, err := abi.ParseRequest(abi.AppendRequest(nil, &r))
	if err != nil {
		panic(err) // AppendRequest always produces a valid record
	}
	return &Request{v: v}
}

func (r *Request) field(i int) string {
	r.noteField(i)
	return string(r.v.Field(i))
}

// Method is the HTTP method.
func (r *Request) Method() string { return r.field(abi.FieldMethod) }

// Route is the route pattern, e.g. "/v1/acp/{server_id}".
func (r *Request) Route() string { return r.field(abi.FieldRoute) }

// OperationID is the OpenAPI operation, e.g. "post_v1_acp".
func (r *Request) OperationID() string { return r.field(abi.FieldOperationID) }

// Path is the request path.
func (r *Request) Path() string { return r.field(abi.FieldPath) }

// RemoteAddr is the client's address, host:port.
func (r *Request) RemoteAddr() string { return r.field(abi.FieldRemoteAddr) }

// ServerID is the ACP server id of /v1/acp/{server_id} routes.
func (r *Request) ServerID() string { return r.field(abi.FieldServerID) }

// Agent is the agent the request names (?agent= or /v1/agents/{agent}) or,
// for an existing ACP server id, the agent it runs.
func (r *Request) Agent() string { return r.field(abi.FieldAgent) }

// RPC is what the host peeked from an ACP POST body; ok is false for every
// other request.
func (r *Request) RPC() (info domain.RPCInfo, ok bool) {
	kind := r.field(abi.FieldRPCKind)
	if kind == "" {
		return info, false
	}
	return domain.RPCInfo{Kind: kind, ID: r.field(abi.FieldRPCID), Method: r.field(abi.FieldRPCMethod)}, true
}

// RPCMethod is the JSON-RPC method of an ACP POST ("" for responses and for
// other requests).
func (r *Request) RPCMethod() string { return r.field(abi.FieldRPCMethod) }

// Action is what the daemon decided the request does, e.g. "acp.start".
func (r *Request) Action() domain.Action { return domain.Action(r.field(abi.FieldAction)) }

// Implies is what the request does besides its Action, e.g. agent.install
// for an acp.start of an agent that is not installed yet.
func (r *Request) Implies() []domain.Action { return abi.SplitActions(r.field(abi.FieldImplies)) }

// Actions is Action followed by Implies: a policy authorising by action
// must accept all of them.
func (r *Request) Actions() []domain.Action {
	return append([]domain.Action{r.Action()}, r.Implies()...)
}

// ActionsWithin reports whether every action of the request (Actions)
// matches one of patterns ("acp.send", "fs.*", "*.read", "*"); see
// domain.Action.Match.
func (r *Request) ActionsWithin(patterns ...string) bool {
	// Walks the record in place: no slice of actions, no copied strings
	// (each allocation is dear inside a Go wasm guest).
	r.noteField(abi.FieldAction)
	r.noteField(abi.FieldImplies)
	if !within(r.v.Field(abi.FieldAction), patterns) {
		return false
	}
	rest := r.v.Field(abi.FieldImplies)
	for len(rest) > 0 {
		a := rest
		if i := bytes.IndexByte(rest, ','); i >= 0 {
			a, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if !within(a, patterns) {
			return false
		}
	}
	return true
}

// within reports whether action a matches one of patterns. The action is
// viewed as a string without a copy: Match does not keep it.
func within(a []byte, patterns []string) bool {
	action := domain.Action(unsafe.String(unsafe.SliceData(a), len(a)))
	for _, p := range patterns {
		if action.Match(p) {
			return true
		}
	}
	return false
}

// Resource is what a request acts on; fields that do not apply are empty.
type Resource struct {
	ServerID string // ACP server id
	Agent    string // agent id
	Path     string // resolved filesystem path (fs.*; config.*: the directory)
	Dest     string // destination of a move
}

// Resource returns what the request acts on.
func (r *Request) Resource() Resource {
	return Resource{ServerID: r.ServerID(), Agent: r.Agent(), Path: r.FSPath(), Dest: r.FSDest()}
}

// FSPath is the filesystem path of an fs.* request (config.*: the
// directory), resolved as the daemon resolves it (relative paths against
// the home directory or --fs-root) and cleaned; "" for other requests.
func (r *Request) FSPath() string { return r.field(abi.FieldFSPath) }

// FSDest is the destination of a move ("" otherwise).
func (r *Request) FSDest() string { return r.field(abi.FieldFSDest) }

// Principal is who an earlier policy in the chain authenticated the
// request as (see Identify); "" when none did.
func (r *Request) Principal() string { return r.field(abi.FieldPrincipal) }

// Header returns the first value of the named header (any case), or "".
func (r *Request) Header(name string) string {
	r.read.Headers = noteName(r.read.Headers, name)
	for i := range r.v.NumHeaders() {
		// Names in the record are lower case (abi.LowerASCII); a folding
		// comparison spares lowering name (an allocation when it has
		// capitals). The vary block and the host's cache key match names
		// the same way, so the key holds exactly what was found here.
		k, v := r.v.HeaderAt(i)
		if abi.EqualFoldASCII(unsafe.String(unsafe.SliceData(k), len(k)), name) {
			return string(v)
		}
	}
	return ""
}

// HeaderValues returns every value of the named header (any case).
func (r *Request) HeaderValues(name string) []string {
	name = abi.LowerASCII(name)
	r.read.Headers = noteName(r.read.Headers, name)
	var out []string
	for i := range r.v.NumHeaders() {
		if k, v := r.v.HeaderAt(i); string(k) == name {
			out = append(out, string(v))
		}
	}
	return out
}

// Query returns the first value of the named query parameter, or "".
func (r *Request) Query(name string) string {
	r.read.Query = noteQuery(r.read.Query, name)
	for i := range r.v.NumQuery() {
		if k, v := r.v.QueryAt(i); string(k) == name {
			return string(v)
		}
	}
	return ""
}

// noteQuery is noteName for query names, which are case-sensitive.
func noteQuery(names []string, name string) []string {
	for _, n := range names {
		if n == name {
			return names
		}
	}
	return append(names, name)
}

// Bearer returns the token of an "Authorization: Bearer <token>" header,
// or "" when there is none. It reads the header as the daemon's token
// check does (domain.BearerToken: the scheme spelt "Bearer", one space, a
// token without spaces or control characters), so a policy recognises a
// token in exactly the forms the check would accept it: "BEARER tok",
// "Bearer  tok" or "Bearer a b" hold no token for either.
func (r *Request) Bearer() string {
	tok, _ := domain.BearerToken(r.Header("authorization"))
	return tok
}

// AuthRequest copies the whole request into a domain.AuthRequest. It is
// the convenient, slower way in: it allocates every field, and a decision
// made after it is never cached (it may depend on anything).
func (r *Request) AuthRequest() domain.AuthRequest {
	r.opaque = true
	return r.v.AuthRequest()
}
