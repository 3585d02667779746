package porttest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// contractDeadline turns a hang into a failure. It is a deadlock guard, not
// a timing assertion: every step of the contract takes milliseconds.
const contractDeadline = 20 * time.Second

// RunnerContract checks the ports.AgentRunner behaviour the app relies on.
// cat is a spec for an agent that copies stdin to stdout line by line and
// exits with code 0 at the end of stdin, like cat(1).
func RunnerContract(t *testing.T, r ports.AgentRunner, cat domain.LaunchSpec) {
	start := func(t *testing.T) ports.AgentProcess {
		t.Helper()
		p, err := r.Start(context.Background(), cat)
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), contractDeadline)
			defer cancel()
			_ = p.Stop(ctx)
		})
		return p
	}

	t.Run("echoes and exits at end of stdin", func(t *testing.T) {
		p := start(t)
		if p.PID() <= 0 {
			t.Errorf("PID = %d", p.PID())
		}
		out := bufio.NewReader(p.Stdout())
		for _, line := range []string{`{"id":1}`, `{"id":2,"text":"é"}`} {
			if _, err := io.WriteString(p.Stdin(), line+"\n"); err != nil {
				t.Fatalf("write: %v", err)
			}
			got := guard(t, "read stdout", func() (string, error) { return out.ReadString('\n') })
			if got != line+"\n" {
				t.Fatalf("read %q, want %q", got, line+"\n")
			}
		}
		if err := p.Stdin().Close(); err != nil {
			t.Fatalf("close stdin: %v", err)
		}
		st := guard(t, "Wait", func() (domain.ExitStatus, error) { return p.Wait() })
		if !st.Success() || st.Code == nil || *st.Code != 0 || st.Signal != "" {
			t.Errorf("status = %+v, want exit code 0", st)
		}
		rest := guard(t, "stdout EOF", func() ([]byte, error) { return io.ReadAll(out) })
		if len(rest) != 0 {
			t.Errorf("stdout after exit: %q", rest)
		}
		guard(t, "stderr EOF", func() ([]byte, error) { return io.ReadAll(p.Stderr()) })
		if _, err := p.Stdin().Write([]byte("x\n")); err == nil {
			t.Errorf("write to an exited agent succeeded")
		}
	})

	t.Run("stop ends a running agent", func(t *testing.T) {
		p := start(t)
		waited := make(chan domain.ExitStatus, 1)
		go func() {
			st, _ := p.Wait()
			waited <- st
		}()
		ctx, cancel := context.WithTimeout(context.Background(), contractDeadline)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		guard(t, "Wait after Stop", func() (domain.ExitStatus, error) { return <-waited, nil })
		guard(t, "stdout EOF", func() ([]byte, error) { return io.ReadAll(p.Stdout()) })
		// Idempotent, and prompt once the agent is gone.
		if err := p.Stop(ctx); err != nil {
			t.Fatalf("second Stop: %v", err)
		}
		if _, err := p.Stdin().Write([]byte("x\n")); err == nil {
			t.Errorf("write after Stop succeeded")
		}
	})

	t.Run("concurrent stops", func(t *testing.T) {
		p := start(t)
		ctx, cancel := context.WithTimeout(context.Background(), contractDeadline)
		defer cancel()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if err := p.Stop(ctx); err != nil {
					t.Errorf("Stop: %v", err)
				}
			})
		}
		wg.Wait()
		guard(t, "Wait", func() (domain.ExitStatus, error) { return p.Wait() })
	})

	t.Run("closing stdout unblocks a read", func(t *testing.T) {
		p := start(t)
		read := make(chan error, 1)
		go func() {
			_, err := p.Stdout().Read(make([]byte, 16))
			read <- err
		}()
		if err := p.Stdout().Close(); err != nil {
			t.Fatalf("close stdout: %v", err)
		}
		if err := guard(t, "blocked read", func() (error, error) { return <-read, nil }); err == nil {
			t.Errorf("read on a closed stdout returned no error")
		}
	})

	t.Run("cancelled context starts nothing", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		p, err := r.Start(ctx, cat)
		if err == nil {
			_ = p.Stop(context.Background())
			t.Fatalf("Start with a cancelled context succeeded")
		}
		if p != nil {
			t.Errorf("Start failed but returned a process")
		}
	})

	t.Run("agents are independent", func(t *testing.T) {
		const n = 4
		procs := make([]ports.AgentProcess, n)
		pids := map[int]bool{}
		for i := range procs {
			procs[i] = start(t)
			pids[procs[i].PID()] = true
		}
		if len(pids) != n {
			t.Errorf("pids not distinct: %v", pids)
		}
		var wg sync.WaitGroup
		for i, p := range procs {
			wg.Go(func() {
				line := fmt.Sprintf(`{"agent":%d}`+"\n", i)
				if _, err := io.WriteString(p.Stdin(), line); err != nil {
					t.Errorf("write %d: %v", i, err)
					return
				}
				got, err := bufio.NewReader(p.Stdout()).ReadString('\n')
				if err != nil || got != line {
					t.Errorf("agent %d echoed %q, %v", i, got, err)
				}
			})
		}
		wg.Wait()
		// Stopping one leaves the others running.
		ctx, cancel := context.WithTimeout(context.Background(), contractDeadline)
		defer cancel()
		_ = procs[0].Stop(ctx)
		line := "{\"still\":true}\n"
		if _, err := io.WriteString(procs[1].Stdin(), line); err != nil {
			t.Fatalf("write to a sibling: %v", err)
		}
		got := guard(t, "sibling echo", func() (string, error) { return bufio.NewReader(procs[1].Stdout()).ReadString('\n') })
		if got != line {
			t.Errorf("sibling echoed %q", got)
		}
	})
}

// guard runs fn and fails the test when it does not return within
// contractDeadline. fn keeps running if it hangs (it is usually a blocked
// read that ends when the test's cleanup stops the agent).
func guard[T any](t *testing.T, what string, fn func() (T, error)) T {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := fn()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil && r.err != io.EOF {
			t.Fatalf("%s: %v", what, r.err)
		}
		return r.v
	case <-time.After(contractDeadline):
		t.Fatalf("%s: no result after %v", what, contractDeadline)
		panic("unreachable")
	}
}
