package e2e

// The fault suite: the daemon under abuse from agents and clients. Each test
// checks that nothing hangs (every step is bounded), that the daemon stays
// responsive, and that it leaks nothing: processes, file descriptors,
// goroutines, memory.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

type postResult struct {
	st   int
	body []byte
	took time.Duration
}

// postAsync sends a POST in the background; the result arrives on the
// channel.
func postAsync(ctx context.Context, d *harness.Daemon, path, msg string) <-chan postResult {
	ch := make(chan postResult, 1)
	go func() {
		start := time.Now()
		req, _ := http.NewRequestWithContext(ctx, "POST", d.URL+path, strings.NewReader(msg))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- postResult{st: -1, body: []byte(err.Error()), took: time.Since(start)}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ch <- postResult{resp.StatusCode, b, time.Since(start)}
	}()
	return ch
}

func waitResult(t *testing.T, ch <-chan postResult, limit time.Duration, what string) postResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(limit):
		t.Fatalf("%s: no answer within %v", what, limit)
	}
	return postResult{}
}

// An agent killed with SIGKILL in the middle of a turn: pending requests
// fail at once, the stream says so, the daemon carries on.
func TestFaultAgentKilledMidTurn(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t, "--async-methods", "turn/hang", "--log-level", "info")})
	if st, b := d.Post("/v1/acp/k?agent=test", initMsg); st != 200 {
		t.Fatalf("bootstrap: %d %s", st, b)
	}
	s := d.Stream("/v1/acp/k")
	if st, b := d.Post("/v1/acp/k", `{"jsonrpc":"2.0","id":"turn","method":"turn/hang"}`); st != 202 {
		t.Fatalf("async turn: %d %s", st, b)
	}
	pending := postAsync(context.Background(), d, "/v1/acp/k", `{"jsonrpc":"2.0","id":2,"method":"hang"}`)
	harness.Eventually(t, 5*time.Second, "two pending requests", func() bool { return d.Server("k").PendingRequests == 2 })
	// The agent is busy writing when it dies.
	d.Post("/v1/acp/k", `{"jsonrpc":"2.0","method":"burst","params":{"n":1000000}}`)
	s.Until(t, 5*time.Second, harness.HasMethod("tick"))
	pid := d.Server("k").PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	r := waitResult(t, pending, 10*time.Second, "pending POST after SIGKILL")
	p := parseProblem(t, r.body)
	if r.st != 500 || p.Type != "urn:sandbox-agent:error:agent_process_exited" || p.Details["exitCode"] != nil {
		t.Fatalf("pending POST: %d %s", r.st, r.body)
	}
	s.Until(t, 20*time.Second, func(ev harness.Event) bool {
		return strings.Contains(ev.Data, `"id":"turn","error"`)
	})
	exited := s.Until(t, 5*time.Second, harness.HasMethod("_adapter/agent_exited"))
	if !strings.Contains(exited.Data, `"success":false,"code":null`) {
		t.Fatalf("exit event: %s", exited.Data)
	}
	if got := liveGroupMembers(pid); len(got) != 0 {
		t.Fatalf("group %d still has %v", pid, got)
	}
	if m := d.Metrics(); harness.MetricSum(m, "sandbox_agent_agent_exits_total", `signal="killed"`) != 1 {
		t.Fatalf("exits by signal: %v", harness.MetricSum(m, "sandbox_agent_agent_exits_total", `signal="killed"`))
	}
	// The id is still listed (exited) and can be deleted and reused.
	if info := d.Server("k"); info.State != "exited" {
		t.Fatalf("listing: %+v", info)
	}
	if st, _, _ := d.Do("DELETE", "/v1/acp/k", nil); st != 204 {
		t.Fatalf("DELETE: %d", st)
	}
	if st, b := d.Post("/v1/acp/k?agent=test", initMsg); st != 200 {
		t.Fatalf("reuse: %d %s", st, b)
	}
}

