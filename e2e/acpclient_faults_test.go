package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// tcpProxy is a loopback TCP proxy whose connections a test can cut and
// whose target it can switch (a daemon restarted on another port).
type tcpProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	target string
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	sent   atomic.Int64 // bytes forwarded from clients to the daemon
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: strings.TrimPrefix(target, "http://"), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *tcpProxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *tcpProxy) setTarget(url string) {
	p.mu.Lock()
	p.target = strings.TrimPrefix(url, "http://")
	p.mu.Unlock()
}

func (p *tcpProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		up, err := net.Dial("tcp", target)
		if err != nil {
			c.Close() // the daemon is down: the client sees a reset
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		pipe := func(dst, src net.Conn, count *atomic.Int64) {
			defer p.wg.Done()
			_, _ = io.Copy(dst, &countingReader{r: src, n: count})
			dst.Close()
			src.Close()
			p.mu.Lock()
			delete(p.conns, dst)
			delete(p.conns, src)
			p.mu.Unlock()
		}
		go pipe(up, c, &p.sent)
		go pipe(c, up, nil)
	}
}

// countingReader adds what it reads to n (when not nil).
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.n != nil {
		c.n.Add(int64(n))
	}
	return n, err
}

// cut closes every open connection (streams and idle keep-alive alike).
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// lineReader reads stdout lines of a bridge or connection with a deadline.
type lineReader struct {
	lines chan string
	err   chan error
}

func newLineReader(r io.Reader) *lineReader { return newLineReaderBuffered(r, 1<<16) }

// newLineReaderBuffered holds at most n lines ahead of the test, so a test
// reading slowly slows the connection down (backpressure) instead of the
// reader soaking everything up.
func newLineReaderBuffered(r io.Reader, n int) *lineReader {
	lr := &lineReader{lines: make(chan string, n), err: make(chan error, 1)}
	go func() {
		br := bufio.NewReaderSize(r, 1<<20)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				lr.err <- err
				close(lr.lines)
				return
			}
			lr.lines <- strings.TrimSuffix(l, "\n")
		}
	}()
	return lr
}

func (lr *lineReader) next(t *testing.T, within time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-lr.lines:
		if !ok {
			t.Fatalf("output ended: %v", <-lr.err)
		}
		return l
	case <-time.After(within):
		t.Fatalf("no output line within %v", within)
		return ""
	}
}

// untilID returns the lines read up to and including the response with
// the given JSON id.
func (lr *lineReader) untilID(t *testing.T, id string, within time.Duration) []string {
	t.Helper()
	var out []string
	deadline := time.Now().Add(within)
	for {
		l := lr.next(t, time.Until(deadline))
		out = append(out, l)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal([]byte(l), &m) == nil && m.Method == "" && string(m.ID) == id {
			return out
		}
	}
}

const (
	newSessionMsg = `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`
)

func promptMsg(id int, session, text string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":%q}]}}`, id, session, text)
}

// openSession initialises and opens a mock session over w/lr; it returns
// the session id.
func openSession(t *testing.T, w io.Writer, lr *lineReader) string {
	t.Helper()
	io.WriteString(w, initMsg+"\n"+newSessionMsg+"\n")
	lr.untilID(t, "1", 20*time.Second)
	lines := lr.untilID(t, "2", 20*time.Second)
	var res struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil || res.Result.SessionID == "" {
		t.Fatalf("session/new answer %q: %v", lines[len(lines)-1], err)
	}
	return res.Result.SessionID
}

