package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary is the sandbox-agent built once for the whole package; testAgent
// is e2e/testagent, a stdio peer with failure modes the mock lacks.
var binary, testAgent string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sandbox-agent-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "sandbox-agent")
	testAgent = filepath.Join(dir, "testagent")
	build := exec.Command("go", "build", "-o", dir, "../cmd/sandbox-agent", "./testagent")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building sandbox-agent:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// daemon is one running sandbox-agent server.
type daemon struct {
	t    testing.TB
	cmd  *exec.Cmd
	URL  string
	Home string // HOME and XDG_DATA_HOME root of this daemon
	logs *lockedBuffer
	done chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// withTestAgent returns server flags defining the operator agent "test"
// (e2e/testagent) in an agents file under dir.
func withTestAgent(t testing.TB, extra ...string) []string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "agents.json")
	doc := `{"agents":[{"id":"test","command":"` + testAgent + `"}]}`
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return append([]string{"--agents-file", f}, extra...)
}

// daemonOpts tune startDaemon.
type daemonOpts struct {
	Args []string // extra server flags
	Env  []string // extra environment
	Home string   // reuse a home directory (default: a fresh temp dir)
	// Binary runs another copy of sandbox-agent (default: the one built
	// for the package).
	Binary string
}

// listeningURL finds the address the daemon announces once it has bound
// its port ("sandbox-agent listening" with url=..., in the text or JSON
// log format).
var listeningURL = regexp.MustCompile(`sandbox-agent listening.*?(?:url=|"url":")(http://[^\s"]+)`)