// An agent that stops reading stdin: writes give up after the stdin write
// timeout with 502, concurrent writers are not stuck behind it, and the
// rest of the daemon does not notice.
func TestFaultWedgedAgent(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{
		Args: harness.WithTestAgent(t, "--stdin-write-timeout", "1s", "--log-level", "info"),
		Env:  []string{"SANDBOX_AGENT_ACP_REQUEST_TIMEOUT_MS=1500"},
	})
	for _, id := range []string{"w", "ok"} {
		if st, b := d.Post("/v1/acp/"+id+"?agent=test", initMsg); st != 200 {
			t.Fatalf("bootstrap %s: %d %s", id, st, b)
		}
	}
	if st, b := d.Post("/v1/acp/w", `{"jsonrpc":"2.0","id":2,"method":"wedge"}`); st != 504 {
		t.Fatalf("wedge request: %d %s (want the request timeout)", st, b)
	}
	// 1 MiB notifications cannot fit in the pipe the agent no longer reads.
	big := `{"jsonrpc":"2.0","method":"echo","params":{"pad":"` + strings.Repeat("x", 1<<20) + `"}}`
	var results []<-chan postResult
	for range 3 {
		results = append(results, postAsync(context.Background(), d, "/v1/acp/w", big))
	}
	// Meanwhile everything else answers.
	for i := range 5 {
		start := time.Now()
		if st, b := d.Post("/v1/acp/ok", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, 10+i)); st != 200 {
			t.Fatalf("other instance: %d %s", st, b)
		}
		if st, _, _ := d.Do("GET", "/v1/health", nil); st != 200 {
			t.Fatalf("health: %d", st)
		}
		t.Logf("other instance and health answered in %v while stdin of w is stuck", time.Since(start))
	}
	for i, ch := range results {
		r := waitResult(t, ch, 15*time.Second, "write to a wedged agent")
		p := parseProblem(t, r.body)
		if r.st != 502 || p.Type != "urn:sandbox-agent:error:stream_error" {
			t.Fatalf("write %d: %d %s", i, r.st, r.body)
		}
		t.Logf("write %d gave up after %v", i, r.took)
	}
	// The broken pipe stays broken: later writes fail at once.
	if st, b := d.Post("/v1/acp/w", `{"jsonrpc":"2.0","id":3,"method":"ping"}`); st != 502 {
		t.Fatalf("after a failed write: %d %s", st, b)
	}
	if m := d.Metrics(); m["sandbox_agent_acp_stdin_write_failures_total"] < 1 {
		t.Fatalf("stdin write failures = %v", m["sandbox_agent_acp_stdin_write_failures_total"])
	}
	pid := d.Server("w").PID
	if st, _, _ := d.Do("DELETE", "/v1/acp/w", nil); st != 204 {
		t.Fatalf("DELETE: %d", st)
	}
	if got := liveGroupMembers(pid); len(got) != 0 {
		t.Fatalf("wedged agent left %v", got)
	}
}

// An agent flooding stderr: the daemon drains it without blocking the
// agent, stays responsive, keeps a bounded tail and bounded memory.
func TestFaultStderrFlood(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t, "--log-level", "info")})
	if st, b := d.Post("/v1/acp/f?agent=test", initMsg); st != 200 {
		t.Fatalf("bootstrap: %d %s", st, b)
	}
	s := d.Stream("/v1/acp/f")
	pid := d.Cmd.Process.Pid
	rssBefore := statusKiB(t, pid, "VmRSS")

	const lines = 200000 // about 200 MiB
	d.Post("/v1/acp/f", fmt.Sprintf(`{"jsonrpc":"2.0","method":"stderr-flood","params":{"n":%d}}`, lines))
	flooded := make(chan struct{})
	go func() {
		defer close(flooded)
		for {
			ev, err := s.Next()
			if err != nil || strings.Contains(ev.Data, `"method":"flooded"`) {
				return
			}
		}
	}()
	var worst time.Duration
	requests := 0
	deadline := time.After(60 * time.Second)
loop:
	for i := 0; ; i++ {
		select {
		case <-flooded:
			break loop
		case <-deadline:
			t.Fatal("flood did not finish within 60 s")
		default:
		}
		start := time.Now()
		if st, b := d.Post("/v1/acp/f", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, 100+i)); st != 200 {
			t.Fatalf("request during flood: %d %s", st, b)
		}
		if st, _, _ := d.Do("GET", "/v1/acp/f/stderr", nil); st != 200 {
			t.Fatalf("stderr route during flood: %d", st)
		}
		worst = max(worst, time.Since(start))
		requests++
	}
	growth := statusKiB(t, pid, "VmHWM") - rssBefore
	t.Logf("%d request pairs during a %d MiB stderr flood, slowest %v; peak RSS growth %d KiB", requests, lines>>10, worst, growth)
	if growth > 64<<10 {
		t.Fatalf("daemon RSS grew by %d KiB during the flood (limit 64 MiB)", growth)
	}
	st, _, tail := d.Do("GET", "/v1/acp/f/stderr", nil)
	if st != 200 || len(tail) > 64<<10+16 {
		t.Fatalf("stderr tail: %d, %d bytes", st, len(tail))
	}
	got := strings.Split(string(tail), "\n")
	if len(got) > 16 || got[len(got)-1] != "flood done" {
		t.Fatalf("stderr tail: %d lines, last %q", len(got), got[len(got)-1])
	}
}

