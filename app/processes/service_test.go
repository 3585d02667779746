package processes

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

func kindOf(err error) domain.Kind {
	if e, ok := domain.AsError(err); ok {
		return e.Kind
	}
	return ""
}

func text(entries []domain.ProcessLogEntry) string {
	var sb strings.Builder
	for _, e := range entries {
		b, _ := base64.StdEncoding.DecodeString(e.Data)
		sb.Write(b)
	}
	return sb.String()
}

// waitDone waits for process id to have exited.
func waitDone(t *testing.T, s *Service, id string) {
	t.Helper()
	pr, err := s.lookup(id)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-pr.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not exit", id)
	}
}

func TestSetConfig(t *testing.T) {
	s := New(&porttest.FakeStarter{}, Options{})
	def := domain.DefaultProcessConfig()
	if s.Config() != def {
		t.Fatalf("initial config %+v", s.Config())
	}
	c := def
	c.DefaultRunTimeoutMs, c.MaxRunTimeoutMs = 10_000, 5_000
	got, err := s.SetConfig(c)
	if err != nil || got.DefaultRunTimeoutMs != 5_000 || s.Config() != got {
		t.Fatalf("SetConfig = %+v, %v", got, err)
	}
	for _, bad := range []func(*domain.ProcessConfig){
		func(c *domain.ProcessConfig) { c.MaxConcurrentProcesses = 0 },
		func(c *domain.ProcessConfig) { c.MaxOutputBytes = -1 },
		func(c *domain.ProcessConfig) { c.MaxLogBytesPerProcess = DefaultCeiling().MaxLogBytesPerProcess + 1 },
		func(c *domain.ProcessConfig) { c.MaxConcurrentProcesses = DefaultCeiling().MaxConcurrentProcesses + 1 },
		func(c *domain.ProcessConfig) { c.MaxInputBytesPerRequest = 0 },
	} {
		c := def
		bad(&c)
		if _, err := s.SetConfig(c); kindOf(err) != domain.KindInvalidRequest {
			t.Errorf("SetConfig(%+v) = %v, want invalid_request", c, err)
		}
	}
	if s.Config() != got {
		t.Error("a refused config changed the configuration")
	}
}

func TestManagedProcessLifecycle(t *testing.T) {
	synctest.Test(t, testManagedProcessLifecycle)
}

