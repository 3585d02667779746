package httpclient

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeDaemon serves the ACP routes for instance "s" with a scripted POST
// answer and an event stream the test feeds frame by frame.
type fakeDaemon struct {
	t      *testing.T
	srv    *httptest.Server
	events chan string // data of numbered events, or "gap:" + data for a frame without id
	post   func(body string) (status int, answer string)
	mu     sync.Mutex
	seq    int
	posts  []string
	addrs  []string // the client address of each POST
}

// newFakeDaemon starts a fake daemon; each setup, given its server before
// it starts, may wrap its handler or its listener.
func newFakeDaemon(t *testing.T, post func(body string) (int, string), setup ...func(*fakeDaemon)) *fakeDaemon {
	f := &fakeDaemon{t: t, events: make(chan string, 100), post: post}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	for _, s := range setup {
		s(f)
	}
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeDaemon) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/acp":
		io.WriteString(w, `{"servers":[]}`)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/acp/s":
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.posts = append(f.posts, string(b))
		f.addrs = append(f.addrs, r.RemoteAddr)
		f.mu.Unlock()
		status, answer := f.post(string(b))
		if status >= 400 {
			w.Header().Set("Content-Type", "application/problem+json")
		}
		w.WriteHeader(status)
		io.WriteString(w, answer)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/acp/s":
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for {
			select {
			case ev := <-f.events:
				if data, ok := strings.CutPrefix(ev, "gap:"); ok {
					fmt.Fprintf(w, "event: message\ndata: %s\n\n", data)
				} else {
					f.mu.Lock()
					f.seq++
					fmt.Fprintf(w, "event: message\nid: %d\ndata: %s\n\n", f.seq, ev)
					f.mu.Unlock()
				}
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	case r.Method == http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

// transports are the two kinds of net/http client an ACPConn POSTs
// through: the package's default (large messages wait for the daemon's
// go-ahead, Expect: 100-continue) and a caller's plain http.Client (whose
// Transport sends every body at once).
var transports = []struct {
	name   string
	client func(url string) *Client
}{
	{"default", func(url string) *Client { return &Client{BaseURL: url} }},
	{"plain", func(url string) *Client {
		return &Client{BaseURL: url, HTTP: &http.Client{Transport: &http.Transport{}}}
	}},
}

// eachTransport runs test once per transport.
func eachTransport(t *testing.T, test func(t *testing.T, client func(url string) *Client)) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { test(t, tr.client) })
	}
}

func dialFake(t *testing.T, f *fakeDaemon, client func(string) *Client) (*ACPConn, *bufio.Reader) {
	t.Helper()
	c := client(f.srv.URL)
	conn, err := c.DialACP(context.Background(), "s", "fake", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, bufio.NewReader(conn)
}

func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		l, err := r.ReadString('\n')
		if err != nil {
			l = "ERR " + err.Error()
		}
		ch <- strings.TrimSuffix(l, "\n")
	}()
	select {
	case l := <-ch:
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("no line within 10 s")
		return ""
	}
}

const (
	req1  = `{"jsonrpc":"2.0","id":1,"method":"m"}`
	resp1 = `{"jsonrpc":"2.0","id":1,"result":{"n":1}}`
	upd   = `{"jsonrpc":"2.0","method":"session/update","params":{"u":1}}`
	upd2  = `{"jsonrpc":"2.0","method":"session/update","params":{"u":2}}`
)

// A synchronous answer is held until the stream delivers its copy, after
// the updates written before it, and is delivered once.
func TestACPConnHeldAnswerOnceInOrder(t *testing.T) {
	eachTransport(t, func(t *testing.T, client func(string) *Client) {
		f := newFakeDaemon(t, func(string) (int, string) { return 200, resp1 })
		conn, r := dialFake(t, f, client)
		io.WriteString(conn, req1+"\n")
		// The POST has answered (Write returned after the body was sent; give
		// the answer time to be held): the stream now sends the update first.
		streamInOrder(t, f, r, upd, resp1, upd2)
	})
}

