package ports

import (
	"context"
	"io"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// AgentRunner starts agent processes.
type AgentRunner interface {
	// Start launches spec and returns once the process exists. ctx bounds the
	// start only; the process outlives it and ends through Stop or on its own.
	// A failure to start is returned as an error and leaves nothing running.
	Start(ctx context.Context, spec domain.LaunchSpec) (AgentProcess, error)
}

// AgentProcess is a running agent: a byte pipe plus a lifetime.
//
// Stdin, Stdout and Stderr each have one owner in the app: one writer (under
// its own lock) and one reader goroutine per stream. Stdin may also implement
// SetWriteDeadline(time.Time) error, as pipes do, so a writer can give up on
// an agent that stopped reading.
type AgentProcess interface {
	Stdin() io.WriteCloser
	// Stdout and Stderr end with io.EOF once every process that held them has
	// exited; closing them unblocks a pending Read.
	Stdout() io.ReadCloser
	Stderr() io.ReadCloser
	// PID is the process id of the agent (also its process group id).
	PID() int
	// Wait blocks until the agent has exited and its process group is gone
	// (with a process supervisor, everything it started: setsid and
	// double-forked descendants too), and returns how it ended. It may be
	// called from one goroutine only.
	Wait() (domain.ExitStatus, error)
	// Stop closes stdin, asks the whole process group to terminate, and kills
	// it when ctx is done. It returns once the process has been reaped; it is
	// safe to call more than once and concurrently with Wait.
	Stop(ctx context.Context) error
}

// Authorizer is the auth policies: it answers deny, grant (with a
// principal) or pass for a request the daemon has described (action and
// resource included). The auth chain (app/authz) calls it before the
// built-in token check, concurrently from many requests. An error means
// the request ended while waiting, not a refusal.
type Authorizer interface {
	Authorize(ctx context.Context, req domain.AuthRequest) (domain.Decision, error)
}

// BodylessAuthorizer is an optional ability of an Authorizer, found by
// type assertion: deciding a request before its body is read. A few
// requests take part of their description from their body (a move's
// paths, FSPath and FSDest; an ACP POST's JSON-RPC kind, id and method,
// RPC); the HTTP adapter first describes them without it, so that a
// request the chain refuses whatever its body holds is refused before
// any byte of the body is read.
type BodylessAuthorizer interface {
	// AuthorizeWithoutBody decides req, described without its body (its
	// FSPath, FSDest and RPC empty), as Authorize would decide it whatever
	// the body adds to them. ok is false when the decision may depend on
	// them, or the policies cannot tell: the caller then reads the body,
	// describes the request whole and calls Authorize. An error is as
	// Authorize's (the request ended while waiting).
	AuthorizeWithoutBody(ctx context.Context, req domain.AuthRequest) (d domain.Decision, ok bool, err error)
}