// TestBridgeDaemonRestartedMidTurn: the daemon dies during a turn and comes
// back without the instance. The bridge reconnects, finds the instance
// gone, answers the pending prompt with a JSON-RPC error and exits 1
// saying why.
func TestBridgeDaemonRestartedMidTurn(t *testing.T) {
	t.Parallel()
	d1 := harness.Start(t, harness.Options{})
	proxy := startProxy(t, d1.URL)
	b := startBridge(t, &harness.Daemon{URL: proxy.URL()}, "--agent", "mock", "--reconnect-timeout", "20s")
	lr := pendingTurn(t, b, d1)

	_ = d1.Cmd.Process.Kill() // no goodbye: streams are reset, agents die with it
	<-d1.Done()
	d2 := harness.Start(t, harness.Options{})
	proxy.setTarget(d2.URL)

	lines := lr.untilID(t, "3", 30*time.Second)
	last := lines[len(lines)-1]
	if !strings.Contains(last, `"error"`) || !strings.Contains(last, "gone") {
		t.Fatalf("pending prompt answered with %q, want a JSON-RPC error saying the instance is gone", last)
	}
	err := b.wait(t, 10*time.Second)
	if code := exitCode(err); code != 1 {
		t.Fatalf("exit %v, want 1", err)
	}
	if !strings.Contains(b.stderr.String(), "acp server instance is gone") {
		t.Fatalf("stderr lacks a clear message:\n%s", b.stderr.String())
	}
	t.Logf("bridge stderr:\n%s", harness.Tail(b.stderr.String(), 6))
	if s := listServers(t, d2); len(s) != 0 {
		t.Fatalf("the restarted daemon got an instance from the bridge: %+v", s)
	}
}

// TestBridgeDaemonGone: a daemon that does not come back within
// --reconnect-timeout ends the bridge with exit 1, the pending request
// answered with an error.
func TestBridgeDaemonGone(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	proxy := startProxy(t, d.URL)
	b := startBridge(t, &harness.Daemon{URL: proxy.URL()}, "--agent", "mock", "--reconnect-timeout", "1s")
	lr := pendingTurn(t, b, d)
	proxy.setTarget("127.0.0.1:9") // nothing listens there
	proxy.cut()
	start := time.Now()
	lines := lr.untilID(t, "3", 20*time.Second)
	if last := lines[len(lines)-1]; !strings.Contains(last, `"error"`) || !strings.Contains(last, "unreachable") {
		t.Fatalf("pending prompt answered with %q", last)
	}
	if code := exitCode(b.wait(t, 10*time.Second)); code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	if !strings.Contains(b.stderr.String(), "daemon unreachable") {
		t.Fatalf("stderr lacks a clear message:\n%s", b.stderr.String())
	}
	t.Logf("gave up %v after the cut (--reconnect-timeout 1s)", time.Since(start).Round(time.Millisecond))
}

