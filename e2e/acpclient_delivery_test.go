package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// TestGoClientMessageOverLimit: a message over the daemon's --max-acp-body
// is refused before its body is sent (the client asks first, Expect:
// 100-continue) and reaches the caller as a JSON-RPC error carrying the
// 413 problem; the connection goes on. Through the Go client with a cap
// above the daemon's (a 40 MiB message against the default 32 MiB), and
// through the bridge against a daemon with a 1 MiB limit.
func TestGoClientMessageOverLimit(t *testing.T) {
	check := func(t *testing.T, lr *lineReader, proxy *tcpProxy, w io.Writer, size int) {
		t.Helper()
		before := proxy.sent.Load()
		big := `{"jsonrpc":"2.0","id":"big","method":"hash","params":{"pad":"` + strings.Repeat("x", size) + `"}}`
		if _, err := io.WriteString(w, big+"\n"); err != nil {
			t.Fatalf("write: %v", err)
		}
		lines := lr.untilID(t, `"big"`, 20*time.Second)
		var a struct {
			Error struct {
				Code    int `json:"code"`
				Message string
				Data    struct {
					Status int `json:"status"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &a); err != nil || a.Error.Code != -32603 || a.Error.Data.Status != 413 {
			t.Fatalf("answer %.300s", lines[len(lines)-1])
		}
		if sent := proxy.sent.Load() - before; sent >= 64<<10 {
			t.Fatalf("%d bytes of the refused message were sent", sent)
		}
		// The connection goes on.
		io.WriteString(w, `{"jsonrpc":"2.0","id":"next","method":"hash","params":{}}`+"\n")
		if last := lr.untilID(t, `"next"`, 20*time.Second); !strings.Contains(last[len(last)-1], `"sha256"`) {
			t.Fatalf("after the refusal: %s", last[len(last)-1])
		}
	}
	t.Run("go-client", func(t *testing.T) {
		d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t)})
		proxy := startProxy(t, d.URL)
		var logs harness.LockedBuffer
		conn, err := (&httpclient.Client{BaseURL: proxy.URL()}).DialACP(context.Background(), "big", "test", &httpclient.ACPOptions{
			DeleteOnClose: true, MaxMessage: 64 << 20, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		lr := newLineReader(conn)
		io.WriteString(conn, `{"jsonrpc":"2.0","id":"first","method":"hash","params":{}}`+"\n")
		lr.untilID(t, `"first"`, 20*time.Second)
		check(t, lr, proxy, conn, 40<<20)
		if l := logs.String(); strings.Contains(l, "retrying") || strings.Contains(l, "unreachable") {
			t.Fatalf("log:\n%s", l)
		}
	})
	t.Run("bridge", func(t *testing.T) {
		d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t, "--max-acp-body", "1048576")})
		proxy := startProxy(t, d.URL)
		b := startBridge(t, &harness.Daemon{URL: proxy.URL()}, "--agent", "test")
		lr := newLineReader(b.stdout)
		io.WriteString(b.stdin, `{"jsonrpc":"2.0","id":"first","method":"hash","params":{}}`+"\n")
		lr.untilID(t, `"first"`, 20*time.Second)
		check(t, lr, proxy, b.stdin, 2<<20)
		b.stdin.Close()
		if err := b.wait(t, 10*time.Second); err != nil {
			t.Fatalf("exit: %v", err)
		}
	})
}

// TestGoClientAtMostOnce: messages sent while every connection is cut,
// again and again, reach the agent at most once each. Each notification
// the test agent echoes comes back once or not at all, and every one that
// does not come back was reported (logged as not sent again, or as not
// delivered).
func TestGoClientAtMostOnce(t *testing.T) {
	d := harness.Start(t, harness.Options{Args: harness.WithTestAgent(t)})
	proxy := startProxy(t, d.URL)
	var logs harness.LockedBuffer
	conn, err := (&httpclient.Client{BaseURL: proxy.URL()}).DialACP(context.Background(), "once", "test", &httpclient.ACPOptions{
		DeleteOnClose: true, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	lr := newLineReader(conn)
	const n = 400
	wrote := make(chan int)
	go func() {
		defer close(wrote)
		for i := range n {
			fmt.Fprintf(conn, `{"jsonrpc":"2.0","method":"echo","params":{"n":%d}}`+"\n", i)
			wrote <- i
		}
	}()
	for i := range wrote {
		if i%40 == 20 {
			proxy.cut() // the POSTs' connections and the stream alike
		}
	}
	// Everything written before this request was taken by the agent
	// before it; its answer ends what can come back.
	io.WriteString(conn, `{"jsonrpc":"2.0","id":"end","method":"hash","params":{}}`+"\n")
	seen := map[int]int{}
	for _, l := range lr.untilID(t, `"end"`, 60*time.Second) {
		var m struct {
			Method string `json:"method"`
			Params struct {
				N int `json:"n"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(l), &m) == nil && m.Method == "echo" {
			seen[m.Params.N]++
		}
	}
	missing := 0
	for i := range n {
		switch seen[i] {
		case 0:
			missing++
		case 1:
		default:
			t.Fatalf("message %d reached the agent %d times", i, seen[i])
		}
	}
	reported := strings.Count(logs.String(), "not sent again") + strings.Count(logs.String(), "did not reach the agent")
	if missing > reported {
		t.Fatalf("%d messages lost, %d reported:\n%s", missing, reported, logs.String())
	}
	t.Logf("%d of %d messages cut off in flight and reported, none twice; %d reconnects", missing, n, strings.Count(logs.String(), "reconnecting"))
}