func testManagedProcessLifecycle(t *testing.T) {
	fs := &porttest.FakeStarter{}
	s := New(fs, Options{})
	ctx := context.Background()
	info, err := s.Create(ctx, domain.ProcessCreateRequest{Command: "cat", Interactive: true})
	if err != nil {
		t.Fatal(err)
	}
	if info.ID != "proc_1" || info.Status != domain.ProcessRunning || info.PID == nil || !info.Interactive || info.Owner != domain.OwnerUser {
		t.Fatalf("info %+v", info)
	}
	if spec := fs.Processes()[0].Spec; !spec.Stdin || spec.TTY {
		t.Errorf("spec %+v: a pipe-mode process gets a stdin pipe", spec)
	}
	for _, in := range []string{"one\n", "two\n"} {
		if n, err := s.Input(ctx, info.ID, []byte(in)); err != nil || n != len(in) {
			t.Fatalf("Input = %d, %v", n, err)
		}
	}
	// io.Pipe is synchronous: cat has handed both lines to the pump once
	// the second write returned; the log has them once the pump appended,
	// which it has when every goroutine of the bubble is blocked.
	synctest.Wait()
	logs, err := s.Logs(info.ID, LogQuery{})
	if err != nil || logs.Stream != domain.StreamCombined || text(logs.Entries) != "one\ntwo\n" || logs.Gap != nil {
		t.Fatalf("Logs = %+v, %v", logs, err)
	}
	one := 1
	tail, _ := s.Logs(info.ID, LogQuery{Tail: &one})
	since, _ := s.Logs(info.ID, LogQuery{Since: &logs.Entries[0].Sequence})
	stderr, _ := s.Logs(info.ID, LogQuery{Stream: domain.StreamStderr})
	if text(tail.Entries) != "two\n" || text(since.Entries) != "two\n" || len(stderr.Entries) != 0 {
		t.Errorf("tail %q, since %q, stderr %d entries", text(tail.Entries), text(since.Entries), len(stderr.Entries))
	}
	if err := s.Delete(info.ID); kindOf(err) != domain.KindConflict {
		t.Errorf("Delete of a running process = %v", err)
	}
	if err := s.Resize(info.ID, 80, 24); kindOf(err) != domain.KindConflict {
		t.Errorf("Resize without a terminal = %v", err)
	}
	got, err := s.Signal(ctx, info.ID, domain.SignalTerm, 10*time.Second)
	if err != nil || got.Status != domain.ProcessExited || got.Signal != "SIGTERM" || got.ExitCode != nil || got.PID != nil || got.ExitedAtMs == nil {
		t.Fatalf("after SIGTERM: %+v, %v", got, err)
	}
	if _, err := s.Input(ctx, info.ID, []byte("late")); kindOf(err) != domain.KindConflict {
		t.Errorf("Input after exit = %v", err)
	}
	if _, err := s.Signal(ctx, info.ID, domain.SignalKill, 0); err != nil {
		t.Errorf("signalling an exited process: %v", err)
	}
	if err := s.Delete(info.ID); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{s.Delete(info.ID), s.Resize(info.ID, 1, 1)} {
		if kindOf(err) != domain.KindNotFound {
			t.Errorf("after delete: %v, want not_found", err)
		}
	}
	if _, err := s.Get(info.ID); kindOf(err) != domain.KindNotFound {
		t.Errorf("Get after delete: %v", err)
	}
	m := s.Metrics()
	if m.Spawns != 1 || m.Running != 0 || m.Exited != 0 || len(m.Exits) != 1 || m.Exits[0].Signal != "SIGTERM" {
		t.Errorf("metrics %+v", m)
	}
}

