package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// Runner starts agents as child processes in their own process groups.
type Runner struct {
	// BaseEnv is the environment every agent starts from (the daemon's own,
	// minus anything secret); a spec's Env is added on top.
	BaseEnv []string
}

var _ ports.AgentRunner = (*Runner)(nil)

// FilterEnv returns env without the variables named in drop.
func FilterEnv(env []string, drop ...string) []string {
	out := make([]string, 0, len(env))
next:
	for _, kv := range env {
		for _, d := range drop {
			if strings.HasPrefix(kv, d+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

// Start implements ports.AgentRunner.
func (r *Runner) Start(ctx context.Context, spec domain.LaunchSpec) (ports.AgentProcess, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cmd := exec.Command(spec.Command, spec.Args...)
	cmd.Dir = spec.Dir
	cmd.Env = mergeEnv(r.BaseEnv, spec.Env)
	cmd.SysProcAttr = sysProcAttr()

	var files []*os.File // every pipe end, closed on failure
	pipe := func() (*os.File, *os.File, error) {
		pr, pw, err := os.Pipe()
		if err == nil {
			files = append(files, pr, pw)
		}
		return pr, pw, err
	}
	fail := func(err error) (ports.AgentProcess, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, fmt.Errorf("start %s: %w", spec.Command, err)
	}
	inR, inW, err := pipe()
	if err != nil {
		return fail(err)
	}
	outR, outW, err := pipe()
	if err != nil {
		return fail(err)
	}
	errR, errW, err := pipe()
	if err != nil {
		return fail(err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	// The child has its own copies now.
	inR.Close()
	outW.Close()
	errW.Close()

	p := &proc{cmd: cmd, stdin: inW, stdout: outR, stderr: errR, done: make(chan struct{})}
	go p.wait()
	return p, nil
}

func mergeEnv(base []string, add map[string]string) []string {
	env := make([]string, 0, len(base)+len(add))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, overridden := add[k]; !overridden {
			env = append(env, kv)
		}
	}
	for k, v := range add {
		env = append(env, k+"="+v)
	}
	return env
}

type proc struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	stderr *os.File

	done   chan struct{} // closed when the process and its group are gone
	status domain.ExitStatus
	err    error

	stopOnce sync.Once
}

var _ ports.AgentProcess = (*proc)(nil)

// Stdin is an *os.File, so it also offers SetWriteDeadline.
func (p *proc) Stdin() io.WriteCloser { return p.stdin }
func (p *proc) Stdout() io.ReadCloser { return p.stdout }
func (p *proc) Stderr() io.ReadCloser { return p.stderr }
func (p *proc) PID() int              { return p.cmd.Process.Pid }

// groupGoneWait bounds how long Wait polls for the rest of the process group
// to disappear after SIGKILL (zombies not reaped by init keep it "alive").
const groupGoneWait = time.Second

func (p *proc) wait() {
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
			p.status.Signal = ws.Signal().String()
		}
	}
	// The leader is gone; whatever it left in its group goes too, so an agent
	// exiting on its own leaks nothing either.
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	deadline := time.Now().Add(groupGoneWait)
	for time.Now().Before(deadline) && groupAlive(pgid) {
		time.Sleep(5 * time.Millisecond)
	}
	p.stdin.Close()
	close(p.done)
}

// groupAlive reports whether any non-zombie process is still in group pgid.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	return groupHasLiveMember(pgid)
}

func (p *proc) Wait() (domain.ExitStatus, error) {
	<-p.done
	return p.status, p.err
}

func (p *proc) Stop(ctx context.Context) error {
	p.stopOnce.Do(func() {
		p.stdin.Close()
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	})
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	return nil
}
