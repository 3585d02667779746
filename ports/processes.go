package ports

import (
	"context"
	"io"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// ProcessStarter starts the user's processes (the /v1/processes API), on
// pipes or on a pseudo-terminal. It is a port of its own, not AgentRunner,
// because these processes are signalled one signal at a time, may have a
// terminal, and are never stopped by closing stdin.
type ProcessStarter interface {
	// Start launches spec in a process group of its own and returns once the
	// process exists. ctx bounds the start only. A failure to start leaves
	// nothing running and no descriptor open.
	Start(ctx context.Context, spec domain.ProcessSpec) (Process, error)
}

// ProcessIO is a started process's streams, fixed for its life.
//
// Each has one owner in the app: one writer of Stdin (under its own lock),
// one reader goroutine per output. Stdin is nil when the spec asked for
// none. With a terminal, Stdin and Stdout are the PTY and Stderr is nil.
// Stdout and Stderr end (io.EOF) once every process holding them is gone;
// closing them unblocks a pending Read. The app closes all of them.
type ProcessIO struct {
	Stdin  io.WriteCloser
	Stdout io.ReadCloser
	Stderr io.ReadCloser
	// Resize sets the terminal's size (the kernel signals SIGWINCH to its
	// foreground group); nil without a terminal. Safe to call concurrently
	// and after exit (then it fails).
	Resize func(cols, rows uint16) error
}

// Process is a started user process.
type Process interface {
	IO() ProcessIO
	// PID is the process id (also its process group id).
	PID() int
	// Signal sends sig to the whole process group. After the group is gone
	// it does nothing and returns nil. Safe for concurrent use.
	Signal(sig domain.Signal) error
	// Wait blocks until the process has exited and every other member of
	// its group is gone (it kills what the leader left behind; with a
	// process supervisor, everything the leader started, setsid and
	// double-forked descendants too), and says how the leader ended. It may
	// be called from one goroutine only.
	Wait() (domain.ExitStatus, error)
}