// A replay gap answers pending requests with an error (or their held body),
// and a response arriving later for them is dropped.
func TestACPConnReplayGap(t *testing.T) {
	eachTransport(t, func(t *testing.T, client func(string) *Client) {
		f := newFakeDaemon(t, func(body string) (int, string) {
			if strings.Contains(body, `"id":2`) {
				return 202, ""
			}
			return 200, resp1
		})
		conn, r := dialFake(t, f, client)
		io.WriteString(conn, req1+"\n")
		f.events <- resp1
		if got := readLine(t, r); got != resp1 {
			t.Fatalf("got %s", got)
		}
		io.WriteString(conn, `{"jsonrpc":"2.0","id":2,"method":"session/prompt"}`+"\n")
		f.events <- `gap:{"jsonrpc":"2.0","method":"_adapter/replay_gap","params":{"lastEventId":1,"oldestAvailable":9}}`
		got := readLine(t, r)
		var m struct {
			ID    int `json:"id"`
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(got), &m); err != nil || m.ID != 2 || m.Error.Code != -32603 || !strings.Contains(m.Error.Message, "replay gap") {
			t.Fatalf("after a gap: %s", got)
		}
		f.events <- `{"jsonrpc":"2.0","id":2,"result":{}}`
		f.events <- upd
		if got := readLine(t, r); got != upd {
			t.Fatalf("late response not dropped: %s", got)
		}
	})
}

// failFirstRequest dials a fake daemon that answers the POST of request
// id 1 with status and problem, and 202 to the rest; it sends a
// notification (the stream starts with the first 2xx), then req1.
func failFirstRequest(t *testing.T, client func(string) *Client, status int, problem string) (*fakeDaemon, *bufio.Reader) {
	t.Helper()
	f := newFakeDaemon(t, func(body string) (int, string) {
		if strings.Contains(body, `"id":1`) {
			return status, problem
		}
		return 202, ""
	})
	conn, r := dialFake(t, f, client)
	io.WriteString(conn, `{"jsonrpc":"2.0","method":"n"}`+"\n")
	io.WriteString(conn, req1+"\n")
	return f, r
}

