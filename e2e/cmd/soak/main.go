// Command soak runs the daemon under a mixed load for minutes and reports
// its resident memory, goroutines and open descriptors over time, so a
// leak shows as a trend rather than a number. It is not part of the test
// command.
//
//	go run ./e2e/cmd/soak -duration 5m      (or: just soak 5m)
//
// The load, all at once: instances spawned, used and deleted in a loop;
// long-lived mock sessions streaming prompts to subscribers that reconnect
// with Last-Event-ID; streams opened and dropped mid-burst; readers that
// never read (cut by the stream write timeout); agents that exit mid-turn,
// stop reading stdin, or answer after the request timed out; file PUT and
// GET. At the end every instance is deleted, the figures must return to
// their baseline, and the daemon must stop on SIGTERM within its grace
// period leaving no process behind. The exit status says whether it did.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/proc"
)

func main() {
	duration := flag.Duration("duration", 5*time.Minute, "how long the load runs")
	every := flag.Duration("sample", 15*time.Second, "time between samples")
	workers := flag.Int("workers", 2, "goroutines per kind of load")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *duration, *every, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

type daemon struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
}

func run(ctx context.Context, duration, every time.Duration, workers int) error {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		return errors.New("run soak from inside the sandbox-agent module")
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	work, err := os.MkdirTemp("", "soak-")
	if err != nil {
		return err
	}
	defer func() { proc.KillUnder(work); os.RemoveAll(work) }()
	build := exec.CommandContext(ctx, "go", "build", "-o", work+"/", "./cmd/sandbox-agent", "./e2e/testagent")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	agents := filepath.Join(work, "agents.json")
	if err := os.WriteFile(agents, []byte(`{"agents":[{"id":"test","command":"`+filepath.Join(work, "testagent")+`"}]}`), 0o644); err != nil {
		return err
	}
	d, err := start(work, agents)
	if err != nil {
		return err
	}
	defer func() { _ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL) }()

	l := &load{d: d, home: work, errs: map[string]int{}}
	time.Sleep(time.Second)
	first := l.sample()
	fmt.Printf("%-8s %10s %10s %6s %10s %8s %10s %8s\n", "elapsed", "rss", "heap", "gorout", "open fds", "instances", "spawns", "errors")
	printSample := func(s sample, at time.Duration) {
		fmt.Printf("%-8s %8.1fMiB %8.1fMiB %6.0f %10.0f %8.0f %10.0f %8d\n", at.Truncate(time.Second), s.rss/1048576, s.heap/1048576, s.goroutines, s.fds, s.instances, s.spawns, l.errCount())
	}
	printSample(first, 0)

	lctx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	var wg sync.WaitGroup
	for w := range workers {
		for _, f := range []func(context.Context, int){l.churn, l.sessions, l.streamChurn, l.faults, l.files, l.slowReader} {
			wg.Add(1)
			go func() { defer wg.Done(); f(lctx, w) }()
		}
	}
	startAt := time.Now()
	var maxRSS, maxG float64
	tick := time.NewTicker(every)
	for done := false; !done; {
		select {
		case <-lctx.Done():
			done = true
		case <-tick.C:
			s := l.sample()
			maxRSS, maxG = max(maxRSS, s.rss), max(maxG, s.goroutines)
			printSample(s, time.Since(startAt))
		}
	}
	tick.Stop()
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}

	// Clean up and let the daemon settle: everything must come back.
	for _, s := range l.servers() {
		l.del(s)
	}
	http.DefaultClient.CloseIdleConnections()
	time.Sleep(2 * time.Second)
	last := l.sample()
	printSample(last, time.Since(startAt))
	fmt.Printf("\nload ran %v: %.0f spawns, %d operations, %d unexpected results\n", duration, last.spawns, l.ops.Load(), l.errCount())
	for k, n := range l.errors() {
		fmt.Printf("  %s: %d\n", k, n)
	}
	fmt.Printf("RSS: %.1f MiB at start, %.1f MiB peak under load, %.1f MiB after cleanup\n", first.rss/1048576, maxRSS/1048576, last.rss/1048576)
	fmt.Printf("goroutines: %.0f at start, %.0f peak, %.0f after cleanup; open fds %.0f → %.0f\n", first.goroutines, maxG, last.goroutines, first.fds, last.fds)

	if last.fds > first.fds+2 {
		fmt.Println("open descriptors after cleanup:", describeFDs(d.cmd.Process.Pid))
	}
	startStop := time.Now()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		return errors.New("daemon did not exit within 10 s of SIGTERM")
	}
	fmt.Printf("SIGTERM to exit: %v\n", time.Since(startStop).Round(time.Millisecond))
	left := proc.ExeUnder(work)
	var problems []string
	if len(left) > 0 {
		problems = append(problems, fmt.Sprintf("processes left: %v", left))
	}
	if last.goroutines > first.goroutines+5 {
		problems = append(problems, fmt.Sprintf("goroutines grew %.0f → %.0f", first.goroutines, last.goroutines))
	}
	if last.fds > first.fds+2 {
		problems = append(problems, fmt.Sprintf("open fds grew %.0f → %.0f", first.fds, last.fds))
	}
	if l.errCount() > 0 {
		problems = append(problems, fmt.Sprintf("%d unexpected results", l.errCount()))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	fmt.Println("OK: no leak, no unexpected result, no process left")
	return nil
}

