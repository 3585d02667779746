package porttest

import (
	"bufio"
	"context"
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// FakeStarter is an in-memory ports.ProcessStarter. Each start builds a
// FakeUserProcess from io.Pipe pairs and runs Program on the far ends in
// its own goroutine. Safe for concurrent use.
type FakeStarter struct {
	// Program plays the process; nil means CatProgram. It owns the
	// process's ends of the pipes and usually ends with p.Exit.
	Program func(spec domain.ProcessSpec, p *FakeUserProcess)
	// StartErr, when set, is asked first; a non-nil error fails the start.
	StartErr func(spec domain.ProcessSpec) error

	mu    sync.Mutex
	procs []*FakeUserProcess
}

var _ ports.ProcessStarter = (*FakeStarter)(nil)

// Start implements ports.ProcessStarter.
func (s *FakeStarter) Start(ctx context.Context, spec domain.ProcessSpec) (ports.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.StartErr != nil {
		if err := s.StartErr(spec); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	p := newFakeUserProcess(20000+len(s.procs), spec)
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	prog := s.Program
	if prog == nil {
		prog = CatProgram
	}
	go prog(spec, p)
	return p, nil
}

// Processes returns every process started so far, oldest first.
func (s *FakeStarter) Processes() []*FakeUserProcess {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*FakeUserProcess(nil), s.procs...)
}

// CatProgram copies stdin to stdout until stdin ends, then exits 0; a
// signal ends it with that signal (see FakeUserProcess.OnSignal).
func CatProgram(_ domain.ProcessSpec, p *FakeUserProcess) {
	if p.In != nil {
		_, _ = io.Copy(p.Out, p.In)
	}
	p.Exit(ExitCode(0))
}

// FakeUserProcess is an in-memory ports.Process. The program's side is the
// exported pipe ends: In (what the daemon wrote to stdin; nil without
// stdin), Out and Err (Err is nil on a terminal, where Out carries all).
type FakeUserProcess struct {
	Spec domain.ProcessSpec
	In   *io.PipeReader
	Out  *io.PipeWriter
	Err  *io.PipeWriter

	// OnSignal is what the program does on a signal; nil means exiting
	// with Signalled(sig). Set it to play a program that ignores SIGTERM.
	OnSignal func(p *FakeUserProcess, sig domain.Signal)

	mu      sync.Mutex
	signals []domain.Signal
	sizes   [][2]uint16

	pid    int
	io     ports.ProcessIO
	exit   sync.Once
	done   chan struct{}
	status domain.ExitStatus
}

var _ ports.Process = (*FakeUserProcess)(nil)

func newFakeUserProcess(pid int, spec domain.ProcessSpec) *FakeUserProcess {
	p := &FakeUserProcess{Spec: spec, pid: pid, done: make(chan struct{})}
	var outR, errR *io.PipeReader
	outR, p.Out = io.Pipe()
	p.io.Stdout = outR
	if spec.TTY || spec.Stdin {
		var inW *io.PipeWriter
		p.In, inW = io.Pipe()
		p.io.Stdin = inW
	}
	if spec.TTY {
		p.io.Resize = func(cols, rows uint16) error {
			select {
			case <-p.done:
				return errors.New("resize: process exited")
			default:
			}
			p.mu.Lock()
			p.sizes = append(p.sizes, [2]uint16{cols, rows})
			p.mu.Unlock()
			return nil
		}
	} else {
		errR, p.Err = io.Pipe()
		p.io.Stderr = errR
	}
	return p
}

// Exit ends the process with st as if its whole group were gone: outputs
// reach EOF, stdin writes fail, Wait returns. Only the first call counts.
func (p *FakeUserProcess) Exit(st domain.ExitStatus) {
	p.exit.Do(func() {
		p.status = st
		p.Out.Close()
		if p.Err != nil {
			p.Err.Close()
		}
		if p.In != nil {
			p.In.CloseWithError(errors.New("write to exited process: broken pipe"))
		}
		close(p.done)
	})
}

// Done is closed once the process has exited.
func (p *FakeUserProcess) Done() <-chan struct{} { return p.done }

// Signals lists the signals sent so far.
func (p *FakeUserProcess) Signals() []domain.Signal {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]domain.Signal(nil), p.signals...)
}