// startDaemon runs the binary on a loopback port the kernel picks (--port
// 0, so no other process can take it between choosing and binding), reads
// the bound address from the daemon's announcement and waits for health.
// It is stopped with SIGTERM at cleanup; its logs are shown on failure.
func startDaemon(t testing.TB, o daemonOpts) *daemon {
	t.Helper()
	home := o.Home
	if home == "" {
		home = t.TempDir()
	}
	args := append([]string{"server", "--host", "127.0.0.1", "--port", "0", "--log-format", "text", "--log-level", "debug"}, o.Args...)
	bin := binary
	if o.Binary != "" {
		bin = o.Binary
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, ".local", "share"))
	// Tests never reach the public ACP registry: unless a test points it at
	// its own local server, the registry is a closed loopback port.
	cmd.Env = append(cmd.Env, "SANDBOX_AGENT_ACP_REGISTRY_URL=http://127.0.0.1:9/registry.json")
	cmd.Env = append(cmd.Env, o.Env...)
	cmd.Dir = home
	// If the test binary dies (a go test timeout), the daemon shuts down
	// cleanly instead of living on as an orphan with its agents.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	d := &daemon{t: t, cmd: cmd, Home: home, logs: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = d.logs, d.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("daemon logs:\n%s", tail(d.logs.String(), 200))
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if d.URL == "" {
			if m := listeningURL.FindStringSubmatch(d.logs.String()); m != nil {
				d.URL = m[1]
			}
		}
		if d.URL == "" {
			select {
			case <-d.done:
				t.Fatalf("daemon exited at start:\n%s", d.logs.String())
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		resp, err := http.Get(d.URL + "/")
		if err == nil {
			resp.Body.Close()
			return d
		}
		select {
		case <-d.done:
			t.Fatalf("daemon exited at start:\n%s", d.logs.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("daemon did not start:\n%s", d.logs.String())
	return nil
}

// stop sends SIGTERM and waits (bounded) for the daemon to exit.
func (d *daemon) stop() {
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		d.t.Errorf("daemon did not exit within 10 s of SIGTERM")
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

func tail(s string, lines int) string {
	parts := strings.Split(s, "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// do sends a request and returns status, headers and body.
func (d *daemon) do(method, path string, body []byte, headers ...string) (int, http.Header, []byte) {
	d.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, d.URL+path, rd)
	if err != nil {
		d.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		d.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header, b
}

// post sends one JSON-RPC message to /v1/acp/{id}.
func (d *daemon) post(path string, msg string) (int, []byte) {
	d.t.Helper()
	st, _, b := d.do(http.MethodPost, path, []byte(msg), "Content-Type", "application/json")
	return st, b
}

// sseEvent is one parsed SSE frame.
type sseEvent struct {
	ID   string // empty for frames without id (gap frames)
	Data string
}

// sseStream reads events from GET /v1/acp/{id}.
type sseStream struct {
	resp   *http.Response
	r      *bufio.Reader
	cancel context.CancelFunc
}

func (d *daemon) stream(path string, headers ...string) *sseStream {
	d.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.URL+path, nil)
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		d.t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		d.t.Fatalf("GET %s: status %d: %s", path, resp.StatusCode, b)
	}
	s := &sseStream{resp: resp, r: bufio.NewReaderSize(resp.Body, 1<<20), cancel: cancel}
	d.t.Cleanup(s.Close)
	return s
}

func (s *sseStream) Close() {
	s.cancel()
	s.resp.Body.Close()
}

// next returns the next event, skipping comments; io.EOF when the stream ends.
func (s *sseStream) next() (sseEvent, error) {
	var ev sseEvent
	var data []string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if data != nil {
				ev.Data = strings.Join(data, "\n")
				return ev, nil
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			ev.ID = line[4:]
		case strings.HasPrefix(line, "data: "):
			data = append(data, line[6:])
		}
	}
}

// seqChecker follows a reader's position through the frames of one ACP
// stream and says when an event was lost. An event must be the one right
// after the position. A gap frame (no id) must start at the position
// (lastEventId) and moves it to just before oldestAvailable. Two gap frames
// in a row are legitimate and contiguous: the reader fell behind the buffer
// again before it read the event the first one pointed to, so the second
// starts where the first ended (the position is then oldestAvailable-1 of
// the first, not the id of the last event read).
type seqChecker struct {
	pos        uint64 // id of the last event read, or where the last gap ended
	gaps       int
	backToBack int  // gap frames right after another gap frame
	afterGap   bool // the last frame was a gap
}

// frame checks one frame and advances the position.
func (c *seqChecker) frame(ev sseEvent) error {
	if ev.ID == "" {
		var g struct {
			Method string
			Params struct {
				LastEventID     uint64 `json:"lastEventId"`
				OldestAvailable uint64 `json:"oldestAvailable"`
			}
		}
		if err := json.Unmarshal([]byte(ev.Data), &g); err != nil || g.Method != "_adapter/replay_gap" {
			return fmt.Errorf("frame without id is not a gap: %.200s", ev.Data)
		}
		if g.Params.LastEventID != c.pos {
			return fmt.Errorf("gap says last %d, reader was at %d", g.Params.LastEventID, c.pos)
		}
		if g.Params.OldestAvailable <= g.Params.LastEventID+1 {
			return fmt.Errorf("gap from %d to %d loses nothing", g.Params.LastEventID, g.Params.OldestAvailable)
		}
		c.pos = g.Params.OldestAvailable - 1
		c.gaps++
		if c.afterGap {
			c.backToBack++
		}
		c.afterGap = true
		return nil
	}
	id, err := strconv.ParseUint(ev.ID, 10, 64)
	if err != nil {
		return fmt.Errorf("bad id %q", ev.ID)
	}
	if id != c.pos+1 {
		return fmt.Errorf("silent skip from %d to %d", c.pos, id)
	}
	c.pos = id
	c.afterGap = false
	return nil
}

// nextWithin is next with a deadline, failing the test on timeout.
func (s *sseStream) nextWithin(t testing.TB, d time.Duration) sseEvent {
	t.Helper()
	type res struct {
		ev  sseEvent
		err error
	}
	ch := make(chan res, 1)
	go func() { ev, err := s.next(); ch <- res{ev, err} }()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("stream ended: %v", r.err)
		}
		return r.ev
	case <-time.After(d):
		s.Close()
		t.Fatalf("no event within %v", d)
	}
	return sseEvent{}
}
