package harness

import (
	"bytes"
	"encoding/json"
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

// Daemon is one running sandbox-agent server, owned by the test that
// started it: the test's cleanup stops it, and its failures show its logs.
type Daemon struct {
	// Cmd is the server process, for tests that signal or measure it.
	Cmd  *exec.Cmd
	URL  string // http://127.0.0.1:port, as the daemon announced it
	Home string // HOME and XDG_DATA_HOME root of this daemon

	t    testing.TB
	logs *LockedBuffer
	done chan struct{}
}

// LockedBuffer is a bytes.Buffer safe for a process's output to be written
// from exec's copying goroutines while a test reads it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// WithTestAgent returns server flags defining the operator agent "test"
// (e2e/testagent) in an agents file under the test's temp dir, then extra.
func WithTestAgent(t testing.TB, extra ...string) []string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "agents.json")
	doc := `{"agents":[{"id":"test","command":"` + TestAgent + `"}]}`
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return append([]string{"--agents-file", f}, extra...)
}

// Options tune Start.
type Options struct {
	Args []string // extra server flags
	Env  []string // extra environment
	Home string   // reuse a home directory (default: a fresh temp dir)
	// Binary runs another copy of sandbox-agent (default: Binary).
	Binary string
	// Cgroup, when set, runs the daemon in that memory cgroup from its
	// first instruction (it joins before it execs), agents included.
	Cgroup *MemoryCgroup
	// Prlimit, when set, runs the daemon under prlimit(1) with these
	// limits ("--nofile=64:64", "--nproc=60:60"), in force from its first
	// instruction; a test is skipped where prlimit is missing. Not with
	// Cgroup.
	Prlimit []string
	// Credential, when set, runs the daemon as that user (a root test
	// making an unprivileged daemon; Home must be theirs, Binary one they
	// may run).
	Credential *syscall.Credential
}

// listeningURL finds the address the daemon announces once it has bound
// its port ("sandbox-agent listening" with url=..., in the text or JSON
// log format).
var listeningURL = regexp.MustCompile(`sandbox-agent listening.*?(?:url=|"url":")(http://[^\s"]+)`)

