package process

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// Starter starts the user's processes (/v1/processes): on pipes, each in a
// process group of its own, or on a pseudo-terminal (creack/pty), each in a
// session of its own with the terminal as its controlling terminal. Either
// way the process id is the group id, so a signal reaches the whole tree.
type Starter struct {
	// BaseEnv is the environment every process starts from (the daemon's,
	// minus its secrets); a spec's Env is added on top.
	BaseEnv []string
	// Secret, as Runner's: variables whose value holds a secret are
	// dropped at each start (DropSecrets).
	Secret func(value string) bool
}

var _ ports.ProcessStarter = (*Starter)(nil)

// Start implements ports.ProcessStarter.
func (s *Starter) Start(ctx context.Context, spec domain.ProcessSpec) (ports.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cmd := exec.Command(spec.Command, spec.Args...)
	cmd.Dir = spec.Dir
	env := spec.Env
	if spec.TTY {
		if _, ok := env["TERM"]; !ok && !hasEnv(s.BaseEnv, "TERM") {
			env = withEnv(env, "TERM", "xterm-256color")
		}
	}
	cmd.Env = DropSecrets(mergeEnv(s.BaseEnv, env), s.Secret)
	var p *userProc
	var err error
	if spec.TTY {
		p, err = startPTY(cmd, spec.Cols, spec.Rows)
	} else {
		p, err = startPipes(cmd, spec.Stdin)
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

// startPipes starts cmd with stdout and stderr on pipes and stdin on a pipe
// (withStdin) or /dev/null.
func startPipes(cmd *exec.Cmd, withStdin bool) (*userProc, error) {
	var pipes stdio
	if err := pipes.open(cmd, withStdin); err != nil {
		pipes.closeAll()
		return nil, err
	}
	cmd.SysProcAttr = sysProcAttr(false)
	if err := cmd.Start(); err != nil {
		pipes.closeAll()
		return nil, err
	}
	pipes.started()
	p := &userProc{cmd: cmd, done: make(chan struct{})}
	p.io.Stdout, p.io.Stderr = pipes.outR, pipes.errR
	if pipes.inW != nil {
		p.io.Stdin = pipes.inW
	}
	return p, nil
}

// userProc is a started user process.
type userProc struct {
	cmd *exec.Cmd
	io  ports.ProcessIO
	// session: the process leads a session of its own (a terminal), whose
	// job-control groups are signalled along with its own group.
	session bool

	mu     sync.Mutex // guards gone against signalling a reused pid
	gone   bool
	done   chan struct{}
	status domain.ExitStatus
	err    error
}

var _ ports.Process = (*userProc)(nil)

func (p *userProc) IO() ports.ProcessIO { return p.io }
func (p *userProc) PID() int            { return p.cmd.Process.Pid }

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
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone {
		return nil
	}
	// While gone is false the leader is not reaped (see wait), so the
	// group id still names our group and no other.
	if err := p.kill(s); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal process group %d: %w", p.cmd.Process.Pid, err)
	}
	return nil
}

// kill sends s to the process's group and, for a session leader, to the
// other groups of its session (background jobs of a shell).
func (p *userProc) kill(s syscall.Signal) error {
	pid := p.cmd.Process.Pid
	err := syscall.Kill(-pid, s)
	if p.session {
		for _, g := range sessionGroups(pid) {
			_ = syscall.Kill(-g, s)
		}
	}
	return err
}

func (p *userProc) Wait() (domain.ExitStatus, error) {
	<-p.done
	return p.status, p.err
}

// wait reaps the leader, kills whatever it left in its group, and waits for
// the group to be gone. The group id cannot be reused while any member is
// alive, and a zombie leader keeps its pid, so signalling -pid before the
// leader is reaped is always safe; after, Signal sees gone.
func (p *userProc) wait() {
	pid := p.cmd.Process.Pid
	// Wait for the leader to exit without reaping it, so its pid (the
	// group id) stays ours while the rest of the group is killed.
	waitExited(pid)
	p.mu.Lock()
	_ = p.kill(syscall.SIGKILL)
	p.gone = true
	p.mu.Unlock()
	err := p.cmd.Wait()
	st := p.cmd.ProcessState
	switch {
	case st == nil:
		p.err = err
	case st.Exited():
		code := st.ExitCode()
		p.status.Code = &code
	default:
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.status.Signal = signalName(ws.Signal())
		}
	}
	waitGroupGone(pid)
	if p.session {
		// Jobs in other groups of the session: killed above, gone now (a
		// job forked meanwhile is caught by the next round).
		deadline := time.Now().Add(groupGoneWait)
		for groups := sessionGroups(pid); len(groups) > 0 && time.Now().Before(deadline); groups = sessionGroups(pid) {
			for _, g := range groups {
				_ = syscall.Kill(-g, syscall.SIGKILL)
			}
			time.Sleep(5 * time.Millisecond)
		}
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

// waitGroupGone waits, boundedly, until no live member of group pgid is
// left (zombies reparented to init do not count).
func waitGroupGone(pgid int) {
	deadline := time.Now().Add(groupGoneWait)
	for time.Now().Before(deadline) && groupAlive(pgid) {
		time.Sleep(5 * time.Millisecond)
	}
}

// startError says why a start failed in terms the client can act on,
// without host details beyond what the client itself named.
func startError(spec domain.ProcessSpec, err error) error {
	var msg string
	switch {
	case errors.Is(err, exec.ErrNotFound):
		msg = fmt.Sprintf("command not found: %s", spec.Command)
	case errors.Is(err, exec.ErrDot):
		msg = fmt.Sprintf("command %s resolves to the working directory; name it with ./", spec.Command)
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