// Clients that leave: in the middle of sending a POST body, while their
// POST waits for the agent (the answer then counts as late), and in the
// middle of a stream during a burst. None of it leaves anything behind.
func TestFaultClientDisconnects(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t, "--log-level", "info")})
	if st, b := d.Post("/v1/acp/c?agent=test", initMsg); st != 200 {
		t.Fatalf("bootstrap: %d %s", st, b)
	}
	addr := strings.TrimPrefix(d.URL, "http://")
	http.DefaultClient.CloseIdleConnections()
	baseline := d.Metrics()["go_goroutines"]

	t.Run("mid-POST body", func(t *testing.T) {
		for i := range 20 {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(conn, "POST /v1/acp/half-%d?agent=test HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n", i)
			conn.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 4000)))
			conn.Close()
		}
		for _, s := range d.Servers() {
			if strings.HasPrefix(s.ServerID, "half-") {
				t.Fatalf("a half-sent POST created %s", s.ServerID)
			}
		}
	})

	t.Run("while waiting for the agent", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		ch := postAsync(ctx, d, "/v1/acp/c", `{"jsonrpc":"2.0","id":"left","method":"slow","params":{"delayMs":300}}`)
		harness.Eventually(t, 5*time.Second, "request pending", func() bool { return d.Server("c").PendingRequests == 1 })
		cancel()
		if r := waitResult(t, ch, 5*time.Second, "cancelled POST"); r.st != -1 {
			t.Fatalf("cancelled POST answered %d", r.st)
		}
		harness.Eventually(t, 5*time.Second, "late response counted", func() bool {
			return d.Metrics()["sandbox_agent_acp_late_responses_total"] == 1
		})
		if n := d.Server("c").PendingRequests; n != 0 {
			t.Fatalf("pending after the client left: %d", n)
		}
	})

	t.Run("mid-stream during a burst", func(t *testing.T) {
		for range 5 {
			s := d.Stream("/v1/acp/c")
			d.Post("/v1/acp/c", `{"jsonrpc":"2.0","method":"burst","params":{"n":100000}}`)
			s.Until(t, 5*time.Second, harness.HasMethod("tick"))
			s.Close()
		}
		harness.Eventually(t, 10*time.Second, "subscribers gone", func() bool { return d.Server("c").Subscribers == 0 })
		if st, b := d.Post("/v1/acp/c", `{"jsonrpc":"2.0","id":"after","method":"ping"}`); st != 200 {
			t.Fatalf("after disconnects: %d %s", st, b)
		}
	})

	http.DefaultClient.CloseIdleConnections()
	var now float64
	harness.Eventually(t, 10*time.Second, "goroutines back to baseline", func() bool {
		now = d.Metrics()["go_goroutines"]
		http.DefaultClient.CloseIdleConnections()
		return now <= baseline+2
	})
	t.Logf("goroutines: %v before, %v after", baseline, now)
}