// TestStreamCutMidBurst cuts every connection (the event stream and the
// POST connections) several times during a 5000-update turn, through the
// Go client and through the bridge: every update arrives exactly once, in
// order, then the result.
func TestStreamCutMidBurst(t *testing.T) {
	t.Parallel()
	t.Run("go-client", func(t *testing.T) {
		d := harness.Start(t, harness.Options{})
		proxy := startProxy(t, d.URL)
		c := &httpclient.Client{BaseURL: proxy.URL()}
		var logs harness.LockedBuffer
		conn, err := c.DialACP(context.Background(), "cut", "mock", &httpclient.ACPOptions{DeleteOnClose: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		burstThroughCuts(t, proxy, conn, newLineReaderBuffered(conn, 1))
		// The reader holds the connection back (its queue is bounded), so
		// the first cut, after 1000 of 5000 updates, finds the stream
		// mid-burst. (A later cut may land while the stream is between
		// connections, cutting nothing.)
		if n := strings.Count(logs.String(), "reconnecting"); n < 1 {
			t.Fatalf("no stream reconnect:\n%s", logs.String())
		}
	})
	t.Run("bridge", func(t *testing.T) {
		d := harness.Start(t, harness.Options{})
		proxy := startProxy(t, d.URL)
		b := startBridge(t, &harness.Daemon{URL: proxy.URL()}, "--agent", "mock")
		burstThroughCuts(t, proxy, b.stdin, newLineReaderBuffered(b.stdout, 1))
		if n := strings.Count(b.stderr.String(), "reconnecting"); n < 1 {
			t.Fatal("no stream reconnect")
		}
	})
}

func burstThroughCuts(t *testing.T, proxy *tcpProxy, w io.Writer, lr *lineReader) {
	t.Helper()
	sid := openSession(t, w, lr)
	const n = 5000
	io.WriteString(w, promptMsg(3, sid, "stream "+strconv.Itoa(n))+"\n")
	next := 1
	for {
		l := lr.next(t, 30*time.Second)
		if next == 1000 || next == 2500 || next == 4000 {
			proxy.cut()
		}
		if strings.Contains(l, `"id":3`) && strings.Contains(l, `"result"`) {
			break
		}
		want := fmt.Sprintf(`"text":"mock: chunk %d"`, next)
		if !strings.Contains(l, want) {
			t.Fatalf("update %d: got %.200s", next, l)
		}
		next++
	}
	if next != n+1 {
		t.Fatalf("result after %d updates, want %d", next-1, n)
	}
}

// TestBridgeStdinClosedMidTurn: closing stdin during a turn ends the bridge
// at once with exit 0 and deletes its instance (the agent stops).
func TestBridgeStdinClosedMidTurn(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	b := startBridge(t, d, "--agent", "mock")
	pendingTurn(t, b, d)
	b.stdin.Close()
	if err := b.wait(t, 10*time.Second); err != nil {
		t.Fatalf("exit: %v", err)
	}
	if s := listServers(t, d); len(s) != 0 {
		t.Fatalf("instance left: %+v", s)
	}
}

// TestBridgeByteForByte: unusual but valid JSON (key order, escapes, big
// and odd numbers, non-ASCII) reaches the agent unchanged, and the agent's
// exact bytes reach the bridge's stdout.
func TestBridgeByteForByte(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t)})
	b := startBridge(t, d, "--agent", "test")
	lr := newLineReader(b.stdout)
	odd := `{"params":{"z":1,"a":[1.0,-0.0,1e400,123456789012345678901234567890],"s":"\u00e9\ud83d\ude00 \"q\" \\ \/ \t","é":"😀"  ,"nested":{ "b" : true,"a":null}},"method":"echo","jsonrpc":"2.0"}`
	io.WriteString(b.stdin, odd+"\n")
	if got := lr.next(t, 20*time.Second); got != odd {
		t.Fatalf("echoed notification changed:\n got %s\nwant %s", got, odd)
	}
	req := `{"id":  "h-1" ,"method":"hash","params":{"big":18446744073709551617,"x":"\u0000\u001f","k":{"b":2,"a":1}},"jsonrpc":"2.0"}`
	io.WriteString(b.stdin, req+"\n")
	sum := sha256.Sum256([]byte(req))
	want := `{"jsonrpc":"2.0","id":"h-1","result":{"bytes":` + strconv.Itoa(len(req)) + `,"sha256":"` + hex.EncodeToString(sum[:]) + `"}}`
	if got := lr.next(t, 20*time.Second); got != want {
		t.Fatalf("agent did not receive the request unchanged:\n got %s\nwant %s", got, want)
	}
	b.stdin.Close()
	if err := b.wait(t, 10*time.Second); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// TestBridgeSIGTERM: SIGTERM during a turn is a clean end too: exit 0, the