func start(work, agents string) (*daemon, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	cmd := exec.Command(filepath.Join(work, "sandbox-agent"), "server", "--host", "127.0.0.1", "--port", port,
		"--agents-file", agents, "--log-level", "error", "--stop-grace", "1s",
		"--stdin-write-timeout", "2s", "--stream-write-timeout", "3s")
	cmd.Env = append(os.Environ(), "HOME="+work, "XDG_DATA_HOME="+filepath.Join(work, "data"),
		"SANDBOX_AGENT_ACP_REQUEST_TIMEOUT_MS=3000", "SANDBOX_AGENT_ACP_REGISTRY_URL=http://127.0.0.1:9/registry.json")
	cmd.Dir = work
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &daemon{url: "http://127.0.0.1:" + port, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(d.done) }()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(d.url + "/v1/health"); err == nil {
			resp.Body.Close()
			return d, nil
		}
	}
	return nil, errors.New("daemon did not start")
}

// load drives the daemon and counts what went wrong.
type load struct {
	d    *daemon
	home string
	ops  atomic.Int64
	mu   sync.Mutex
	errs map[string]int
}

func (l *load) fail(what string, detail any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := fmt.Sprintf("%s: %v", what, detail)
	if len(key) > 160 {
		key = key[:160]
	}
	l.errs[key]++
}

func (l *load) errCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, v := range l.errs {
		n += v
	}
	return n
}

func (l *load) errors() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.errs {
		out[k] = v
	}
	return out
}

var client = &http.Client{Timeout: time.Minute}

