package processes

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/app/internal/seqring"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// readChunk is the most one read of a process's output takes; each read
// becomes one log entry.
const readChunk = 32 << 10

// inputWriteTimeout bounds one write to a process's stdin or terminal: a
// process that reads nothing must not hold the request (or the terminal
// socket) forever.
const inputWriteTimeout = 10 * time.Second

// proc is one managed process. Its supervisor goroutine owns its end; the
// pump goroutines own its outputs; input writers take inMu.
type proc struct {
	id          string
	seq         uint64
	command     string
	args        []string
	cwd         string
	tty         bool
	interactive bool
	createdAt   int64

	p   ports.Process
	io  ports.ProcessIO
	pid int
	log *outputLog

	pumps sync.WaitGroup
	inMu  sync.Mutex // one writer of stdin at a time

	mu       sync.Mutex // guards st and exitedAt
	st       domain.ExitStatus
	exitedAt int64
	done     chan struct{} // closed once exited, its output all in the log and its slot free (Service.supervise)
}

func newProc(p ports.Process, req domain.ProcessCreateRequest, dir string, logBytes int, pool *seqring.Pool) *proc {
	args := req.Args
	if args == nil {
		args = []string{}
	}
	return &proc{
		command: req.Command, args: args, cwd: dir, tty: req.TTY, interactive: req.Interactive,
		createdAt: time.Now().UnixMilli(),
		p:         p, io: p.IO(), pid: p.PID(),
		log:  newOutputLog(int64(logBytes), pool),
		done: make(chan struct{}),
	}
}

// pump starts one reader goroutine per output stream.
func (pr *proc) pump() {
	if pr.tty {
		pr.startReader(pr.io.Stdout, domain.StreamPTY)
		return
	}
	pr.startReader(pr.io.Stdout, domain.StreamStdout)
	pr.startReader(pr.io.Stderr, domain.StreamStderr)
}

func (pr *proc) startReader(r io.Reader, stream domain.ProcessLogsStream) {
	if r == nil {
		return
	}
	pr.pumps.Add(1)
	go func() {
		defer pr.pumps.Done()
		buf := make([]byte, readChunk)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				pr.log.append(Chunk{Stream: stream, TimestampMs: time.Now().UnixMilli(), Data: append([]byte(nil), buf[:n]...)})
			}
			if err != nil {
				// io.EOF, or EIO from a terminal whose last holder left,
				// or the stream closed after the drain grace.
				return
			}
		}
	}()
}

// wait blocks until the process group is gone and its output drained,
// closes its streams, and records how it ended.
func (pr *proc) wait(grace time.Duration) domain.ExitStatus {
	st, err := pr.p.Wait()
	if err != nil {
		st = domain.ExitStatus{}
	}
	drained := make(chan struct{})
	go func() {
		pr.pumps.Wait()
		close(drained)
	}()
	t := time.NewTimer(grace)
	select {
	case <-drained:
	case <-t.C:
		// Something outside the group still holds the pipes: stop reading.
		closeAll(pr.io.Stdout, pr.io.Stderr)
		<-drained
	}
	t.Stop()
	closeAll(pr.io.Stdin, pr.io.Stdout, pr.io.Stderr)
	pr.mu.Lock()
	pr.st = st
	pr.exitedAt = time.Now().UnixMilli()
	pr.mu.Unlock()
	return st
}

func closeAll(cs ...io.Closer) {
	for _, c := range cs {
		if c != nil {
			_ = c.Close()
		}
	}
}

func (pr *proc) running() bool {
	select {
	case <-pr.done:
		return false
	default:
		return true
	}
}

func (pr *proc) info() domain.ProcessInfo {
	in := domain.ProcessInfo{
		ID: pr.id, Command: pr.command, Args: pr.args, TTY: pr.tty, Interactive: pr.interactive,
		Owner: domain.OwnerUser, Status: domain.ProcessRunning, CreatedAtMs: pr.createdAt,
	}
	if pr.cwd != "" {
		cwd := pr.cwd
		in.Cwd = &cwd
	}
	if pr.running() {
		pid := pr.pid
		in.PID = &pid
		return in
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	in.Status = domain.ProcessExited
	in.ExitCode = pr.st.Code
	in.Signal = pr.st.Signal
	at := pr.exitedAt
	in.ExitedAtMs = &at
	return in
}

// write sends data to the process's stdin or terminal.
func (pr *proc) write(ctx context.Context, data []byte) (int, error) {
	if !pr.running() {
		return 0, errNotRunning()
	}
	if pr.io.Stdin == nil {
		return 0, conflict(errors.New("process has no stdin"))
	}
	pr.inMu.Lock()
	defer pr.inMu.Unlock()
	if d, ok := pr.io.Stdin.(interface{ SetWriteDeadline(time.Time) error }); ok {
		deadline := time.Now().Add(inputWriteTimeout)
		if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
			deadline = dl
		}
		_ = d.SetWriteDeadline(deadline)
	}
	n, err := pr.io.Stdin.Write(data)
	if err == nil {
		return n, nil
	}
	var te interface{ Timeout() bool }
	if errors.As(err, &te) && te.Timeout() {
		return n, domain.Timeout("the process is not reading its input")
	}
	if !pr.running() || errors.Is(err, fs.ErrClosed) || isBrokenPipe(err) {
		return n, errNotRunning()
	}
	return n, domain.StreamError("writing process input failed").Because(err)
}

func isBrokenPipe(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "broken pipe") || strings.Contains(err.Error(), "input/output error"))
}

func (pr *proc) resize(cols, rows uint16) error {
	if pr.io.Resize == nil {
		return conflict(errNoTerminal)
	}
	if !pr.running() {
		return errNotRunning()
	}
	if err := pr.io.Resize(cols, rows); err != nil {
		if !pr.running() {
			return errNotRunning()
		}
		return domain.StreamError("resizing the terminal failed").Because(err)
	}
	return nil
}
