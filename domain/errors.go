package domain

import (
	"cmp"
	"errors"
	"fmt"
)

// Kind is one row of the error table in docs/api.md section 1. Adapters translate
// technology errors into a Kind at the port; the HTTP adapter maps a Kind to a
// status and problem body in exactly one place (httpapi's kind table).
//
// Adding a kind: its constant and constructor here, its row (status, title,
// which fields reach the wire) in adapters/httpapi/problem.go, and a row in
// that package's error-table test.
type Kind string

// The error kinds of the HTTP contract.
const (
	KindInvalidRequest     Kind = "invalid_request"
	KindUnsupportedAgent   Kind = "unsupported_agent"
	KindTokenInvalid       Kind = "token_invalid"
	KindPermissionDenied   Kind = "permission_denied"
	KindAgentNotInstalled  Kind = "agent_not_installed"
	KindSessionNotFound    Kind = "session_not_found"
	KindNotAcceptable      Kind = "not_acceptable"
	KindConflict           Kind = "conflict"
	KindPayloadTooLarge    Kind = "payload_too_large"
	KindUnsupportedMedia   Kind = "unsupported_media_type"
	KindInstallFailed      Kind = "install_failed"
	KindAgentProcessExited Kind = "agent_process_exited"
	KindStreamError        Kind = "stream_error"
	KindTimeout            Kind = "timeout"
	// KindNotFound is an unknown resource other than an ACP server (a
	// process, a filesystem path); the SDK's error types name it.
	KindNotFound Kind = "not_found"
	// KindTooManyRequests is a cap on live things reached (processes).
	KindTooManyRequests Kind = "too_many_requests"
	// KindTooManyInstances (429): --max-instances agents are live.
	KindTooManyInstances Kind = "too_many_instances"
	// KindOverloaded (503): a daemon-wide memory budget is spent
	// (--inflight-bytes), or a resource of the system ran out (file
	// descriptors, processes, memory: Exhausted).
	KindOverloaded Kind = "overloaded"
	// KindInsufficientStorage is a write that would leave less than
	// --min-free on its filesystem (507).
	KindInsufficientStorage Kind = "insufficient_storage"
)

// Error is an error with a kind the client may see. It holds facts, not a
// wire shape: which fields reach the client, and under which keys, is decided
// by the kind alone (the HTTP adapter's kind table), so use cases build
// errors with the constructors below and never name a JSON key.
type Error struct {
	Kind Kind
	// Msg is the human-readable message (the problem's detail or
	// details.message, as the kind says).
	Msg string
	// Agent and SessionID identify what the error is about.
	Agent     string
	SessionID string
	// Stderr is what a failed install step or an exited agent said; Step
	// names the install step.
	Stderr string
	Step   string
	// ExitCode is an exited agent's code; nil when a signal ended it.
	ExitCode *int
	// LimitBytes is the limit a too-large payload went past; Limit is a
	// cap on a count that was reached.
	LimitBytes int64
	Limit      int
	// MinFreeBytes is the free space a refused write would have eaten into.
	MinFreeBytes int64
	// Resource and ID name an unknown resource of a not_found (a process
	// and its id; empty for a filesystem path), or, for an overloaded
	// error, the system resource that ran out (Exhausted).
	Resource, ID string
	// PolicyStatus is the status an auth policy's deny chose
	// (Decision.Status): a fact of the policy's answer, which the HTTP
	// adapter honours. No other status lives on an Error.
	PolicyStatus int
	// Err, when set, is the cause: logged, never sent.
	Err error
}

