package porttest

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

func TestFakeRunnerContract(t *testing.T) {
	RunnerContract(t, &FakeRunner{}, domain.LaunchSpec{Agent: "cat", Command: "cat"})
}

func TestFakeRunnerStartErr(t *testing.T) {
	boom := errors.New("boom")
	r := &FakeRunner{StartErr: func(domain.LaunchSpec) error { return boom }}
	if p, err := r.Start(context.Background(), domain.LaunchSpec{}); !errors.Is(err, boom) || p != nil {
		t.Fatalf("Start = %v, %v", p, err)
	}
	if n := len(r.Processes()); n != 0 {
		t.Errorf("%d processes recorded after a failed start", n)
	}
}

// An agent that ignores SIGTERM is killed at the Stop deadline, not before.
func TestFakeProcessStopEscalates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &FakeRunner{Agent: func(domain.LaunchSpec, *FakeProcess) {}}
		ap, err := r.Start(context.Background(), domain.LaunchSpec{})
		if err != nil {
			t.Fatal(err)
		}
		p := r.Processes()[0]
		p.OnTerm = func(*FakeProcess) {}
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		go func() {
			_ = ap.Stop(ctx)
			close(stopped)
		}()
		synctest.Wait() // Stop is blocked on the agent or the deadline
		select {
		case <-p.Done():
			t.Fatal("exited although it ignores SIGTERM")
		case <-stopped:
			t.Fatal("Stop returned before its deadline")
		default:
		}
		cancel()
		<-stopped
		if st, _ := ap.Wait(); st.Signal != "killed" || st.Code != nil {
			t.Errorf("status = %+v, want killed", st)
		}
	})
}