// 1 000 spawn/DELETE cycles leave no zombie, no descriptor and no
// goroutine behind.
func TestFaultSpawnDeleteCycles(t *testing.T) {
	t.Parallel()
	// GOGC=off: no collection, so no finalizer closes a descriptor the
	// daemon forgot; every one must be closed explicitly.
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t, "--log-level", "warn"), Env: []string{"GOGC=off"}})
	pid := d.Cmd.Process.Pid
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	cycle := func(id string) error {
		req, _ := http.NewRequest("POST", d.URL+"/v1/acp/"+id+"?agent=test", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("POST %s: %d %s", id, resp.StatusCode, b)
		}
		req, _ = http.NewRequest("DELETE", d.URL+"/v1/acp/"+id, nil)
		resp, err = client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 204 {
			return fmt.Errorf("DELETE %s: %d", id, resp.StatusCode)
		}
		return nil
	}
	settle := func() (fds int, goroutines float64) {
		tr.CloseIdleConnections()
		http.DefaultClient.CloseIdleConnections()
		m := d.Metrics() // opens one connection of DefaultClient, closed next
		http.DefaultClient.CloseIdleConnections()
		time.Sleep(50 * time.Millisecond) // let the server see the closes
		return openFDs(t, pid), m["go_goroutines"]
	}
	for i := range 20 {
		if err := cycle(fmt.Sprintf("warm-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	fds0, g0 := settle()

	const workers, perWorker = 4, 250
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				if err := cycle(fmt.Sprintf("cyc-%d-%d", w, i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d spawn/DELETE cycles in %v", workers*perWorker, time.Since(start))

	var fds int
	var g float64
	harness.Eventually(t, 10*time.Second, "descriptors and goroutines back to baseline", func() bool {
		fds, g = settle()
		return fds <= fds0 && g <= g0+2
	})
	t.Logf("open fds %d → %d, goroutines %v → %v", fds0, fds, g0, g)
	if z := zombieChildren(pid); len(z) != 0 {
		t.Fatalf("zombie children: %v", z)
	}
	if n := len(d.Servers()); n != 0 {
		t.Fatalf("%d instances left", n)
	}
	m := d.Metrics()
	if spawns, exits := m["sandbox_agent_agent_spawns_total"], harness.MetricSum(m, "sandbox_agent_agent_exits_total"); spawns != 1020 || exits != 1020 {
		t.Fatalf("spawns %v, exits %v, want 1020 each", spawns, exits)
	}
}

// SIGTERM while ten instances are busy (requests pending, streams open and
// flowing, agents ignoring SIGTERM, grandchildren ignoring it too): the
// daemon exits within the grace period plus its margin, and leaves no
// process behind.
func TestFaultSIGTERMBusy(t *testing.T) {
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t, "--stop-grace", "1s", "--log-level", "info")})
	var pgids, grandchildren []int
	var pending []<-chan postResult
	for i := range 10 {
		id := fmt.Sprintf("busy-%d", i)
		if st, b := d.Post("/v1/acp/"+id+"?agent=test", initMsg); st != 200 {
			t.Fatalf("bootstrap %s: %d %s", id, st, b)
		}
		s := d.Stream("/v1/acp/" + id)
		switch i % 3 {
		case 0:
			d.Post("/v1/acp/"+id, `{"jsonrpc":"2.0","method":"ignore-term"}`)
			s.Until(t, 5*time.Second, harness.HasMethod("ignoring-term"))
		case 1:
			d.Post("/v1/acp/"+id, `{"jsonrpc":"2.0","method":"spawn"}`)
			grandchildren = append(grandchildren, spawnedPID(t, s))
		}
		pending = append(pending, postAsync(context.Background(), d, "/v1/acp/"+id, `{"jsonrpc":"2.0","id":2,"method":"hang"}`))
		if i%3 == 2 {
			// Flowing output, read by one stream and ignored by another.
			d.Stream("/v1/acp/" + id)
			d.Post("/v1/acp/"+id, `{"jsonrpc":"2.0","method":"burst","params":{"n":5000000}}`)
			go func() {
				for {
					if _, err := s.Next(); err != nil {
						return
					}
				}
			}()
		}
		pgids = append(pgids, d.Server(id).PID)
	}
	harness.Eventually(t, 5*time.Second, "requests pending", func() bool {
		n := 0
		for _, s := range d.Servers() {
			n += s.PendingRequests
		}
		return n == 10
	})

	start := time.Now()
	if err := d.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("daemon did not exit within 15 s of SIGTERM")
	}
	took := time.Since(start)
	t.Logf("daemon exited %v after SIGTERM (grace 1 s)", took)
	// The contract is grace + 2 s; a second of slack for a loaded machine.
	if took > 4*time.Second {
		t.Fatalf("exit took %v, want under grace + 2 s", took)
	}
	if code := d.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	for _, p := range pgids {
		if got := liveGroupMembers(p); len(got) != 0 {
			t.Errorf("group %d still has %v", p, got)
		}
	}
	waitGone(t, 2*time.Second, grandchildren...)
	for i, ch := range pending {
		r := waitResult(t, ch, 5*time.Second, "pending POST at shutdown")
		if r.st == 200 {
			t.Errorf("pending %d answered 200: %s", i, r.body)
		}
	}
}
