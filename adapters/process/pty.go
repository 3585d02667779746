package process

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// startPTY starts l on a new pseudo-terminal of cols x rows (80 x 24 when
// zero), in a session of its own with the terminal as its controlling
// terminal, so the session id, the group id and the pid are one.
func startPTY(ctx context.Context, sup *Supervisor, l *launch, cols, rows uint16) (*userProc, error) {
	if cols == 0 || rows == 0 {
		cols, rows = 80, 24
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open pty: %w", err)
	}
	defer tty.Close() // the child has its own copy once started
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: cols, Rows: rows}); err != nil {
		ptmx.Close()
		return nil, fmt.Errorf("size pty: %w", err)
	}
	// creack/pty's ioctls go through Fd(), which leaves the master in
	// blocking mode, where Close cannot interrupt a pending Read. A
	// non-blocking duplicate goes through the runtime poller instead.
	master, err := pollable(ptmx)
	if err != nil {
		return nil, err
	}
	l.stdin, l.stdout, l.stderr = tty, tty, tty
	l.session = true
	g, err := startGroup(ctx, sup, l)
	if err != nil {
		master.Close()
		return nil, err
	}
	p := &userProc{g: g, done: make(chan struct{})}
	term := &terminal{f: master}
	p.io = ports.ProcessIO{Stdin: master, Stdout: master, Resize: term.resize}
	return p, nil
}

// pollable returns a close-on-exec, non-blocking duplicate of f and closes f.
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dup pty: %w", err)
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("pty non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), nil
}

// terminal resizes a PTY through the runtime's raw connection, so the
// master stays non-blocking.
type terminal struct{ f *os.File }

func (t *terminal) resize(cols, rows uint16) error {
	rc, err := t.f.SyscallConn()
	if err != nil {
		return fmt.Errorf("resize pty: %w", err)
	}
	ws := unix.Winsize{Col: cols, Row: rows}
	var ioErr error
	err = rc.Control(func(fd uintptr) {
		_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, uintptr(unix.TIOCSWINSZ), uintptr(unsafe.Pointer(&ws)))
		if errno != 0 {
			ioErr = errno
		}
	})
	if err == nil {
		err = ioErr
	}
	if err != nil {
		return fmt.Errorf("resize pty: %w", err)
	}
	return nil
}