// post returns the status (or -1 on a transport error) and body.
func (l *load) post(ctx context.Context, path, msg string) (int, []byte) {
	l.ops.Add(1)
	req, _ := http.NewRequestWithContext(ctx, "POST", l.d.url+path, strings.NewReader(msg))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return -1, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// expect posts and records anything but the wanted status, unless the
// load is ending.
func (l *load) expect(ctx context.Context, what, path, msg string, want int) []byte {
	st, b := l.post(ctx, path, msg)
	if st != want && ctx.Err() == nil {
		l.fail(what, fmt.Sprintf("%d %s", st, bytes.TrimSpace(b)))
	}
	return b
}

func (l *load) del(id string) {
	l.ops.Add(1)
	req, _ := http.NewRequest("DELETE", l.d.url+"/v1/acp/"+id, nil)
	resp, err := client.Do(req)
	if err != nil {
		l.fail("DELETE", err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != 204 {
		l.fail("DELETE", resp.StatusCode)
	}
}

func (l *load) servers() []string {
	resp, err := client.Get(l.d.url + "/v1/acp")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var ids []string
	for _, part := range strings.Split(string(b), `"serverId":"`)[1:] {
		id, _, _ := strings.Cut(part, `"`)
		ids = append(ids, id)
	}
	return ids
}

const initMsg = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`

// stream opens GET /v1/acp/{id}; the caller closes the body.
func (l *load) stream(ctx context.Context, id string, after string) (*http.Response, error) {
	l.ops.Add(1)
	req, _ := http.NewRequestWithContext(ctx, "GET", l.d.url+"/v1/acp/"+id, nil)
	req.Header.Set("Accept", "text/event-stream")
	if after != "" {
		req.Header.Set("Last-Event-ID", after)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		return nil, fmt.Errorf("stream status %d", resp.StatusCode)
	}
	return resp, nil
}

// churn spawns an instance, uses it a little and deletes it.
func (l *load) churn(ctx context.Context, w int) {
	for i := 0; ctx.Err() == nil; i++ {
		id := fmt.Sprintf("churn-%d-%d", w, i)
		l.expect(ctx, "churn bootstrap", "/v1/acp/"+id+"?agent=test", initMsg, 200)
		for k := range 5 {
			l.expect(ctx, "churn ping", "/v1/acp/"+id, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, 10+k), 200)
		}
		l.del(id)
	}
}

// sessions keeps one mock instance per worker and streams prompts to a
// subscriber that reconnects with Last-Event-ID now and then.
func (l *load) sessions(ctx context.Context, w int) {
	id := fmt.Sprintf("mock-%d", w)
	l.expect(ctx, "mock bootstrap", "/v1/acp/"+id+"?agent=mock", initMsg, 200)
	b := l.expect(ctx, "session/new", "/v1/acp/"+id, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`, 200)
	_, rest, _ := strings.Cut(string(b), `"sessionId":"`)
	sid, _, _ := strings.Cut(rest, `"`)
	lastID := ""
	for turn := 0; ctx.Err() == nil; turn++ {
		resp, err := l.stream(ctx, id, lastID)
		if err != nil {
			if ctx.Err() == nil {
				l.fail("session stream", err)
			}
			return
		}
		pid := fmt.Sprintf("t%d", turn)
		l.expect(ctx, "prompt", "/v1/acp/"+id, fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"stream 2000"}]}}`, pid, sid), 202)
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				if ctx.Err() == nil {
					l.fail("session stream read", err)
				}
				break
			}
			if strings.HasPrefix(line, "id: ") {
				lastID = strings.TrimSpace(line[4:])
			}
			if strings.Contains(line, `_adapter/replay_gap`) {
				l.fail("session stream", "gap for a reader that keeps up")
			}
			if strings.Contains(line, `"id":"`+pid+`"`) {
				break
			}
		}
		resp.Body.Close()
	}
}

// streamChurn opens streams on a bursting instance and drops them.
func (l *load) streamChurn(ctx context.Context, w int) {
	id := fmt.Sprintf("burst-%d", w)
	l.expect(ctx, "burst bootstrap", "/v1/acp/"+id+"?agent=test", initMsg, 200)
	for ctx.Err() == nil {
		resp, err := l.stream(ctx, id, "")
		if err != nil {
			if ctx.Err() == nil {
				l.fail("burst stream", err)
			}
			return
		}
		l.expect(ctx, "burst", "/v1/acp/"+id, `{"jsonrpc":"2.0","method":"burst","params":{"n":20000}}`, 202)
		r := bufio.NewReader(resp.Body)
		for range 500 {
			if _, err := r.ReadString('\n'); err != nil {
				break
			}
		}
		resp.Body.Close()
		time.Sleep(100 * time.Millisecond)
	}
}

// faults: an agent exiting mid-request, a wedged agent, a late response.
func (l *load) faults(ctx context.Context, w int) {
	big := `{"jsonrpc":"2.0","method":"echo","params":{"pad":"` + strings.Repeat("x", 1<<20) + `"}}`
	for i := 0; ctx.Err() == nil; i++ {
		id := fmt.Sprintf("fault-%d-%d", w, i)
		l.expect(ctx, "fault bootstrap", "/v1/acp/"+id+"?agent=test", initMsg, 200)
		switch i % 3 {
		case 0: // exits while a request waits
			done := make(chan struct{})
			go func() {
				defer close(done)
				st, b := l.post(ctx, "/v1/acp/"+id, `{"jsonrpc":"2.0","id":2,"method":"hang"}`)
				if st != 500 && ctx.Err() == nil {
					l.fail("request pending at exit", fmt.Sprintf("%d %s", st, b))
				}
			}()
			time.Sleep(50 * time.Millisecond)
			l.expect(ctx, "exit", "/v1/acp/"+id, `{"jsonrpc":"2.0","method":"exit","params":{"code":7}}`, 202)
			<-done
		case 1: // stops reading stdin
			l.expect(ctx, "wedge", "/v1/acp/"+id, `{"jsonrpc":"2.0","id":2,"method":"wedge"}`, 504)
			l.expect(ctx, "write to wedged agent", "/v1/acp/"+id, big, 502)
		case 2: // answers after the request timed out
			l.expect(ctx, "late", "/v1/acp/"+id, `{"jsonrpc":"2.0","id":2,"method":"slow","params":{"delayMs":3500}}`, 504)
			time.Sleep(time.Second)
		}
		l.del(id)
	}
}

// files writes, reads and deletes a 1 MiB file.
func (l *load) files(ctx context.Context, w int) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	for i := 0; ctx.Err() == nil; i++ {
		p := url.QueryEscape(filepath.Join(l.home, fmt.Sprintf("files/%d/f%d.bin", w, i%10)))
		req, _ := http.NewRequestWithContext(ctx, "PUT", l.d.url+"/v1/fs/file?path="+p, bytes.NewReader(data))
		l.ops.Add(1)
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				l.fail("PUT", err)
			}
			return
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			l.fail("PUT", resp.StatusCode)
		}
		l.ops.Add(1)
		resp, err = client.Get(l.d.url + "/v1/fs/file?path=" + p)
		if err != nil {
			l.fail("GET", err)
			return
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Equal(got, data) {
			l.fail("GET", "content differs")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// slowReader opens a stream it never reads while the agent bursts.
func (l *load) slowReader(ctx context.Context, w int) {
	for i := 0; ctx.Err() == nil; i++ {
		id := fmt.Sprintf("slow-%d-%d", w, i)
		l.expect(ctx, "slow bootstrap", "/v1/acp/"+id+"?agent=test", initMsg, 200)
		resp, err := l.stream(ctx, id, "")
		if err != nil {
			if ctx.Err() == nil {
				l.fail("slow stream", err)
			}
			return
		}
		l.expect(ctx, "slow burst", "/v1/acp/"+id, `{"jsonrpc":"2.0","method":"burst","params":{"n":200000}}`, 202)
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
		resp.Body.Close()
		l.del(id)
	}
}

type sample struct {
	rss, heap, goroutines, fds, instances, spawns float64
}

func (l *load) sample() sample {
	resp, err := client.Get(l.d.url + "/metrics")
	if err != nil {
		l.fail("metrics", err)
		return sample{}
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, _ := strconv.ParseFloat(line[i+1:], 64)
		m[line[:i]] = v
	}
	return sample{
		rss:        m["process_resident_memory_bytes"],
		heap:       m["go_heap_objects_bytes"],
		goroutines: m["go_goroutines"],
		fds:        m["process_open_fds"],
		instances:  m[`sandbox_agent_instances{state="running"}`] + m[`sandbox_agent_instances{state="exited"}`],
		spawns:     m["sandbox_agent_agent_spawns_total"],
	}
}

// describeFDs lists what the daemon's descriptors point at, for a report.
func describeFDs(pid int) string {
	fds, _ := proc.FDs(pid)
	var out []string
	for _, fd := range fds {
		out = append(out, fd.Num+"→"+fd.Target)
	}
	return strings.Join(out, " ")
}