// Sizes lists the terminal sizes set so far.
func (p *FakeUserProcess) Sizes() [][2]uint16 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][2]uint16(nil), p.sizes...)
}

func (p *FakeUserProcess) IO() ports.ProcessIO { return p.io }
func (p *FakeUserProcess) PID() int            { return p.pid }

// Signal implements ports.Process.
func (p *FakeUserProcess) Signal(sig domain.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	p.mu.Lock()
	p.signals = append(p.signals, sig)
	p.mu.Unlock()
	if p.OnSignal != nil && sig != domain.SignalKill {
		p.OnSignal(p, sig)
		return nil
	}
	p.Exit(Signalled(string(sig)))
	return nil
}

// Wait implements ports.Process.
func (p *FakeUserProcess) Wait() (domain.ExitStatus, error) {
	<-p.done
	return p.status, nil
}

// ProcessStarterContract checks the ports.ProcessStarter behaviour the app
// relies on. cat is a spec (with Stdin set) for a program that copies
// stdin to stdout and exits 0 at its end, like cat(1); sleep one for a
// program that runs until signalled.
func ProcessStarterContract(t *testing.T, s ports.ProcessStarter, cat, sleep domain.ProcessSpec) {
	start := func(t *testing.T, spec domain.ProcessSpec) ports.Process {
		t.Helper()
		p, err := s.Start(context.Background(), spec)
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		t.Cleanup(func() {
			_ = p.Signal(domain.SignalKill)
			guard(t, "Wait at cleanup", func() (domain.ExitStatus, error) { return p.Wait() })
		})
		return p
	}

	t.Run("echoes and exits at end of stdin", func(t *testing.T) {
		p := start(t, cat)
		pio := p.IO()
		if p.PID() <= 0 || pio.Stdin == nil || pio.Stdout == nil || pio.Stderr == nil || pio.Resize != nil {
			t.Fatalf("pid %d, io %+v", p.PID(), pio)
		}
		out := bufio.NewReader(pio.Stdout)
		if _, err := io.WriteString(pio.Stdin, "hello\n"); err != nil {
			t.Fatal(err)
		}
		if got := guard(t, "read", func() (string, error) { return out.ReadString('\n') }); got != "hello\n" {
			t.Fatalf("read %q", got)
		}
		pio.Stdin.Close()
		st := guard(t, "Wait", func() (domain.ExitStatus, error) { return p.Wait() })
		if !st.Success() {
			t.Errorf("status %+v, want code 0", st)
		}
		guard(t, "stdout EOF", func() ([]byte, error) { return io.ReadAll(out) })
		guard(t, "stderr EOF", func() ([]byte, error) { return io.ReadAll(pio.Stderr) })
		if err := p.Signal(domain.SignalTerm); err != nil {
			t.Errorf("Signal after exit: %v", err)
		}
	})

	t.Run("a signal ends it and is reported", func(t *testing.T) {
		p := start(t, sleep)
		if err := p.Signal(domain.SignalTerm); err != nil {
			t.Fatal(err)
		}
		st := guard(t, "Wait", func() (domain.ExitStatus, error) { return p.Wait() })
		if st.Code != nil || st.Signal != string(domain.SignalTerm) {
			t.Errorf("status %+v, want signal SIGTERM", st)
		}
	})

	t.Run("a terminal carries all output and resizes", func(t *testing.T) {
		spec := cat
		spec.TTY, spec.Stdin = true, false
		p := start(t, spec)
		pio := p.IO()
		if pio.Stdin == nil || pio.Stdout == nil || pio.Stderr != nil || pio.Resize == nil {
			t.Fatalf("io %+v", pio)
		}
		if err := pio.Resize(100, 40); err != nil {
			t.Fatalf("Resize: %v", err)
		}
		if err := p.Signal(domain.SignalKill); err != nil {
			t.Fatal(err)
		}
		guard(t, "Wait", func() (domain.ExitStatus, error) { return p.Wait() })
	})
}