// owned instance deleted.
func TestBridgeSIGTERM(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	b := startBridge(t, d, "--agent", "mock")
	pendingTurn(t, b, d)
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	if err := b.wait(t, 10*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	if s := listServers(t, d); len(s) != 0 {
		t.Fatalf("instance left: %+v", s)
	}
}

// TestBridgeAgentExits: the agent dying mid-turn ends the bridge like a
// local agent's death would: the pending prompt answered with an error
// (once), exit 1 naming the exit code.
func TestBridgeAgentExits(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	b := startBridge(t, d, "--agent", "mock")
	lr := newLineReader(b.stdout)
	sid := openSession(t, b.stdin, lr)
	io.WriteString(b.stdin, promptMsg(3, sid, "exit 3")+"\n")
	lines := lr.untilID(t, "3", 20*time.Second)
	if last := lines[len(lines)-1]; !strings.Contains(last, `"error"`) {
		t.Fatalf("pending prompt answered with %q", last)
	}
	if code := exitCode(b.wait(t, 10*time.Second)); code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	if !strings.Contains(b.stderr.String(), "agent process exited with code 3") {
		t.Fatalf("stderr lacks the reason:\n%s", b.stderr.String())
	}
	for {
		select {
		case l, ok := <-lr.lines:
			if ok && strings.Contains(l, `"id":3`) {
				t.Fatalf("second answer for the prompt: %s", l)
			}
			if !ok {
				return
			}
		case <-time.After(5 * time.Second):
			t.Fatal("stdout not closed")
		}
	}
}

// TestBridgeLateResponse: a request that outlives the daemon's synchronous
// request timeout still gets the agent's response, once, not a timeout
// error: a local agent has no such timeout.
func TestBridgeLateResponse(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t), Env: []string{"SANDBOX_AGENT_ACP_REQUEST_TIMEOUT_MS=200"}})
	b := startBridge(t, d, "--agent", "test")
	lr := newLineReader(b.stdout)
	io.WriteString(b.stdin, `{"jsonrpc":"2.0","id":"slow","method":"take/time","params":{"delayMs":700}}`+"\n")
	io.WriteString(b.stdin, `{"jsonrpc":"2.0","id":"fast","method":"quick"}`+"\n")
	want := map[string]bool{
		`{"jsonrpc":"2.0","id":"slow","result":{"echoedMethod":"take/time"}}`: true,
		`{"jsonrpc":"2.0","id":"fast","result":{"echoedMethod":"quick"}}`:     true,
	}
	for range 2 {
		if l := lr.next(t, 20*time.Second); !want[l] {
			t.Fatalf("unexpected line %s", l)
		} else {
			delete(want, l)
		}
	}
	b.stdin.Close()
	if err := b.wait(t, 10*time.Second); err != nil {
		t.Fatalf("exit: %v", err)
	}
	if l, ok := <-lr.lines; ok {
		t.Fatalf("extra line: %s", l)
	}
}

// TestBridgeToken: the bridge reads its token from --token-file (or
// SANDBOX_AGENT_TOKEN); without one it exits 1 saying the daemon refused it.
func TestBridgeToken(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: []string{"--token", "s3cret"}})
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, d, "--agent", "mock", "--token-file", tokenFile)
	lr := newLineReader(b.stdout)
	openSession(t, b.stdin, lr)
	b.stdin.Close()
	if err := b.wait(t, 10*time.Second); err != nil {
		t.Fatalf("exit: %v", err)
	}

	cmd := exec.Command(harness.Binary, "acp", "--endpoint", d.URL, "--agent", "mock")
	cmd.Env = append(os.Environ(), "SANDBOX_AGENT_TOKEN=wrong")
	cmd.Stdin = strings.NewReader(initMsg + "\n")
	out, err := cmd.CombinedOutput()
	if exitCode(err) != 1 || !strings.Contains(string(out), "401") {
		t.Fatalf("wrong token: %v\n%s", err, out)
	}
}

// TestBridgeStartsBeforeDaemon: an editor may spawn the bridge before the
// sandbox's daemon listens; it waits (up to --reconnect-timeout) instead of
// failing at once.
func TestBridgeStartsBeforeDaemon(t *testing.T) {
	t.Parallel()
	proxy := startProxy(t, "127.0.0.1:9") // nothing listens yet
	b := startBridge(t, &harness.Daemon{URL: proxy.URL()}, "--agent", "mock", "--reconnect-timeout", "20s")
	io.WriteString(b.stdin, initMsg+"\n")
	d := harness.Start(t, harness.Options{})
	proxy.setTarget(d.URL)
	lr := newLineReader(b.stdout)
	if l := lr.next(t, 20*time.Second); !strings.HasPrefix(l, `{"jsonrpc":"2.0","id":1,"result":`) {
		t.Fatalf("initialize answer: %s", l)
	}
	b.stdin.Close()
	if err := b.wait(t, 10*time.Second); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// pendingTurn opens a session through the bridge, sends prompt 3 with a
// turn that lasts a minute, and waits until daemon d holds it pending. It
// returns the reader of the bridge's stdout.
func pendingTurn(t *testing.T, b *bridge, d *harness.Daemon) *lineReader {
	t.Helper()
	lr := newLineReader(b.stdout)
	sid := openSession(t, b.stdin, lr)
	io.WriteString(b.stdin, promptMsg(3, sid, "slow 60000")+"\n")
	harness.Eventually(t, 20*time.Second, "the prompt is pending", func() bool { s := listServers(t, d); return len(s) == 1 && s[0].PendingRequests == 1 })
	return lr
}