// A problem answer becomes a JSON-RPC error carrying the problem document,
// and a response arriving later for that id is dropped.
func TestACPConnProblemAnswer(t *testing.T) {
	eachTransport(t, func(t *testing.T, client func(string) *Client) {
		problem := `{"type":"urn:sandbox-agent:error:stream_error","title":"Stream Error","status":502,"detail":"stream error: write failed","details":{"message":"write failed"}}`
		f, r := failFirstRequest(t, client, 502, problem)
		got := readLine(t, r)
		var m struct {
			ID    int `json:"id"`
			Error struct {
				Message string          `json:"message"`
				Data    json.RawMessage `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(got), &m); err != nil || m.ID != 1 || !strings.Contains(string(m.Error.Data), "urn:sandbox-agent:error:stream_error") {
			t.Fatalf("problem answer: %s", got)
		}
		f.events <- resp1
		f.events <- upd
		if got := readLine(t, r); got != upd {
			t.Fatalf("late response not dropped: %s", got)
		}
	})
}

// A request the daemon gave up waiting for (504 timeout) is answered by the
// agent's late response from the stream, once, not by an error.
func TestACPConnTimeoutLateResponse(t *testing.T) {
	eachTransport(t, func(t *testing.T, client func(string) *Client) {
		problem := `{"type":"urn:sandbox-agent:error:timeout","title":"Timeout","status":504,"detail":"timeout","details":{"message":"timed out waiting for agent response"}}`
		f, r := failFirstRequest(t, client, 504, problem)
		streamInOrder(t, f, r, upd, resp1, upd2)
	})
}

// Close stops every goroutine the connection started, even with a POST and
// the stream in flight: a POST waiting for its answer, and one whose
// answer is being read (its header and half its body came).
func TestACPConnCloseLeavesNoGoroutine(t *testing.T) {
	for _, tc := range []struct {
		name  string
		serve func(w http.ResponseWriter, block <-chan struct{})
	}{
		{"waiting", func(w http.ResponseWriter, block <-chan struct{}) { <-block }},
		{"mid-read", func(w http.ResponseWriter, block <-chan struct{}) {
			w.Header().Set("Content-Length", strconv.Itoa(len(resp1)))
			w.WriteHeader(200)
			io.WriteString(w, resp1[:10])
			w.(http.Flusher).Flush()
			<-block
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachTransport(t, func(t *testing.T, client func(string) *Client) {
				block := make(chan struct{})
				f := newFakeDaemon(t, func(body string) (int, string) { return 202, "" }, func(f *fakeDaemon) {
					wrapPosts(f, func(w http.ResponseWriter, r *http.Request) bool {
						if r.ContentLength != int64(len(req1)) {
							return false
						}
						io.Copy(io.Discard, r.Body)
						tc.serve(w, block)
						return true
					})
				})
				defer close(block)
				conn, _ := dialFake(t, f, client)
				io.WriteString(conn, `{"jsonrpc":"2.0","method":"n"}`+"\n")
				io.WriteString(conn, req1+"\n") // hangs in the daemon
				if connGoroutines() == "" {
					t.Fatal("no goroutine of the connection found while it runs")
				}
				if err := conn.Close(); err != nil {
					t.Fatal(err)
				}
				if left := connGoroutines(); left != "" {
					t.Fatalf("goroutines of the connection left after Close:\n%s", left)
				}
				if _, err := conn.Read(make([]byte, 10)); err != ErrClosed {
					t.Fatalf("read after close: %v", err)
				}
				if _, err := conn.Write([]byte(req1 + "\n")); err == nil {
					t.Fatal("write after close succeeded")
				}
			})
		})
	}
}

// connParts are the frames of the goroutines an ACPConn starts.
var connParts = []string{"httpclient.(*ACPConn)", "httpclient.(*sender)", "httpclient.(*receiver)", "httpclient.(*pendingTable)", "httpclient.(*inbox)"}

// connGoroutines returns the stacks of the goroutines running code of an
// ACPConn, or "" when there are none.
func connGoroutines() string {
	buf := make([]byte, 1<<20)
	var left []string
	// A goroutine that has signalled its end may still be on its way out
	// (its frame in the dump): let it finish first.
	for range 1000 {
		left = left[:0]
		for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.HasPrefix(g, "goroutine ") && slices.ContainsFunc(connParts, func(p string) bool { return strings.Contains(g, p) }) &&
				!strings.Contains(g, "connGoroutines") {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return ""
		}
		runtime.Gosched()
	}
	return strings.Join(left, "\n\n")
}

// A line past MaxMessage fails Write instead of growing without bound.
func TestACPConnMaxMessage(t *testing.T) {
	f := newFakeDaemon(t, func(string) (int, string) { return 202, "" })
	c := &Client{BaseURL: f.srv.URL}
	conn, err := c.DialACP(context.Background(), "s", "fake", &ACPOptions{MaxMessage: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(strings.Repeat("x", 40))); err != nil {
		t.Fatal(err) // partial line, under the limit
	}
	if _, err := conn.Write([]byte(strings.Repeat("x", 40))); err == nil || !strings.Contains(err.Error(), "longer than 64 bytes") {
		t.Fatalf("err = %v", err)
	}
}

// Attaching to an instance whose agent exited is refused with a clear
// error instead of a connection that can only fail.
func TestDialACPExitedInstance(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"servers":[{"serverId":"s","agent":"mock","state":"exited","exitCode":1}]}`)
	}))
	defer srv.Close()
	_, err := (&Client{BaseURL: srv.URL}).DialACP(context.Background(), "s", "", nil)
	if err == nil || !strings.Contains(err.Error(), "agent has exited") {
		t.Fatalf("err = %v", err)
	}
	_, err = (&Client{BaseURL: srv.URL}).DialACP(context.Background(), "s", "claude", nil)
	if err == nil || !strings.Contains(err.Error(), `runs agent "mock"`) {
		t.Fatalf("agent mismatch: err = %v", err)
	}
}

