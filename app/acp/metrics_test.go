package acp

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

func metricsPost(t *testing.T, s *Instances, ctx context.Context, id, msg string) ([]byte, error) {
	t.Helper()
	f, err := domain.ParseFrame([]byte(msg))
	if err != nil {
		t.Fatal(err)
	}
	return s.Post(ctx, PostRequest{ServerID: id, Agent: "mock", HasAgent: true, Frame: f})
}

func TestMetricsCounters(t *testing.T) {
	seen := make(chan string, 64)
	var failStart atomic.Bool
	runner := &porttest.FakeRunner{Agent: porttest.RPCAgent(seen), StartErr: func(domain.LaunchSpec) error {
		if failStart.Load() {
			return errors.New("no such file")
		}
		return nil
	}}
	s := NewInstances(Options{ReplayBytes: 1024}, runner, porttest.LaunchAny)
	ctx := context.Background()

	now := `{"jsonrpc":"2.0","id":1,"method":"now"}`
	if _, err := metricsPost(t, s, ctx, "a", now); err != nil {
		t.Fatal(err)
	}
	got := s.Metrics()
	if got.Spawns != 1 || got.Running != 1 || got.FramesToAgent != 1 || got.BytesToAgent != uint64(len(now)+1) {
		t.Fatalf("after one request: %+v", got)
	}
	resp := `{"jsonrpc":"2.0","id":1,"result":{}}`
	if got.FramesFromAgent != 1 || got.BytesFromAgent != uint64(len(resp)) {
		t.Fatalf("frames from agent: %+v", got)
	}
	<-seen

	// A client that leaves before the answer: the answer is late.
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := metricsPost(t, s, cctx, "a", `{"jsonrpc":"2.0","id":2,"method":"later"}`)
		errc <- err
	}()
	if m := <-seen; m != "later" {
		t.Fatalf("agent saw %q", m)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("left POST: %v", err)
	}
	if _, err := metricsPost(t, s, ctx, "a", `{"jsonrpc":"2.0","method":"release"}`); err != nil {
		t.Fatal(err)
	}
	// The agent answers in order, so once request 3 is answered the late
	// response to 2 has been read.
	if _, err := metricsPost(t, s, ctx, "a", `{"jsonrpc":"2.0","id":3,"method":"now"}`); err != nil {
		t.Fatal(err)
	}
	if got := s.Metrics(); got.LateResponses != 1 {
		t.Fatalf("late responses = %d, want 1", got.LateResponses)
	}

	// A reader that falls behind the 1 KiB buffer sees a gap, which still
	// counts after the instance is gone.
	cur, err := s.Subscribe("a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := metricsPost(t, s, ctx, "a", `{"jsonrpc":"2.0","method":"burst","params":{"n":100}}`); err != nil {
		t.Fatal(err)
	}
	if _, err := metricsPost(t, s, ctx, "a", `{"jsonrpc":"2.0","id":4,"method":"now"}`); err != nil {
		t.Fatal(err)
	}
	_, gap, err := cur.Read(ctx, nil, 10, 0)
	if err != nil || gap == nil {
		t.Fatalf("read: gap %v, err %v", gap, err)
	}
	cur.Close()
	if got := s.Metrics(); got.ReplayGaps != 1 {
		t.Fatalf("gaps = %d, want 1", got.ReplayGaps)
	}

	// An exit with a code, then a delete once the exit is recorded (a
	// delete racing the exit would SIGTERM the agent first).
	// Subscribed past the newest event, it starts with the next live one
	// and so cannot fall behind the 1 KiB buffer (no gap to count).
	live := ^uint64(0)
	exitSeen, err := s.Subscribe("a", &live)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := metricsPost(t, s, ctx, "a", `{"jsonrpc":"2.0","method":"exit","params":{"code":3}}`); err != nil {
		t.Fatal(err)
	}
	for exited := false; !exited; {
		evs, _, err := exitSeen.Read(ctx, nil, 64, time.Minute)
		if err != nil {
			t.Fatalf("waiting for the exit: %v", err)
		}
		for _, e := range evs {
			exited = exited || strings.Contains(string(e.Data), "_adapter/agent_exited")
		}
	}
	exitSeen.Close()
	s.Delete(ctx, "a")
	got = s.Metrics()
	want := []ExitCount{{ExitKey: ExitKey{Code: "3"}, Count: 1}}
	if len(got.Exits) != 1 || got.Exits[0] != want[0] {
		t.Fatalf("exits = %+v, want %+v", got.Exits, want)
	}
	if got.Running != 0 || got.Exited != 0 || got.ReplayGaps != 1 {
		t.Fatalf("after delete: %+v", got)
	}

	failStart.Store(true)
	if _, err := metricsPost(t, s, ctx, "b", now); err == nil {
		t.Fatal("spawn of a failing runner succeeded")
	}
	if got := s.Metrics(); got.SpawnFailures != 1 || got.Spawns != 1 {
		t.Fatalf("spawn failures: %+v", got)
	}
}

func TestMetricsExitKeys(t *testing.T) {
	s := NewInstances(Options{}, nil, nil)
	m := &s.metrics
	zero, one := 0, 1
	m.exited(domain.ExitStatus{Code: &zero})
	m.exited(domain.ExitStatus{Code: &one})
	m.exited(domain.ExitStatus{Code: &one})
	m.exited(domain.ExitStatus{Signal: "killed"})
	got := s.Metrics().Exits
	want := []ExitCount{
		{ExitKey: ExitKey{Code: "", Signal: "killed"}, Count: 1},
		{ExitKey: ExitKey{Code: "0"}, Count: 1},
		{ExitKey: ExitKey{Code: "1"}, Count: 2},
	}
	if len(got) != len(want) {
		t.Fatalf("exits = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("exits[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}
