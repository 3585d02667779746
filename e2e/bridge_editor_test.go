package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// The tests in this file run "sandbox-agent acp" as an editor (Zed, an
// ACP extension) runs it, and do to it what an editor does when it is done
// with an agent, or when it goes away: close its stdin while the daemon is
// still being reached or a first request is still waiting, close its
// stderr or its stdout, signal it; and pass it what an editor may pass
// through: invalid UTF-8 and very long lines.

// hungPeer listens on 127.0.0.1, accepts every connection and never
// answers (what a stopped daemon, or a dead peer behind a proxy, looks
// like); it reads what is sent, so requests are written whole. seen gets
// a value each time a request has begun to arrive.
func hungPeer(t *testing.T) (url string, seen <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{}, 100)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() {
				if _, err := c.Read(make([]byte, 1)); err == nil {
					got <- struct{}{}
				}
				io.Copy(io.Discard, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String(), got
}

// TestBridgeStdinClosedBeforeConnected: an editor that closes stdin while
// the bridge is still reaching the daemon (one that never answers, or that
// does not listen) gets a prompt exit 0: nothing was sent, nothing was
// created. Before, the bridge read nothing until it had connected, so it
// stayed until the daemon answered (never) or --reconnect-timeout passed.
func TestBridgeStdinClosedBeforeConnected(t *testing.T) {
	t.Parallel()
	hung, _ := hungPeer(t)
	for _, tc := range []struct{ name, url string }{
		{"never answers", hung},
		{"not listening", "http://127.0.0.1:9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBridge(t, &harness.Daemon{URL: tc.url}, "--agent", "mock", "--reconnect-timeout", "5m")
			b.stdin.Close()
			if err := b.wait(t, 10*time.Second); err != nil {
				t.Fatalf("exit: %v", err)
			}
		})
	}
}

// fakeDaemon is an HTTP server standing in for a daemon whose first ACP
// POST never gets an answer (an agent still starting, a daemon wedged).
// It records the DELETEs it gets.
type stuckDaemon struct {
	*httptest.Server
	posted  chan struct{}
	mu      sync.Mutex
	deletes []string
}

func startStuckDaemon(t *testing.T) *stuckDaemon {
	d := &stuckDaemon{posted: make(chan struct{}, 10)}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/acp":
			io.WriteString(w, `{"servers":[]}`)
		case r.Method == http.MethodPost:
			io.Copy(io.Discard, r.Body)
			d.posted <- struct{}{}
			<-r.Context().Done()
		case r.Method == http.MethodDelete:
			d.mu.Lock()
			d.deletes = append(d.deletes, r.URL.Path)
			d.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(d.Close)
	return d
}

// TestBridgeStdinClosedDuringFirstRequest: the editor sent initialize,
// which the daemon has not answered, and closes stdin. The bridge exits 0
// within its documented finish (10 s for answers, 2 s for the POST in
// flight) and deletes the instance the POST may have created. Before, the
// bridge did not read stdin while the first request waited, so it stayed
// as long as the request did.
func TestBridgeStdinClosedDuringFirstRequest(t *testing.T) {
	t.Parallel()
	d := startStuckDaemon(t)
	b := startBridge(t, &harness.Daemon{URL: d.URL}, "--agent", "mock")
	io.WriteString(b.stdin, initMsg+"\n")
	select {
	case <-d.posted:
	case <-time.After(20 * time.Second):
		t.Fatal("initialize was not posted")
	}
	start := time.Now()
	b.stdin.Close()
	if err := b.wait(t, 30*time.Second); err != nil {
		t.Fatalf("exit: %v", err)
	}
	t.Logf("exited %v after stdin closed", time.Since(start).Round(time.Millisecond))
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.deletes) != 1 || !strings.HasPrefix(d.deletes[0], "/v1/acp/acp-") {
		t.Fatalf("DELETEs: %q", d.deletes)
	}
}

// startBridgeStdio starts the bridge with stdin, stdout and stderr pipes
// the test holds (startBridge copies stderr into a buffer instead).
func startBridgeStdio(t *testing.T, url string, extra ...string) (cmd *exec.Cmd, stdin io.WriteCloser, stdout, stderr io.ReadCloser, done chan error) {
	t.Helper()
	cmd = exec.Command(harness.Binary, append([]string{"acp", "--endpoint", url, "--log-level", "debug"}, extra...)...)
	var err error
	if stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if stdout, err = cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	if stderr, err = cmd.StderrPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done = make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		done <- nil
	})
	return cmd, stdin, stdout, stderr, done
}

func waitExit(t *testing.T, done chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		done <- err
		return err
	case <-time.After(within):
		t.Fatalf("the bridge did not exit within %v", within)
		return nil
	}
}