func TestLiveCapAndInputLimit(t *testing.T) {
	s := New(&porttest.FakeStarter{}, Options{})
	c := domain.DefaultProcessConfig()
	c.MaxConcurrentProcesses, c.MaxInputBytesPerRequest = 1, 4
	if _, err := s.SetConfig(c); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := s.Create(ctx, domain.ProcessCreateRequest{Command: "cat"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, domain.ProcessCreateRequest{Command: "cat"}); kindOf(err) != domain.KindTooManyRequests {
		t.Errorf("second create = %v, want too_many_requests", err)
	}
	if _, err := s.Run(ctx, domain.ProcessRunRequest{Command: "cat"}); kindOf(err) != domain.KindTooManyRequests {
		t.Errorf("run at the cap = %v, want too_many_requests", err)
	}
	if _, err := s.Input(ctx, a.ID, []byte("12345")); kindOf(err) != domain.KindPayloadTooLarge {
		t.Errorf("input past the limit = %v", err)
	}
	if _, err := s.Input(ctx, a.ID, []byte("1234")); err != nil {
		t.Errorf("input at the limit = %v", err)
	}
	if _, err := s.Signal(ctx, a.ID, domain.SignalKill, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, domain.ProcessCreateRequest{Command: "cat"}); err != nil {
		t.Errorf("create after the first exited = %v", err)
	}
}

func TestInvalidRequests(t *testing.T) {
	boom := errors.New("fork failed")
	s := New(&porttest.FakeStarter{StartErr: func(sp domain.ProcessSpec) error {
		if sp.Command == "fail" {
			return boom
		}
		return nil
	}}, Options{ResolveDir: func(_ context.Context, p string) (string, error) {
		if p == "/outside" {
			return "", domain.InvalidRequest("path escapes the filesystem root: /outside")
		}
		return "/root" + p, nil
	}})
	ctx := context.Background()
	outside, inside := "/outside", "/x"
	for _, req := range []domain.ProcessCreateRequest{
		{Command: ""}, {Command: "   "}, {Command: "a\x00b"}, {Command: "sh", Args: []string{"\x00"}},
		{Command: "sh", Env: map[string]string{"A=B": "c"}}, {Command: "sh", Env: map[string]string{"": "c"}},
		{Command: "sh", Cwd: &outside},
	} {
		if _, err := s.Create(ctx, req); kindOf(err) != domain.KindInvalidRequest {
			t.Errorf("Create(%+v) = %v, want invalid_request", req, err)
		}
	}
	if _, err := s.Create(ctx, domain.ProcessCreateRequest{Command: "fail"}); kindOf(err) != domain.KindStreamError || !errors.Is(err, boom) ||
		!strings.HasSuffix(err.Error(), ": "+boom.Error()) {
		t.Errorf("failed start = %v (want the cause, %v, at its end)", err, boom)
	}
	info, err := s.Create(ctx, domain.ProcessCreateRequest{Command: "sh", Cwd: &inside})
	if err != nil || info.Cwd == nil || *info.Cwd != "/root/x" {
		t.Errorf("resolved cwd: %+v, %v", info, err)
	}
	if m := s.Metrics(); m.SpawnFailures != 1 || m.Running != 1 {
		t.Errorf("metrics %+v", m)
	}
	if m := s.Metrics(); m.RunsActive != 0 || m.Running != 1 {
		t.Errorf("after failures: %+v, want one running process and nothing else", m)
	}
}

// A reader whose position was evicted from a small log learns of the gap,
// and a follower reads everything then ends when the process exits.
func TestLogGapAndFollowerEnd(t *testing.T) {
	synctest.Test(t, testLogGapAndFollowerEnd)
}

func testLogGapAndFollowerEnd(t *testing.T) {
	release := make(chan struct{})
	fs := &porttest.FakeStarter{Program: func(_ domain.ProcessSpec, p *porttest.FakeUserProcess) {
		for i := 0; i < 50; i++ {
			io.WriteString(p.Out, strings.Repeat("x", 99)+"\n")
		}
		<-release
		io.WriteString(p.Out, "last\n")
		p.Exit(porttest.ExitCode(3))
	}}
	s := New(fs, Options{})
	c := domain.DefaultProcessConfig()
	c.MaxLogBytesPerProcess = 1000
	s.SetConfig(c)
	info, err := s.Create(context.Background(), domain.ProcessCreateRequest{Command: "flood"})
	if err != nil {
		t.Fatal(err)
	}
	zero := uint64(0)
	synctest.Wait() // the program has written its 50 lines and waits for release
	logs, _ := s.Logs(info.ID, LogQuery{Since: &zero})
	if n := len(logs.Entries); n == 0 || logs.Entries[n-1].Sequence != 50 {
		t.Fatalf("%d entries, want the last to be the 50th line", n)
	}
	if logs.Gap == nil || logs.Gap.LastSequence != 0 || logs.Gap.OldestAvailable <= 1 || logs.Entries[0].Sequence != logs.Gap.OldestAvailable {
		t.Fatalf("gap %+v, first entry %+v", logs.Gap, logs.Entries[0])
	}
	f, err := s.Follow(context.Background(), info.ID, "", &zero)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if chunks, gap, err := f.Next(time.Second); gap == nil || len(chunks) != 0 || err != nil {
		t.Fatalf("first Next: %d chunks, gap %+v, %v", len(chunks), gap, err)
	}
	close(release)
	var last Chunk
	for {
		chunks, _, err := f.Next(time.Second)
		if len(chunks) > 0 {
			last = chunks[len(chunks)-1]
		}
		if errors.Is(err, ErrEnded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if string(last.Data) != "last\n" || last.Seq != 51 || last.Stream != domain.StreamStdout {
		t.Errorf("last chunk %+v", last)
	}
	if ex := f.Exit(); ex.ExitCode == nil || *ex.ExitCode != 3 {
		t.Errorf("exit %+v", ex)
	}
}

// Exited processes holding more output than MaxExitedLogBytes are
// forgotten, oldest first.
func TestMaxExitedLogBytes(t *testing.T) {
	synctest.Test(t, testMaxExitedLogBytes)
}

func testMaxExitedLogBytes(t *testing.T) {
	s := New(&porttest.FakeStarter{Program: func(_ domain.ProcessSpec, p *porttest.FakeUserProcess) {
		io.WriteString(p.Out, strings.Repeat("x", 1000))
		p.Exit(porttest.ExitCode(0))
	}}, Options{MaxExitedLogBytes: 2500})
	var ids []string
	for i := 0; i < 3; i++ {
		info, err := s.Create(context.Background(), domain.ProcessCreateRequest{Command: "x"})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // it has exited, and its exit is recorded
		if m := s.Metrics(); m.Running != 0 {
			t.Fatalf("%s still running: %+v", info.ID, m)
		}
		ids = append(ids, info.ID)
	}
	list := s.List("")
	if len(list) != 2 || list[0].ID != ids[1] {
		t.Errorf("list %+v, want the two newest (3 x 1064 bytes > 2500)", list)
	}
}

// Exited processes beyond MaxExited are forgotten, oldest first.
func TestMaxExited(t *testing.T) {
	synctest.Test(t, testMaxExited)
}

func testMaxExited(t *testing.T) {
	s := New(&porttest.FakeStarter{Program: func(_ domain.ProcessSpec, p *porttest.FakeUserProcess) { p.Exit(porttest.ExitCode(0)) }},
		Options{MaxExited: 2})
	var ids []string
	for i := 0; i < 3; i++ {
		info, err := s.Create(context.Background(), domain.ProcessCreateRequest{Command: "true"})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // it has exited, and its exit is recorded
		ids = append(ids, info.ID)
	}
	list := s.List("")
	if len(list) != 2 || list[0].ID != ids[1] || list[1].ID != ids[2] {
		t.Errorf("list %+v, want the two newest", list)
	}
	if len(s.List(domain.OwnerSystem)) != 0 {
		t.Error("system processes listed")
	}
}

func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &porttest.FakeStarter{Program: func(sp domain.ProcessSpec, p *porttest.FakeUserProcess) {
			switch sp.Command {
			case "loud":
				io.WriteString(p.Out, strings.Repeat("o", 100))
				io.WriteString(p.Err, "e")
				p.Exit(porttest.ExitCode(2))
			case "hang":
				<-p.Done() // until killed
			}
		}}
		s := New(fs, Options{})
		ctx := context.Background()
		ten := 10
		r, err := s.Run(ctx, domain.ProcessRunRequest{Command: "loud", MaxOutputBytes: &ten})
		if err != nil || r.Stdout != "oooooooooo" || !r.StdoutTruncated || r.Stderr != "e" || r.StderrTruncated || r.ExitCode == nil || *r.ExitCode != 2 || r.TimedOut {
			t.Fatalf("loud: %+v, %v", r, err)
		}
		if fs.Processes()[0].Spec.Stdin {
			t.Error("a run got a stdin pipe")
		}
		start := time.Now()
		timeout := int64(1500)
		r, err = s.Run(ctx, domain.ProcessRunRequest{Command: "hang", TimeoutMs: &timeout})
		if err != nil || !r.TimedOut || r.ExitCode != nil || r.Signal != "SIGKILL" || time.Since(start) != 1500*time.Millisecond {
			t.Fatalf("hang: %+v, %v after %v", r, err, time.Since(start))
		}
		// The configured maximum caps the request's timeout.
		c := s.Config()
		c.MaxRunTimeoutMs = 100
		s.SetConfig(c)
		start = time.Now()
		timeout = 60_000
		if r, _ = s.Run(ctx, domain.ProcessRunRequest{Command: "hang", TimeoutMs: &timeout}); !r.TimedOut || time.Since(start) != 100*time.Millisecond {
			t.Errorf("capped timeout: %+v after %v", r, time.Since(start))
		}
		// A caller that leaves kills the run.
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(50*time.Millisecond, cancel)
		if _, err := s.Run(cctx, domain.ProcessRunRequest{Command: "hang"}); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled run = %v", err)
		}
		if m := s.Metrics(); m.Runs != 4 || m.RunTimeouts != 2 || m.RunsActive != 0 {
			t.Errorf("metrics %+v", m)
		}
	})
}

