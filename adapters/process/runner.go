package process

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// Runner starts agents as child processes in their own process groups.
type Runner struct {
	// BaseEnv is the environment every agent starts from (the daemon's own,
	// minus anything secret); a spec's Env is added on top.
	BaseEnv []string
	// Secret, when set, is asked about each variable's value when an agent
	// starts; a variable whose value holds a secret is not passed on
	// (DropSecrets).
	Secret func(value string) bool
	// Supervisor, when set (Linux), starts every agent under the daemon's
	// process supervisor, which leaves nothing of an agent's tree alive
	// after it exits or is stopped, even when the daemon is SIGKILLed.
	// Without one, os/exec starts it and only its process group is
	// cleaned up.
	Supervisor *Supervisor
	// Cred, when set, runs every agent as that user (--run-as).
	Cred *Credential
	// DefaultDir is the working directory of an agent whose spec names
	// none (the --run-as user's home: the daemon's may be closed to it);
	// empty means the daemon's.
	DefaultDir string
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

// DropSecrets returns env without the variables whose value secret says
// holds a secret: the one filter both starters apply to the final
// environment of what they start (the daemon's, the launch spec's and the
// client's variables alike), at start time, so a token reloaded since the
// daemon started is covered. A nil secret keeps env.
func DropSecrets(env []string, secret func(string) bool) []string {
	if secret == nil {
		return env
	}
	out := env[:0:0]
	for _, kv := range env {
		if _, v, _ := strings.Cut(kv, "="); v != "" && secret(v) {
			continue
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
	fail := func(err error) (ports.AgentProcess, error) {
		if e := exhausted("agent process", err); e != nil {
			return nil, e
		}
		return nil, fmt.Errorf("start %s: %w", spec.Command, err)
	}
	path, err := lookPath(spec.Command)
	if err != nil {
		return fail(err)
	}
	if err := fdHeadroom(); err != nil {
		return fail(err)
	}
	var pipes stdio
	if err := pipes.open(true); err != nil {
		pipes.closeAll()
		return fail(err)
	}
	l := &launch{
		path: path, argv: append([]string{spec.Command}, spec.Args...), env: DropSecrets(mergeEnv(r.BaseEnv, spec.Env), r.Secret), dir: spec.Dir,
		stdin: pipes.inR, stdout: pipes.outW, stderr: pipes.errW, cred: r.Cred,
	}
	if l.dir == "" {
		l.dir = r.DefaultDir
	}
	g, err := startGroup(ctx, r.Supervisor, l)
	if err != nil {
		pipes.closeAll()
		return fail(err)
	}
	pipes.started()
	p := &proc{g: g, stdin: pipes.inW, stdout: pipes.outR, stderr: pipes.errR, done: make(chan struct{})}
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
	g      group
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
func (p *proc) PID() int              { return p.g.PID() }

func (p *proc) wait() {
	ws, err := p.g.Wait()
	switch {
	case err != nil:
		p.err = err
	case ws.Exited():
		code := ws.ExitStatus()
		p.status.Code = &code
	case ws.Signaled():
		p.status.Signal = ws.Signal().String()
	}
	p.stdin.Close()
	close(p.done)
}

func (p *proc) Wait() (domain.ExitStatus, error) {
	<-p.done
	return p.status, p.err
}

func (p *proc) Stop(ctx context.Context) error {
	p.stopOnce.Do(func() {
		p.stdin.Close()
		_ = p.g.Signal(syscall.SIGTERM)
	})
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
	}
	_ = p.g.Signal(syscall.SIGKILL)
	<-p.done
	return nil
}