// TestBridgeStderrClosed: an editor that closes the bridge's stderr (it
// stopped reading logs) does not kill it: the next log line would raise
// SIGPIPE, which ends a Go program writing to its stdout or stderr. The
// session goes on, a malformed line (which is logged) is still answered,
// and closing stdin still ends it cleanly, its instance deleted.
func TestBridgeStderrClosed(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	_, stdin, stdout, stderr, done := startBridgeStdio(t, d.URL, "--agent", "mock")
	stderr.Close()
	lr := newLineReader(stdout)
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":7,"method":`+"\n") // logged as a warning
	if l := lr.next(t, 20*time.Second); !strings.Contains(l, `"code":-32700`) {
		t.Fatalf("malformed line answered %s", l)
	}
	openSession(t, stdin, lr)
	stdin.Close()
	if err := waitExit(t, done, 15*time.Second); err != nil {
		t.Fatalf("exit: %v", err)
	}
	if s := listServers(t, d); len(s) != 0 {
		t.Fatalf("instance left: %+v", s)
	}
}

// TestBridgeStdoutClosed: an editor that closes the bridge's stdout is
// gone: the bridge sees it at its next write (the agent's next message),
// exits 0 at once (there is no one left to finish for), and deletes its
// instance.
func TestBridgeStdoutClosed(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	b := startBridge(t, d, "--agent", "mock")
	lr := newLineReader(b.stdout)
	sid := openSession(t, b.stdin, lr)
	b.stdout.(io.Closer).Close()
	io.WriteString(b.stdin, promptMsg(3, sid, "stream 200")+"\n")
	if err := b.wait(t, 15*time.Second); err != nil {
		t.Fatalf("exit: %v\n%s", err, b.stderr.String())
	}
	if !strings.Contains(b.stderr.String(), "stdout closed by the client") {
		t.Fatalf("stderr:\n%s", b.stderr.String())
	}
	if s := listServers(t, d); len(s) != 0 {
		t.Fatalf("instance left: %+v", s)
	}
}

// TestBridgeSignals: SIGTERM and SIGINT (an editor's stop, a Ctrl-C in a
// terminal) mid-turn are clean ends: exit 0, the owned instance deleted.
func TestBridgeSignals(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			d := harness.Start(t, harness.Options{})
			b := startBridge(t, d, "--agent", "mock")
			pendingTurn(t, b, d)
			_ = b.cmd.Process.Signal(sig)
			if err := b.wait(t, 10*time.Second); err != nil {
				t.Fatalf("exit after %v: %v", sig, err)
			}
			if s := listServers(t, d); len(s) != 0 {
				t.Fatalf("instance left: %+v", s)
			}
		})
	}
}

// TestBridgeInvalidUTF8AndLongLines: bytes that are not UTF-8 inside JSON
// strings go through the bridge unchanged both ways (JSON text must be
// UTF-8, but neither the bridge nor the daemon rewrites what it relays;
// the agent decides), a line whose invalid bytes are outside any string is
// not JSON and is answered -32700, and a 40 MiB line from the agent
// reaches stdout whole.
func TestBridgeInvalidUTF8AndLongLines(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t)})
	b := startBridge(t, d, "--agent", "test")
	lr := newLineReader(b.stdout)
	echo := "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":{\"s\":\"a\xffb\xc3\xed\xa0\x80z\"}}"
	io.WriteString(b.stdin, echo+"\n")
	if got := lr.next(t, 20*time.Second); got != echo {
		t.Fatalf("echo came back as %q", got)
	}
	req := "{\"jsonrpc\":\"2.0\",\"id\":\"h\",\"method\":\"hash\",\"params\":{\"s\":\"\xfe\xff\"}}"
	io.WriteString(b.stdin, req+"\n")
	sum := sha256.Sum256([]byte(req))
	if got := lr.next(t, 20*time.Second); !strings.Contains(got, hex.EncodeToString(sum[:])) {
		t.Fatalf("the agent did not get the bytes sent: %s", got)
	}
	io.WriteString(b.stdin, `{"jsonrpc":"2.0","id":"bad","method":"badutf8"}`+"\n")
	lines := lr.untilID(t, `"bad"`, 20*time.Second)
	if len(lines) != 2 || !strings.Contains(lines[0], "a\xffb\xc3") {
		t.Fatalf("the agent's invalid UTF-8 changed: %q", lines)
	}
	io.WriteString(b.stdin, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"x\"}\xff\n")
	if got := lr.next(t, 20*time.Second); !strings.Contains(got, `"code":-32700`) {
		t.Fatalf("bytes outside a string answered %s", got)
	}
	const n = 40 << 20
	io.WriteString(b.stdin, `{"jsonrpc":"2.0","method":"bigline","params":{"n":`+strconv.Itoa(n)+`}}`+"\n")
	if got := lr.next(t, 60*time.Second); len(got) < n || !strings.HasPrefix(got, `{"jsonrpc":"2.0","method":"big"`) {
		t.Fatalf("a %d-byte line from the agent arrived as %d bytes: %.100s", n, len(got), got)
	}
	b.stdin.Close()
	if err := b.wait(t, 15*time.Second); err != nil {
		t.Fatalf("exit: %v", err)
	}
}
