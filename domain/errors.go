package domain

import (
	"errors"
	"fmt"
)

// Kind is one row of the error table in api.md section 1. Adapters translate
// technology errors into a Kind at the port; the HTTP adapter maps a Kind to a
// status and problem body in exactly one place.
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
	// (--inflight-bytes).
	KindOverloaded Kind = "overloaded"
	// KindInsufficientStorage is a write that would leave less than
	// --min-free on its filesystem (507).
	KindInsufficientStorage Kind = "insufficient_storage"
)

// Error is an error with a kind the client may see. Msg is the part after
// "<kind>: " in the problem detail (for kinds whose detail carries one);
// Agent and SessionID become top-level problem extensions, Details the
// "details" object. Err, when set, is the cause: logged, never sent.
type Error struct {
	Kind      Kind
	Msg       string
	Agent     string
	SessionID string
	Details   map[string]any
	// Status overrides the kind's usual HTTP status (e.g. 405, 410, 422 for
	// invalid_request, or a policy's chosen status). Zero means the default.
	Status int
	Err    error
}

func (e *Error) Error() string {
	msg := string(e.Kind)
	if e.Msg != "" {
		msg += ": " + e.Msg
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an Error of kind k whose client-visible message is formatted.
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
	return &Error{Kind: KindUnsupportedAgent, Msg: agent, Agent: agent}
}

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

// TooLarge is the 413 of a limit of limit bytes; the limit reaches the
// client as details.limitBytes, so it can tell what to send instead.
func TooLarge(limit int64, format string, args ...any) *Error {
	e := Errorf(KindPayloadTooLarge, format, args...)
	e.Details = map[string]any{"limitBytes": limit}
	return e
}

// InsufficientStorage is the 507 of a write that would leave less than
// minFree bytes free; details.minFreeBytes says how much is kept.
func InsufficientStorage(minFree int64, format string, args ...any) *Error {
	e := Errorf(KindInsufficientStorage, format, args...)
	e.Details = map[string]any{"minFreeBytes": minFree}
	return e
}