func (e *Error) Error() string {
	msg := string(e.Kind)
	for _, part := range []string{e.Agent, e.SessionID, e.Msg} {
		if part != "" {
			msg += ": " + part
		}
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Because records cause as the error's (logged, never sent) cause.
func (e *Error) Because(cause error) *Error {
	e.Err = cause
	return e
}

// Errorf builds an Error of kind k whose client-visible message is formatted.
// Prefer the named constructors; this is for adapters that carry a kind
// decided elsewhere.
func Errorf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}

// InvalidRequest is the most common client error.
func InvalidRequest(format string, args ...any) *Error {
	return Errorf(KindInvalidRequest, format, args...)
}

// UnsupportedAgent is the error for an agent id nothing can run: both the
// ACP use case (invalid ids) and agent resolution (unknown ids) return it.
func UnsupportedAgent(agent string) *Error {
	return &Error{Kind: KindUnsupportedAgent, Agent: agent}
}

// UnlistedAgent is UnsupportedAgent for an id that is not a known agent and
// could not be looked up because the ACP registry could not be read.
func UnlistedAgent(agent string, registryErr error) *Error {
	e := UnsupportedAgent(agent)
	e.Msg = "not a known agent, and the ACP registry could not be read: " + registryErr.Error()
	e.Err = registryErr
	return e
}

// TokenInvalid rejects a request's credentials.
func TokenInvalid(msg string) *Error { return &Error{Kind: KindTokenInvalid, Msg: msg} }

// Denied is a policy's deny: permission_denied, or token_invalid when the
// policy answered 401, with the status it chose (403 when it chose none in
// 400-599) and its message ("denied by policy" when it gave none).
func Denied(d Decision) *Error {
	status, msg := d.Status, d.Message
	if status < 400 || status > 599 {
		status = 403
	}
	msg = cmp.Or(msg, "denied by policy")
	e := PermissionDenied(msg)
	if status == 401 {
		e = TokenInvalid(msg)
	}
	e.PolicyStatus = status
	return e
}

// PermissionDenied is an authorisation refusal; msg says why.
func PermissionDenied(msg string) *Error { return &Error{Kind: KindPermissionDenied, Msg: msg} }

// AgentNotInstalled is an agent that would have to be installed first.
func AgentNotInstalled(agent string) *Error {
	return &Error{Kind: KindAgentNotInstalled, Agent: agent}
}

// SessionNotFound is an unknown ACP server id or config entry.
func SessionNotFound(id string) *Error { return &Error{Kind: KindSessionNotFound, SessionID: id} }

// NotAcceptable is a response type the client does not accept.
func NotAcceptable(msg string) *Error { return &Error{Kind: KindNotAcceptable, Msg: msg} }

// Conflict is a request that contradicts the current state.
func Conflict(msg string) *Error { return &Error{Kind: KindConflict, Msg: msg} }

// PayloadTooLarge is a request body past limit bytes.
func PayloadTooLarge(limit int64) *Error {
	return TooLarge(limit, "request body exceeds %d bytes", limit)
}

// TooLarge is the 413 of a limit of limit bytes (an upload, an archive's
// content, one input write, ...); the limit reaches the client, so it can
// tell what to send instead.
func TooLarge(limit int64, format string, args ...any) *Error {
	e := Errorf(KindPayloadTooLarge, format, args...)
	e.LimitBytes = limit
	return e
}

// InsufficientStorage is the 507 of a write that would leave less than
// minFree bytes free; the client is told how much is kept.
func InsufficientStorage(minFree int64, format string, args ...any) *Error {
	e := Errorf(KindInsufficientStorage, format, args...)
	e.MinFreeBytes = minFree
	return e
}

// UnsupportedMedia is a request body of the wrong media type.
func UnsupportedMedia(msg string) *Error { return &Error{Kind: KindUnsupportedMedia, Msg: msg} }

// InstallFailed is a failed agent install; stderr is what it said.
func InstallFailed(agent, stderr string) *Error {
	return &Error{Kind: KindInstallFailed, Agent: agent, Stderr: stderr}
}

// InstallStepFailed is InstallFailed naming the step that failed.
func InstallStepFailed(agent, step, stderr string) *Error {
	e := InstallFailed(agent, step+": "+stderr)
	e.Step = step
	return e
}

// AgentExited answers requests an exited agent can no longer answer; code
// is nil when a signal ended it, stderr its last lines.
func AgentExited(agent string, code *int, stderr string) *Error {
	return &Error{Kind: KindAgentProcessExited, Agent: agent, ExitCode: code, Stderr: stderr}
}

// StreamError is a failure talking to an agent or the filesystem.
func StreamError(msg string) *Error { return &Error{Kind: KindStreamError, Msg: msg} }

// NotFound is an unknown resource other than an ACP server (a process);
// msg names it.
func NotFound(msg string) *Error { return &Error{Kind: KindNotFound, Msg: msg} }

// ResourceNotFound is an unknown resource of a type the API names (a
// "process"), and its id.
func ResourceNotFound(resource, id string) *Error {
	return &Error{Kind: KindNotFound, Msg: resource + " " + id, Resource: resource, ID: id}
}

// TooManyRequests is a cap of limit live things reached; msg says which.
func TooManyRequests(msg string, limit int) *Error {
	return &Error{Kind: KindTooManyRequests, Msg: msg, Limit: limit}
}

// TooManyInstances is the --max-instances cap of limit live agents
// reached; msg says what to do.
func TooManyInstances(msg string, limit int) *Error {
	return &Error{Kind: KindTooManyInstances, Msg: msg, Limit: limit}
}

// Overloaded is a daemon-wide memory budget of limit bytes spent.
func Overloaded(msg string, limit int64) *Error {
	return &Error{Kind: KindOverloaded, Msg: msg, LimitBytes: limit}
}

// The system resources a start can run out of (Exhausted's resource,
// details.resource on the wire).
const (
	ResourceFileDescriptors = "file_descriptors"
	ResourceProcesses       = "processes"
	ResourceMemory          = "memory"
)

// Exhausted is a resource of the system that ran out (one of the
// Resource* names), an overloaded error: it frees up as streams close and
// agents or processes exit. limit is the count in force when known (the
// open-file limit), else 0; msg says what failed and what to do.
func Exhausted(resource string, limit int, msg string) *Error {
	return &Error{Kind: KindOverloaded, Msg: msg, Resource: resource, Limit: limit}
}

// Timeout is a wait that ran out.
func Timeout(msg string) *Error { return &Error{Kind: KindTimeout, Msg: msg} }

// AsError finds the first *Error in err's chain.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// IsKind reports whether err's chain holds an *Error of kind k.
func IsKind(err error, k Kind) bool {
	e, ok := AsError(err)
	return ok && e.Kind == k
}