// Close sends SIGTERM to every group, SIGKILL to those left at the
// deadline, and refuses new processes.
func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		fs := &porttest.FakeStarter{Program: func(sp domain.ProcessSpec, p *porttest.FakeUserProcess) {
			if sp.Command == "stubborn" {
				mu.Lock()
				p.OnSignal = func(*porttest.FakeUserProcess, domain.Signal) {}
				mu.Unlock()
			}
			<-p.Done()
		}}
		s := New(fs, Options{})
		ctx := context.Background()
		polite, _ := s.Create(ctx, domain.ProcessCreateRequest{Command: "polite"})
		stubborn, _ := s.Create(ctx, domain.ProcessCreateRequest{Command: "stubborn"})
		runDone := make(chan domain.ProcessRunResponse)
		go func() {
			r, _ := s.Run(ctx, domain.ProcessRunRequest{Command: "run"})
			runDone <- r
		}()
		synctest.Wait()
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		start := time.Now()
		if err := s.Close(cctx); err != nil {
			t.Fatal(err)
		}
		if time.Since(start) != 3*time.Second {
			t.Errorf("Close took %v, want the 3 s grace", time.Since(start))
		}
		a, _ := s.Get(polite.ID)
		b, _ := s.Get(stubborn.ID)
		if a.Signal != "SIGTERM" || b.Signal != "SIGKILL" {
			t.Errorf("polite %+v, stubborn %+v", a, b)
		}
		if r := <-runDone; r.Signal != "SIGTERM" {
			t.Errorf("run in progress ended with %+v, want SIGTERM", r)
		}
		if _, err := s.Create(ctx, domain.ProcessCreateRequest{Command: "late"}); kindOf(err) != domain.KindConflict {
			t.Errorf("create after Close = %v", err)
		}
		if err := s.Close(ctx); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
}

