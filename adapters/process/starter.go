package process

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"syscall"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// Starter starts the user's processes (/v1/processes): on pipes, each in a
// process group of its own, or on a pseudo-terminal (creack/pty), each in a
// session of its own with the terminal as its controlling terminal. Either
// way the process id is the group id, so a signal reaches the whole group;
// under the Supervisor, what leaves the group (setsid, a double fork) is
// killed too when the leader exits or is killed.
type Starter struct {
	// BaseEnv is the environment every process starts from (the daemon's,
	// minus its secrets); a spec's Env is added on top.
	BaseEnv []string
	// Secret, as Runner's: variables whose value holds a secret are
	// dropped at each start (DropSecrets).
	Secret func(value string) bool
	// Supervisor, when set (Linux), starts every process under the
	// daemon's process supervisor (see Runner.Supervisor).
	Supervisor *Supervisor
	// Cred, when set, runs every process as that user (--run-as).
	Cred *Credential
}

var _ ports.ProcessStarter = (*Starter)(nil)

// Start implements ports.ProcessStarter.
func (s *Starter) Start(ctx context.Context, spec domain.ProcessSpec) (ports.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path, err := lookPath(spec.Command)
	if err != nil {
		return nil, startError(spec, err)
	}
	if err := fdHeadroom(); err != nil {
		return nil, startError(spec, err)
	}
	env := spec.Env
	if spec.TTY {
		if _, ok := env["TERM"]; !ok && !hasEnv(s.BaseEnv, "TERM") {
			env = withEnv(env, "TERM", "xterm-256color")
		}
	}
	l := &launch{
		path: path, argv: append([]string{spec.Command}, spec.Args...), env: DropSecrets(mergeEnv(s.BaseEnv, env), s.Secret), dir: spec.Dir,
		cred: s.Cred,
	}
	var p *userProc
	if spec.TTY {
		p, err = startPTY(ctx, s.Supervisor, l, spec.Cols, spec.Rows)
	} else {
		p, err = startPipes(ctx, s.Supervisor, l, spec.Stdin)
	}
	if err != nil {
		return nil, startError(spec, err)
	}
	go p.wait()
	return p, nil
}

func hasEnv(env []string, key string) bool {
	for _, kv := range env {
		if len(kv) > len(key) && kv[len(key)] == '=' && kv[:len(key)] == key {
			return true
		}
	}
	return false
}

func withEnv(env map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(env)+1)
	for key, val := range env {
		out[key] = val
	}
	out[k] = v
	return out
}

// startPipes starts l with stdout and stderr on pipes and stdin on a pipe
// (withStdin) or /dev/null.
func startPipes(ctx context.Context, sup *Supervisor, l *launch, withStdin bool) (*userProc, error) {
	var pipes stdio
	if err := pipes.open(withStdin); err != nil {
		pipes.closeAll()
		return nil, err
	}
	l.stdin, l.stdout, l.stderr = pipes.inR, pipes.outW, pipes.errW
	g, err := startGroup(ctx, sup, l)
	if err != nil {
		pipes.closeAll()
		return nil, err
	}
	pipes.started()
	p := &userProc{g: g, done: make(chan struct{})}
	p.io.Stdout, p.io.Stderr = pipes.outR, pipes.errR
	if pipes.inW != nil {
		p.io.Stdin = pipes.inW
	}
	return p, nil
}

// userProc is a started user process.
type userProc struct {
	g  group
	io ports.ProcessIO

	done   chan struct{}
	status domain.ExitStatus
	err    error
}

var _ ports.Process = (*userProc)(nil)

func (p *userProc) IO() ports.ProcessIO { return p.io }
func (p *userProc) PID() int            { return p.g.PID() }

func (p *userProc) Signal(sig domain.Signal) error {
	var s syscall.Signal
	switch sig {
	case domain.SignalTerm:
		s = syscall.SIGTERM
	case domain.SignalKill:
		s = syscall.SIGKILL
	default:
		return fmt.Errorf("unsupported signal %q", sig)
	}
	if err := p.g.Signal(s); err != nil {
		return fmt.Errorf("signal process group %d: %w", p.g.PID(), err)
	}
	return nil
}

func (p *userProc) Wait() (domain.ExitStatus, error) {
	<-p.done
	return p.status, p.err
}

// wait records how the leader ended once its group (or, under the
// supervisor, its whole tree) is gone.
func (p *userProc) wait() {
	ws, err := p.g.Wait()
	switch {
	case err != nil:
		p.err = err
	case ws.Exited():
		code := ws.ExitStatus()
		p.status.Code = &code
	case ws.Signaled():
		p.status.Signal = signalName(ws.Signal())
	}
	close(p.done)
}

// signalName is the conventional name of s ("SIGKILL"), which the API
// reports; Go's String gives "killed".
func signalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return fmt.Sprintf("SIG%d", int(s))
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ",
}

// startError says why a start failed in terms the client can act on,
// without host details beyond what the client itself named: a resource of
// the system that ran out is an overloaded error (exhausted).
func startError(spec domain.ProcessSpec, err error) error {
	if e := exhausted("process", err); e != nil {
		return e
	}
	var msg string
	switch {
	case errors.Is(err, exec.ErrNotFound):
		msg = fmt.Sprintf("command not found: %s", spec.Command)
	case errors.Is(err, exec.ErrDot):
		msg = fmt.Sprintf("command %s resolves to the working directory; name it with ./", spec.Command)
	case isChdir(err) && !errors.Is(err, fs.ErrNotExist):
		msg = fmt.Sprintf("cannot enter working directory %s: %s", spec.Dir, errnoText(err))
	case errors.Is(err, fs.ErrNotExist):
		msg = fmt.Sprintf("cannot start %s: no such file or directory", spec.Command)
		if spec.Dir != "" {
			if _, serr := os.Stat(spec.Dir); serr != nil {
				msg = fmt.Sprintf("working directory does not exist: %s", spec.Dir)
			}
		}
	case errors.Is(err, fs.ErrPermission):
		msg = fmt.Sprintf("cannot start %s: permission denied", spec.Command)
	case errors.Is(err, syscall.ENOEXEC):
		msg = fmt.Sprintf("cannot start %s: not an executable", spec.Command)
	case errors.Is(err, syscall.ENOTDIR):
		msg = fmt.Sprintf("cannot start %s: not a directory", spec.Command)
	default:
		return fmt.Errorf("start %s: %w", spec.Command, err)
	}
	return &domain.Error{Kind: domain.KindInvalidRequest, Msg: msg, Err: err}
}

// isChdir reports whether err is a failure to enter the working directory.
func isChdir(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Op == "chdir"
}

// errnoText is the system's text for err's errno ("permission denied").
func errnoText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}
