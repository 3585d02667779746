package porttest

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// FakeRunner is an in-memory ports.AgentRunner: every Start builds a
// FakeProcess from io.Pipe pairs and runs Agent on the far ends in its own
// goroutine. Safe for concurrent use.
type FakeRunner struct {
	// Agent plays the agent of each started process; nil means CatAgent.
	// It owns the agent's ends of the pipes and usually ends with p.Exit.
	Agent func(spec domain.LaunchSpec, p *FakeProcess)
	// StartErr, when set, is asked first; a non-nil error fails the start
	// and nothing is created.
	StartErr func(spec domain.LaunchSpec) error

	mu    sync.Mutex
	procs []*FakeProcess
}

var _ ports.AgentRunner = (*FakeRunner)(nil)

// Start implements ports.AgentRunner.
func (r *FakeRunner) Start(ctx context.Context, spec domain.LaunchSpec) (ports.AgentProcess, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r.StartErr != nil {
		if err := r.StartErr(spec); err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	p := NewFakeProcess(10000 + len(r.procs))
	p.Spec = spec
	r.procs = append(r.procs, p)
	r.mu.Unlock()
	agent := r.Agent
	if agent == nil {
		agent = CatAgent
	}
	go agent(spec, p)
	return p, nil
}

// Processes returns every process started so far, oldest first.
func (r *FakeRunner) Processes() []*FakeProcess {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*FakeProcess(nil), r.procs...)
}

// CatAgent copies stdin to stdout until stdin ends, then exits with code 0,
// like cat(1).
func CatAgent(_ domain.LaunchSpec, p *FakeProcess) {
	_, _ = io.Copy(p.AgentStdout, p.AgentStdin)
	p.Exit(ExitCode(0))
}

// ExitCode is the status of a process that exited with code.
func ExitCode(code int) domain.ExitStatus { return domain.ExitStatus{Code: &code} }

// Signalled is the status of a process ended by the named signal.
func Signalled(sig string) domain.ExitStatus { return domain.ExitStatus{Signal: sig} }

// FakeProcess is an in-memory ports.AgentProcess. The daemon's side is the
// AgentProcess methods; the agent's side is the exported pipe ends, which
// the test (or FakeRunner.Agent) drives. io.Pipe is synchronous, so an
// agent write returns only once the daemon has read it.
type FakeProcess struct {
	Spec domain.LaunchSpec

	// The agent's ends: read what the daemon wrote to stdin, write stdout
	// and stderr.
	AgentStdin  *io.PipeReader
	AgentStdout *io.PipeWriter
	AgentStderr *io.PipeWriter

	// OnTerm is what the agent does when Stop asks it to terminate (SIGTERM
	// to the group); nil means exiting with Signalled("terminated"). Set
	// it to a no-op to play an agent that ignores SIGTERM, so Stop must
	// escalate at its ctx deadline (then the status is
	// Signalled("killed")).
	OnTerm func(p *FakeProcess)

	pid     int
	stdin   *io.PipeWriter
	stdout  *io.PipeReader
	stderr  *io.PipeReader
	exit    sync.Once
	stop    sync.Once
	done    chan struct{}
	status  domain.ExitStatus
	stopped chan struct{} // closed when Stop is first called
}

var _ ports.AgentProcess = (*FakeProcess)(nil)

// NewFakeProcess returns a running process with the given pid.
func NewFakeProcess(pid int) *FakeProcess {
	p := &FakeProcess{pid: pid, done: make(chan struct{}), stopped: make(chan struct{})}
	p.AgentStdin, p.stdin = io.Pipe()
	p.stdout, p.AgentStdout = io.Pipe()
	p.stderr, p.AgentStderr = io.Pipe()
	return p
}

// Exit ends the process with st, as if the whole group were gone: stdout
// and stderr reach EOF, stdin writes fail, Wait returns. Only the first
// call counts.
func (p *FakeProcess) Exit(st domain.ExitStatus) {
	p.exit.Do(func() {
		p.status = st
		p.AgentStdout.Close()
		p.AgentStderr.Close()
		p.AgentStdin.CloseWithError(errors.New("write to exited process: broken pipe"))
		close(p.done)
	})
}

// Done is closed once the process has exited.
func (p *FakeProcess) Done() <-chan struct{} { return p.done }

// Stopped is closed once Stop has been called.
func (p *FakeProcess) Stopped() <-chan struct{} { return p.stopped }

func (p *FakeProcess) Stdin() io.WriteCloser { return p.stdin }
func (p *FakeProcess) Stdout() io.ReadCloser { return p.stdout }
func (p *FakeProcess) Stderr() io.ReadCloser { return p.stderr }
func (p *FakeProcess) PID() int              { return p.pid }

// Wait implements ports.AgentProcess.
func (p *FakeProcess) Wait() (domain.ExitStatus, error) {
	<-p.done
	return p.status, nil
}

// Stop implements ports.AgentProcess: close stdin, OnTerm, and a kill at
// ctx's deadline. Without OnTerm the process ends by the signal, before its
// stdin is closed: an agent that would exit by itself at the end of its
// input (as the fakes do) could otherwise win the race and end with code 0,
// and tests would see either.
func (p *FakeProcess) Stop(ctx context.Context) error {
	p.stop.Do(func() {
		close(p.stopped)
		if p.OnTerm == nil {
			p.Exit(Signalled("terminated"))
		}
		p.stdin.Close()
		if p.OnTerm != nil {
			p.OnTerm(p)
		}
	})
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
	}
	p.Exit(Signalled("killed"))
	return nil
}