// TestSecretCwdAndCommand: a working directory, or a command named by
// path, inside one of the daemon's secrets is refused (403) before
// anything starts, for managed processes and runs alike, whatever
// ResolveDir did.
func TestSecretCwdAndCommand(t *testing.T) {
	starts := 0
	st := &porttest.FakeStarter{Program: func(spec domain.ProcessSpec, p *porttest.FakeUserProcess) { starts++ }}
	s := New(st, Options{Secrets: &porttest.FakeSecrets{Paths: map[string]string{"/proc/7": "its /proc entries"}}})
	ctx := context.Background()
	for _, c := range []struct {
		cmd, cwd string
		msg      string
	}{
		{"cat", "/proc/7", "cwd /proc/7 is one of the daemon's own secrets (its /proc entries)"},
		{"cat", "/proc/7/fd", "cwd /proc/7/fd is one of the daemon's own secrets"},
		{"/proc/7/exe", "", "command /proc/7/exe is one of the daemon's own secrets"},
		{"./exe", "/proc/7", "cwd /proc/7"},
		{"7/exe", "/proc", "command 7/exe is one of the daemon's own secrets"},
	} {
		cwd := c.cwd
		_, err := s.Create(ctx, domain.ProcessCreateRequest{Command: c.cmd, Cwd: &cwd})
		if kindOf(err) != domain.KindPermissionDenied || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("create %s in %q: %v", c.cmd, c.cwd, err)
		}
		_, err = s.Run(ctx, domain.ProcessRunRequest{Command: c.cmd, Cwd: &cwd})
		if kindOf(err) != domain.KindPermissionDenied {
			t.Errorf("run %s in %q: %v", c.cmd, c.cwd, err)
		}
	}
	if starts != 0 {
		t.Errorf("%d processes started", starts)
	}
	cwd := "/proc"
	if _, err := s.Create(ctx, domain.ProcessCreateRequest{Command: "cat", Cwd: &cwd}); err != nil {
		t.Errorf("a cwd that is not a secret: %v", err)
	}
}