// Start runs the binary on a loopback port the kernel picks (--port 0, so
// no other process can take it between choosing and binding), reads the
// bound address from the daemon's announcement and waits for health. It
// is stopped with SIGTERM at cleanup; its logs are shown on failure.
func Start(t testing.TB, o Options) *Daemon {
	t.Helper()
	watchSources()
	home := o.Home
	if home == "" {
		home = t.TempDir()
	}
	args := append([]string{"server", "--host", "127.0.0.1", "--port", "0", "--log-format", "text", "--log-level", "debug"}, o.Args...)
	bin := Binary
	if o.Binary != "" {
		bin = o.Binary
	}
	cmd := exec.Command(bin, args...)
	if o.Cgroup != nil {
		// The shell joins the cgroup, then becomes the daemon (same pid).
		cmd = exec.Command("/bin/sh", append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, o.Cgroup.Dir, bin}, args...)...)
	}
	if len(o.Prlimit) > 0 {
		if o.Cgroup != nil {
			t.Fatal("harness: Prlimit and Cgroup together are not supported")
		}
		prlimit, err := exec.LookPath("prlimit")
		if err != nil {
			t.Skip("no prlimit(1) to start the daemon with low limits")
		}
		// prlimit sets the limits, then execs the daemon (same pid).
		cmd = exec.Command(prlimit, append(append(append([]string{}, o.Prlimit...), "--", bin), args...)...)
	}
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, ".local", "share"))
	// Tests never reach the public ACP registry: unless a test points it at
	// its own local server, the registry is a closed loopback port.
	cmd.Env = append(cmd.Env, "SANDBOX_AGENT_ACP_REGISTRY_URL=http://127.0.0.1:9/registry.json")
	cmd.Env = append(cmd.Env, o.Env...)
	cmd.Dir = home
	// If the test binary dies (a go test timeout), the daemon shuts down
	// cleanly instead of living on as an orphan with its agents.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Credential: o.Credential}
	d := &Daemon{t: t, Cmd: cmd, Home: home, logs: &LockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = d.logs, d.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		d.Stop()
		if t.Failed() {
			t.Logf("daemon logs:\n%s", Tail(d.logs.String(), 200))
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

// T is the test that owns the daemon, for helpers of a test file that
// fail it from a request they send.
func (d *Daemon) T() testing.TB { return d.t }

// Logs is everything the daemon has written to stdout and stderr so far.
func (d *Daemon) Logs() string { return d.logs.String() }

// Done is closed once the daemon's process has exited and been reaped.
func (d *Daemon) Done() <-chan struct{} { return d.done }

// Stop sends SIGTERM and waits (bounded) for the daemon to exit.
func (d *Daemon) Stop() {
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		d.t.Errorf("daemon did not exit within 10 s of SIGTERM")
		_ = d.Cmd.Process.Kill()
		<-d.done
	}
}

// Tail is the last lines of s, so a failure shows the end of a long log.
func Tail(s string, lines int) string {
	parts := strings.Split(s, "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// Do sends a request (headers as name, value pairs) and returns status,
// headers and body; a transport error fails the test.
func (d *Daemon) Do(method, path string, body []byte, headers ...string) (int, http.Header, []byte) {
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

// Post sends one JSON-RPC message to path (/v1/acp/{id}...).
func (d *Daemon) Post(path string, msg string) (int, []byte) {
	d.t.Helper()
	st, _, b := d.Do(http.MethodPost, path, []byte(msg), "Content-Type", "application/json")
	return st, b
}

// JSONDo sends body as JSON and decodes a 2xx answer into out; it returns
// the status and the raw body.
func (d *Daemon) JSONDo(method, path string, body any, out any) (int, []byte) {
	d.t.Helper()
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			d.t.Fatal(err)
		}
	}
	st, _, resp := d.Do(method, path, b, "Content-Type", "application/json")
	if out != nil && st/100 == 2 {
		if err := json.Unmarshal(resp, out); err != nil {
			d.t.Fatalf("%s %s: %v: %s", method, path, err, resp)
		}
	}
	return st, resp
}

// Metrics scrapes /metrics into series (name plus labels, as written) →
// value.
func (d *Daemon) Metrics() map[string]float64 {
	d.t.Helper()
	st, _, b := d.Do("GET", "/metrics", nil)
	if st != 200 {
		d.t.Fatalf("GET /metrics: %d %s", st, b)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			d.t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// MetricSum adds every series of a family whose labels contain all of
// the given label pairs (`code="0"`, ...).
func MetricSum(m map[string]float64, family string, labels ...string) float64 {
	var sum float64
next:
	for k, v := range m {
		if k != family && !strings.HasPrefix(k, family+"{") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(k, l) {
				continue next
			}
		}
		sum += v
	}
	return sum
}

// ServerInfo is one entry of GET /v1/acp.
type ServerInfo struct {
	ServerID        string `json:"serverId"`
	Agent           string `json:"agent"`
	PID             int    `json:"pid"`
	State           string `json:"state"`
	ExitCode        *int   `json:"exitCode"`
	PendingRequests int    `json:"pendingRequests"`
	Subscribers     int    `json:"subscribers"`
	LastEventID     uint64 `json:"lastEventId"`
	BufferedEvents  int    `json:"bufferedEvents"`
	CreatedAtMs     int64  `json:"createdAtMs"`
}

// Servers lists the daemon's ACP server instances.
func (d *Daemon) Servers() []ServerInfo {
	d.t.Helper()
	st, _, b := d.Do("GET", "/v1/acp", nil)
	if st != 200 {
		d.t.Fatalf("GET /v1/acp: %d %s", st, b)
	}
	var doc struct{ Servers []ServerInfo }
	if err := json.Unmarshal(b, &doc); err != nil {
		d.t.Fatal(err)
	}
	return doc.Servers
}

// Server is the listing of instance id; the test fails if it is not listed.
func (d *Daemon) Server(id string) ServerInfo {
	d.t.Helper()
	for _, s := range d.Servers() {
		if s.ServerID == id {
			return s
		}
	}
	d.t.Fatalf("server %q not listed", id)
	return ServerInfo{}
}

// WaitUntil polls cond every 20 ms for up to limit and says whether it
// held. Tests poll what only the daemon's clock decides (an exit, a
// timeout, a sweep); they cannot be told.
func WaitUntil(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// Eventually is WaitUntil failing the test, naming what did not happen.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	if !WaitUntil(limit, cond) {
		t.Fatalf("%s: not within %v", what, limit)
	}
}