// streamInOrder sends lines on the fake's stream and expects each on the
// connection, once and in that order.
func streamInOrder(t *testing.T, f *fakeDaemon, r *bufio.Reader, lines ...string) {
	t.Helper()
	for _, l := range lines {
		f.events <- l
	}
	for _, want := range lines {
		if got := readLine(t, r); got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	}
}

// serveIdleStream answers an SSE GET with a stream that stays open and
// silent until the client goes.
func serveIdleStream(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// logCapture collects a connection's log output for a test to read.
type logCapture struct {
	mu      sync.Mutex
	b       strings.Builder
	changed chan struct{} // cap 1, made by logger
}

// logger returns a logger writing to l.
func (l *logCapture) logger() *slog.Logger {
	l.mu.Lock()
	if l.changed == nil {
		l.changed = make(chan struct{}, 1)
	}
	l.mu.Unlock()
	return slog.New(slog.NewTextHandler(l, nil))
}

func (l *logCapture) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed != nil {
		signal(l.changed)
	}
	return l.b.Write(p)
}

func (l *logCapture) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor waits until the log holds s (logger must have made l's logger).
func (l *logCapture) waitFor(t *testing.T, s string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for !strings.Contains(l.String(), s) {
		select {
		case <-l.changed:
		case <-timeout:
			t.Fatalf("no %q logged within 10 s:\n%s", s, l.String())
		}
	}
}

// Informational answers before the real one are skipped, as net/http
// does.
func TestACPConnSkipsInformationalAnswers(t *testing.T) {
	f := newFakeDaemon(t, func(string) (int, string) { return 200, resp1 }, func(f *fakeDaemon) {
		inner := f.srv.Config.Handler
		f.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				w.Header().Set("Link", "</x>; rel=preload")
				w.WriteHeader(http.StatusEarlyHints)
				w.Header().Del("Link")
			}
			inner.ServeHTTP(w, r)
		})
	})
	logs := &logCapture{}
	conn, err := (&Client{BaseURL: f.srv.URL}).DialACP(context.Background(), "s", "fake", &ACPOptions{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	io.WriteString(conn, `{"jsonrpc":"2.0","method":"n"}`+"\n") // starts the stream
	io.WriteString(conn, req1+"\n")
	f.events <- resp1
	if got := readLine(t, r); got != resp1 {
		t.Fatalf("got %s", got)
	}
	if err := conn.CloseWrite(context.Background()); err != nil {
		t.Fatalf("the answer was not taken: %v", err)
	}
	if logged := logs.String(); strings.Contains(logged, "refused") {
		t.Fatalf("an informational answer was taken for the answer:\n%s", logged)
	}
}

// Attached to an existing instance, the first POST carries ?agent= (as
// every POST does until one succeeded), so an instance deleted meanwhile
// is created again rather than refused.
func TestACPConnAttachedPostsCarryAgent(t *testing.T) {
	eachTransport(t, func(t *testing.T, client func(string) *Client) {
		var mu sync.Mutex
		var uris []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.Method == http.MethodGet && r.URL.Path == "/v1/acp":
				io.WriteString(w, `{"servers":[{"serverId":"s","agent":"fake","state":"running"}]}`)
			case r.Method == http.MethodPost:
				io.Copy(io.Discard, r.Body)
				mu.Lock()
				uris = append(uris, r.RequestURI)
				mu.Unlock()
				w.WriteHeader(http.StatusAccepted)
			case r.Method == http.MethodGet:
				serveIdleStream(w, r)
			}
		}))
		defer srv.Close()
		conn, err := client(srv.URL).DialACP(context.Background(), "s", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, req1+"\n")
		conn.CloseWrite(context.Background())
		conn.Close()
		mu.Lock()
		defer mu.Unlock()
		if len(uris) != 1 || uris[0] != "/v1/acp/s?agent=fake" {
			t.Fatalf("POSTs: %q", uris)
		}
	})
}
