package httpclient_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// TestProblems: what a caller gets for each problem of a real daemon: a
// *Problem (errors.As) with the status, the kind, the daemon's own message
// in Detail and Error(), and for 429 and 503 the Retry-After; never a
// context error, even for the daemon's own 504 timeout. A context that
// ends, on the other hand, is the context's error (errors.Is), never a
// *Problem.
func TestProblems(t *testing.T) {
	home := t.TempDir()
	tokenFile := filepath.Join(home, "tokens")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url, stop, err := startDaemon(home, []string{
		"--token-file", tokenFile, "--max-acp-body", "4096", "--max-instances", "1", "--max-conns", "6", "--async-methods=",
	}, []string{"SANDBOX_AGENT_ACP_REQUEST_TIMEOUT_MS=300"})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &httpclient.Client{BaseURL: url, Token: "tok", HTTP: &http.Client{Transport: tr}}
	ctx := context.Background()

	// Setup: a running process, and the one instance allowed, with a session.
	sleeper, err := c.CreateProcess(ctx, httpclient.ProcessCreateRequest{Command: "sleep", Args: []string{"60"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.KillProcess(ctx, sleeper.ID, 0)
	if _, err := c.PostACP(ctx, "a", "mock", []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)); err != nil {
		t.Fatal(err)
	}
	b, err := c.PostACP(ctx, "a", "", []byte(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`))
	_, rest, _ := strings.Cut(string(b), `"sessionId":"`)
	sid, _, _ := strings.Cut(rest, `"`)
	if err != nil || sid == "" {
		t.Fatalf("session/new: %s %v", b, err)
	}

	t.Run("context", func(t *testing.T) {
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		_, err := c.ListAgents(cancelled, false, false)
		var p *httpclient.Problem
		if !errors.Is(err, context.Canceled) || errors.As(err, &p) {
			t.Fatalf("cancelled context: %v", err)
		}
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err = c.PostACP(short, "a", "", []byte(`{"jsonrpc":"2.0","id":10,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"slow 2000"}]}}`))
		if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &p) {
			t.Fatalf("deadline before the daemon's 504: %v", err)
		}
	})

	// The problems; the 503 last, since the connections it holds free
	// their slots only once the daemon has seen them closed.
	for _, tc := range []struct {
		name       string
		call       func() error
		status     int
		kind       string
		says       string // in Detail and Error()
		retryAfter time.Duration
	}{
		{"401 no token", func() error {
			_, err := (&httpclient.Client{BaseURL: url, HTTP: c.HTTP}).ListAgents(ctx, false, false)
			return err
		}, 401, "token_invalid", "token invalid", 0},
		{"403 a secret", func() error { _, err := c.ReadFile(ctx, tokenFile); return err }, 403, "permission_denied", "permission denied", 0},
		{"404 no such file", func() error { _, err := c.FSStat(ctx, "no/such/file"); return err }, 404, "not_found", "not found", 0},
		{"404 no such instance", func() error { _, err := c.ACPStderr(ctx, "nope"); return err }, 404, "session_not_found", "session not found: nope", 0},
		{"409 a running process", func() error { return c.DeleteProcess(ctx, sleeper.ID) }, 409, "conflict", "conflict", 0},
		{"413 over --max-acp-body", func() error {
			_, err := c.PostACP(ctx, "a", "", []byte(`{"jsonrpc":"2.0","method":"x","params":{"p":"`+strings.Repeat("x", 5000)+`"}}`))
			return err
		}, 413, "payload_too_large", "payload too large", 0},
		{"429 over --max-instances", func() error {
			_, err := c.PostACP(ctx, "b", "mock", []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`))
			return err
		}, 429, "too_many_instances", "too many instances", 5 * time.Second},
		{"504 the agent too slow", func() error {
			_, err := c.PostACP(ctx, "a", "", []byte(`{"jsonrpc":"2.0","id":9,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"slow 2000"}]}}`))
			return err
		}, 504, "timeout", "timeout", 0},
		{"503 over --max-conns", func() error {
			// Hold every connection the daemon allows, then ask on a
			// new one.
			var held []net.Conn
			defer func() {
				for _, h := range held {
					h.Close()
				}
			}()
			// Each is proven admitted by a 200: a connection closed just
			// before may hold its slot a moment longer, and one refused
			// meanwhile is dialled again.
			tr.CloseIdleConnections()
			for deadline := time.Now().Add(10 * time.Second); len(held) < 6; {
				if time.Now().After(deadline) {
					return fmt.Errorf("only %d connections admitted in 10 s", len(held))
				}
				h, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
				if err != nil {
					return err
				}
				fmt.Fprintf(h, "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok\r\n\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(h), nil)
				if err != nil || resp.StatusCode != http.StatusOK {
					h.Close()
					continue
				}
				io.Copy(io.Discard, resp.Body)
				held = append(held, h)
			}
			return c.Health(ctx)
		}, 503, "overloaded", "overloaded", time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var p *httpclient.Problem
			switch {
			case !errors.As(err, &p):
				t.Fatalf("err = %v (%T), want a *Problem", err, err)
			case p.Status != tc.status || p.Kind() != tc.kind:
				t.Fatalf("status %d kind %q, want %d %q (%v)", p.Status, p.Kind(), tc.status, tc.kind, err)
			case !strings.Contains(p.Detail, tc.says) || !strings.Contains(err.Error(), p.Detail):
				t.Fatalf("detail %q, error %q: the daemon's message %q is not there", p.Detail, err, tc.says)
			case p.RetryAfter != tc.retryAfter:
				t.Fatalf("RetryAfter %v, want %v", p.RetryAfter, tc.retryAfter)
			case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
				t.Fatalf("a daemon's problem reads as a context error: %v", err)
			}
			t.Logf("%v", err)
		})
	}

}

// hungPeer listens on 127.0.0.1, accepts every connection, reads what it
// is sent and never answers. seen gets a value each time a request has
// begun to arrive on a connection.
func hungPeer(t *testing.T) (url string, seen <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{}, 100)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				b := make([]byte, 1)
				if _, err := c.Read(b); err == nil {
					got <- struct{}{}
				}
				io.Copy(io.Discard, c)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + ln.Addr().String(), got
}

// TestCallsEndWithTheirContext: against a daemon that takes the
// connection and never answers, every blocking call returns once its
// context ends, with the context's error (not a *Problem), and leaves no
// goroutine behind; DialACP, whose context bounds only the dial, also
// gives up on its own after ReconnectTimeout (ErrDaemonUnreachable).
func TestCallsEndWithTheirContext(t *testing.T) {
	base := runtime.NumGoroutine()
	url, seen := hungPeer(t)
	tr := &http.Transport{}
	c := &httpclient.Client{BaseURL: url, HTTP: &http.Client{Transport: tr}}
	pr, pw := io.Pipe() // a body that never ends
	defer pw.Close()
	noop := func(httpclient.ProcessLogEvent) error { return nil }
	for _, tc := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Health", func(ctx context.Context) error { return c.Health(ctx) }},
		{"InstallAgentWithProgress", func(ctx context.Context) error {
			_, err := c.InstallAgentWithProgress(ctx, "mock", domain.InstallOptions{}, time.Millisecond, func(httpclient.InstallProgress) {})
			return err
		}},
		{"OpenFile", func(ctx context.Context) error { _, err := c.OpenFile(ctx, "f", 0, -1); return err }},
		{"WriteFile", func(ctx context.Context) error { _, err := c.WriteFile(ctx, "f", pr); return err }},
		{"UploadBatch", func(ctx context.Context) error { _, err := c.UploadBatch(ctx, "d", strings.NewReader("x")); return err }},
		{"PostACP", func(ctx context.Context) error { _, err := c.PostACP(ctx, "s", "mock", []byte(`{}`)); return err }},
		{"StreamACP", func(ctx context.Context) error {
			return c.StreamACP(ctx, "s", "", func(httpclient.ACPEvent) error { return nil })
		}},
		{"RunProcess", func(ctx context.Context) error {
			_, err := c.RunProcess(ctx, httpclient.ProcessRunRequest{Command: "true"})
			return err
		}},
		{"FollowProcessLogs", func(ctx context.Context) error {
			return c.FollowProcessLogs(ctx, "p", httpclient.ProcessLogsQuery{}, noop)
		}},
		{"ConnectTerminal", func(ctx context.Context) error { _, err := c.ConnectTerminal(ctx, "p"); return err }},
		{"DialACP", func(ctx context.Context) error {
			conn, err := c.DialACP(ctx, "s", "mock", &httpclient.ACPOptions{ReconnectTimeout: time.Hour})
			if conn != nil {
				conn.Close()
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- tc.call(ctx) }()
			select {
			case <-seen: // the request has reached the peer
			case err := <-done:
				t.Fatalf("returned before the request was sent: %v", err)
			case <-time.After(10 * time.Second):
				t.Fatal("the request never reached the peer")
			}
			cancel()
			select {
			case err := <-done:
				var p *httpclient.Problem
				if !errors.Is(err, context.Canceled) || errors.As(err, &p) {
					t.Fatalf("err = %v, want the context's", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("still blocked 10 s after its context ended")
			}
		})
	}
	t.Run("DialACP without a deadline", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			_, err := c.DialACP(context.Background(), "s", "mock", &httpclient.ACPOptions{ReconnectTimeout: 500 * time.Millisecond})
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, httpclient.ErrDaemonUnreachable) || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("DialACP still waits 10 s after its ReconnectTimeout of 0.5 s")
		}
	})
	// The client has let go of every connection: what is left is the
	// peer's accept loop (the peer reads each connection until the client
	// closes it).
	tr.CloseIdleConnections()
	noGoroutinesOver(t, base+1)
}

// noGoroutinesOver waits until the process runs at most base goroutines
// (they may take a moment to return once their connection closed), and
// fails with their stacks if it does not within 10 s.
func noGoroutinesOver(t *testing.T, base int) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for runtime.NumGoroutine() > base {
		select {
		case <-tick.C:
		case <-deadline:
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
	}
}

// TestCloseIdleConnections: once a call has returned, what is left of it
// is its idle kept-alive connection, which CloseIdleConnections ends: a
// leak checker at the end of a test then finds nothing.
func TestCloseIdleConnections(t *testing.T) {
	base := runtime.NumGoroutine()
	c := &httpclient.Client{BaseURL: daemonURL, HTTP: &http.Client{Transport: &http.Transport{}}}
	if err := c.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.CloseIdleConnections()
	noGoroutinesOver(t, base)
}
