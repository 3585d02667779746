package httpclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The tests in this file pin the ACP connection's HTTP behaviour: what a
// POST carries, answers net/http must read whatever their shape, early
// answers, concurrency, and delivery at most once.

// dialFakeLogged is dialFake with a captured log.
func dialFakeLogged(t *testing.T, f *fakeDaemon, c *Client) (*ACPConn, *bufio.Reader, *logCapture) {
	t.Helper()
	logs := &logCapture{}
	conn, err := c.DialACP(context.Background(), "s", "fake", &ACPOptions{Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, bufio.NewReader(conn), logs
}

// wrapPosts puts h in front of f's POST handling: h returns false to let
// the fake answer.
func wrapPosts(f *fakeDaemon, h func(w http.ResponseWriter, r *http.Request) bool) {
	inner := f.srv.Config.Handler
	f.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && h(w, r) {
			return
		}
		inner.ServeHTTP(w, r)
	})
}

// posted returns the bodies the fake received, in order.
func (f *fakeDaemon) posted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.posts)
}

// record adds a body to what the fake received.
func (f *fakeDaemon) record(r *http.Request, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.posts = append(f.posts, body)
	f.addrs = append(f.addrs, r.RemoteAddr)
}

// rpcAnswer is the shape of a JSON-RPC error answer.
type rpcAnswer struct {
	ID    json.RawMessage `json:"id"`
	Error *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func parseAnswer(t *testing.T, line string) rpcAnswer {
	t.Helper()
	var a rpcAnswer
	if err := json.Unmarshal([]byte(line), &a); err != nil {
		t.Fatalf("not JSON: %s", line)
	}
	return a
}

// noTransportTrouble fails t when the log shows a retry or a message whose
// delivery is unknown.
func noTransportTrouble(t *testing.T, logs *logCapture) {
	t.Helper()
	if l := logs.String(); strings.Contains(l, "retrying") || strings.Contains(l, "not sent again") {
		t.Fatalf("transport trouble logged:\n%s", l)
	}
}

// What a POST carries: the base URL's path, the escaped server id, ?agent=
// until the instance exists, the token, JSON both ways, the exact body and
// its length; Expect: 100-continue from 1 MiB on; never an Idempotency-Key
// (which would let net/http send a POST twice).
func TestACPConnPostTarget(t *testing.T) {
	type seen struct {
		uri, ctype, accept, auth, expect string
		idem                             bool
		length                           int64
		body                             string
	}
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/pfx/v1/acp":
			io.WriteString(w, `{"servers":[]}`)
		case r.Method == http.MethodPost:
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			got = append(got, seen{r.RequestURI, r.Header.Get("Content-Type"), r.Header.Get("Accept"), r.Header.Get("Authorization"), r.Header.Get("Expect"),
				r.Header.Get("Idempotency-Key") != "" || r.Header.Get("X-Idempotency-Key") != "", r.ContentLength, string(b)})
			mu.Unlock()
			w.WriteHeader(http.StatusAccepted)
		case r.Method == http.MethodGet:
			serveIdleStream(w, r)
		}
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL + "/pfx/", Token: "tok en"}
	conn, err := c.DialACP(context.Background(), "s é", "fake", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	a := `{"jsonrpc":"2.0","method":"a","params":{"s":"\u00e9\n"}}`
	big := `{"jsonrpc":"2.0","method":"big","params":{"x":"` + strings.Repeat("x", expectContinueFrom) + `"}}`
	for _, l := range []string{a, `{"jsonrpc":"2.0","method":"b"}`, big} {
		if _, err := io.WriteString(conn, l+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []seen{
		{"/pfx/v1/acp/s%20%C3%A9?agent=fake", "application/json", "application/json", "Bearer tok en", "", false, int64(len(a)), a},
		{"/pfx/v1/acp/s%20%C3%A9", "application/json", "application/json", "Bearer tok en", "", false, 30, `{"jsonrpc":"2.0","method":"b"}`},
		{"/pfx/v1/acp/s%20%C3%A9", "application/json", "application/json", "Bearer tok en", "100-continue", false, int64(len(big)), big},
	}
	if !slices.Equal(got, want) {
		for i := range got {
			got[i].body = truncate([]byte(got[i].body), 80)
		}
		t.Fatalf("POSTs:\n%+v", got)
	}
}

// An answer the daemon gives before reading a large body (413 over its
// limit, 401, 503 overloaded with a Retry-After past the reconnect
// window, which is not waited for) reaches the reader as a JSON-RPC error
// carrying that problem, at once and once; the connection goes on. With
// the default client's settings the body is not even sent (Expect:
// 100-continue); with a plain client, net/http reads the answer while it
// is still writing.
func TestACPConnEarlyAnswer(t *testing.T) {
	const size = 16 << 20 // more than loopback sockets buffer
	for _, status := range []int{http.StatusRequestEntityTooLarge, http.StatusUnauthorized, http.StatusServiceUnavailable} {
		for _, tr := range []struct {
			name      string
			transport *http.Transport
		}{
			{"default", defaultHTTP.Transport.(*http.Transport).Clone()},
			{"plain", &http.Transport{}},
		} {
			t.Run(strconv.Itoa(status)+"/"+tr.name, func(t *testing.T) {
				var refused atomic.Int32
				f := newFakeDaemon(t, func(string) (int, string) { return 202, "" }, func(f *fakeDaemon) {
					wrapPosts(f, func(w http.ResponseWriter, r *http.Request) bool {
						if r.ContentLength < size {
							return false
						}
						refused.Add(1)
						if status == http.StatusServiceUnavailable {
							w.Header().Set("Retry-After", "3600")
						}
						w.Header().Set("Content-Type", "application/problem+json")
						w.WriteHeader(status)
						fmt.Fprintf(w, `{"type":"urn:sandbox-agent:error:early","title":"Early","status":%d,"detail":"refused before the body"}`, status)
						return true
					})
				})
				var sent atomic.Int64 // bytes the client wrote
				tr.transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
					c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
					if err != nil {
						return nil, err
					}
					return &countingConn{Conn: c, n: &sent}, nil
				}
				conn, r, logs := dialFakeLogged(t, f, &Client{BaseURL: f.srv.URL, HTTP: &http.Client{Transport: tr.transport}})
				t.Cleanup(func() {
					if t.Failed() {
						t.Logf("log:\n%s", logs)
					}
				})
				io.WriteString(conn, `{"jsonrpc":"2.0","method":"n"}`+"\n") // creates the instance
				before := sent.Load()
				big := `{"jsonrpc":"2.0","id":1,"method":"big","params":{"x":"` + strings.Repeat("x", size) + `"}}`
				if _, err := io.WriteString(conn, big+"\n"); err != nil {
					t.Fatalf("write: %v", err)
				}
				// The default client gets the answer. A plain one gets it,
				// or loses it with the connection as it writes on
				// (net/http then returns the write's error): then the
				// request was cut short, which the error says.
				a := parseAnswer(t, readLine(t, r))
				switch {
				case string(a.ID) != "1" || a.Error == nil:
					t.Fatalf("answer %+v", a)
				case strings.Contains(string(a.Error.Data), `"status":`+strconv.Itoa(status)):
				case tr.name == "plain" && strings.HasPrefix(a.Error.Message, ErrNotDelivered.Error()):
					t.Logf("the answer was lost with the connection: %s", a.Error.Message)
				default:
					t.Fatalf("answer %+v: %s", a, a.Error.Message)
				}
				if n := refused.Load(); n != 1 {
					t.Fatalf("the daemon was asked %d times", n)
				}
				if n := sent.Load() - before; tr.name == "default" && n >= 4<<10 {
					t.Fatalf("the default client sent %d bytes of a message the daemon refused first", n)
				}
				// The connection goes on.
				io.WriteString(conn, `{"jsonrpc":"2.0","method":"after"}`+"\n")
				streamInOrder(t, f, r, upd)
				if p := f.posted(); len(p) != 2 || !strings.Contains(p[1], `"after"`) {
					t.Fatalf("posts after the refusal: %q", p)
				}
			})
		}
	}
}

// countingConn counts the bytes written to it.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// A synchronous answer sent chunked (no Content-Length, in two writes) is
// read whole: held, it answers the request when a replay gap means the
// stream cannot.
func TestACPConnChunkedAnswer(t *testing.T) {
	eachTransport(t, func(t *testing.T, client func(string) *Client) {
		f := newFakeDaemon(t, func(string) (int, string) { return 202, "" }, func(f *fakeDaemon) {
			wrapPosts(f, func(w http.ResponseWriter, r *http.Request) bool {
				b, _ := io.ReadAll(r.Body)
				f.record(r, string(b))
				if !strings.Contains(string(b), `"id":1`) {
					w.WriteHeader(http.StatusAccepted)
					return true
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(200)
				io.WriteString(w, resp1[:7])
				w.(http.Flusher).Flush() // the header goes out without a length: chunked
				io.WriteString(w, resp1[7:])
				return true
			})
		})
		conn, r, logs := dialFakeLogged(t, f, client(f.srv.URL))
		io.WriteString(conn, `{"jsonrpc":"2.0","method":"n"}`+"\n")
		io.WriteString(conn, req1+"\n")
		// The answer is held once the POST is over.
		conn.send.waitIdle(nil)
		if !conn.pending.holding() {
			t.Fatal("the chunked answer was not held")
		}
		f.events <- `gap:{"jsonrpc":"2.0","method":"_adapter/replay_gap","params":{"lastEventId":0,"oldestAvailable":5}}`
		if got := readLine(t, r); got != resp1 {
			t.Fatalf("held chunked answer: %s", got)
		}
		noTransportTrouble(t, logs)
	})
}

// Answers with "Connection: close" cost a connection each, nothing else:
// every message reaches the daemon once, in order, with nothing retried or
// lost.
func TestACPConnConnectionClose(t *testing.T) {
	eachTransport(t, func(t *testing.T, client func(string) *Client) {
		f := newFakeDaemon(t, func(body string) (int, string) {
			if strings.Contains(body, `"id"`) {
				return 200, resp1
			}
			return 202, ""
		}, func(f *fakeDaemon) {
			wrapPosts(f, func(w http.ResponseWriter, r *http.Request) bool {
				w.Header().Set("Connection", "close")
				return false
			})
		})
		conn, r, logs := dialFakeLogged(t, f, client(f.srv.URL))
		var want []string
		for i := range 20 {
			l := fmt.Sprintf(`{"jsonrpc":"2.0","method":"n%d"}`, i)
			if i == 10 {
				l = req1
			}
			want = append(want, l)
			io.WriteString(conn, l+"\n")
		}
		conn.send.waitIdle(nil)
		// Each once; the notifications in order (what follows the request
		// may overtake it, see TestACPConnPostOrder).
		got := f.posted()
		if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) ||
			!slices.Equal(slices.DeleteFunc(got, isRequest), slices.DeleteFunc(want, isRequest)) {
			t.Fatalf("posts:\n%q\nwant\n%q", got, want)
		}
		f.mu.Lock()
		conns := len(slices.Compact(slices.Clone(f.addrs)))
		f.mu.Unlock()
		if conns != 20 {
			t.Fatalf("20 answers with Connection: close, %d connections", conns)
		}
		streamInOrder(t, f, r, upd, resp1, upd2)
		noTransportTrouble(t, logs)
	})
}

func isRequest(line string) bool { return strings.Contains(line, `"id"`) }

// POSTs run concurrently: a request the daemon keeps waiting does not hold
// back what is written after it (here the notification the daemon waits
// for to answer it, as a permission answer unblocks a prompt).
func TestACPConnPostsWhileARequestWaits(t *testing.T) {
	eachTransport(t, func(t *testing.T, client func(string) *Client) {
		unblock := make(chan struct{})
		f := newFakeDaemon(t, func(body string) (int, string) {
			switch {
			case strings.Contains(body, `"unblock"`):
				close(unblock)
			case strings.Contains(body, `"id":1`):
				select {
				case <-unblock:
				case <-time.After(10 * time.Second):
					return 500, `{"status":500,"detail":"never unblocked"}`
				}
				return 200, resp1
			}
			return 202, ""
		})
		conn, r, logs := dialFakeLogged(t, f, client(f.srv.URL))
		io.WriteString(conn, `{"jsonrpc":"2.0","method":"n"}`+"\n")
		io.WriteString(conn, req1+"\n")
		io.WriteString(conn, `{"jsonrpc":"2.0","method":"unblock"}`+"\n")
		conn.send.waitIdle(nil)
		if !conn.pending.holding() {
			t.Fatalf("the request was not answered 200; posts %q", f.posted())
		}
		streamInOrder(t, f, r, resp1)
		noTransportTrouble(t, logs)
	})
}

// The order ACPConn promises for concurrent POSTs: every message reaches
// the daemon once, and a notification before everything written after it
// (the next POST starts once its 202 came; a request's, once its body was
// written, so what follows a request may overtake it).
func TestACPConnPostOrder(t *testing.T) {
	eachTransport(t, func(t *testing.T, client func(string) *Client) {
		f := newFakeDaemon(t, func(body string) (int, string) {
			if strings.Contains(body, `"id"`) {
				return 200, `{"jsonrpc":"2.0","id":0,"result":{}}`
			}
			return 202, ""
		})
		conn, _, logs := dialFakeLogged(t, f, client(f.srv.URL))
		var want []string
		var b strings.Builder
		for i := range 200 {
			l := fmt.Sprintf(`{"jsonrpc":"2.0","method":"n%d"}`, i)
			if i%3 == 1 {
				l = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"r%d"}`, i, i)
			}
			want = append(want, l)
			b.WriteString(l + "\n")
		}
		if _, err := io.WriteString(conn, b.String()); err != nil {
			t.Fatal(err)
		}
		conn.send.waitIdle(nil)
		got := f.posted()
		if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
			t.Fatalf("the daemon got %d messages, not each of the %d once", len(got), len(want))
		}
		at := map[string]int{}
		for i, l := range got {
			at[l] = i
		}
		for i, l := range want {
			if strings.Contains(l, `"id"`) {
				continue
			}
			for _, later := range want[i+1:] {
				if at[later] < at[l] {
					t.Fatalf("%s reached the daemon before %s, written before it", later, l)
				}
			}
		}
		noTransportTrouble(t, logs)
	})
}

// closeAfterReading makes f read a POST whose body contains marker, record
// it, and close its connection without an answer: the daemon got the
// message, the client cannot know it. It returns how many such POSTs came
// on a connection that had carried an earlier request.
func closeAfterReading(t *testing.T, f *fakeDaemon, marker string) (reused func() int) {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]bool{} // client addresses that sent a request
	var n int
	inner := f.srv.Config.Handler
	f.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		again := seen[r.RemoteAddr]
		seen[r.RemoteAddr] = true
		mu.Unlock()
		if r.Method != http.MethodPost {
			inner.ServeHTTP(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(b), marker) {
			r.Body = io.NopCloser(strings.NewReader(string(b)))
			inner.ServeHTTP(w, r)
			return
		}
		f.record(r, string(b))
		if again {
			mu.Lock()
			n++
			mu.Unlock()
		}
		c, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		c.Close()
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// count is how many of the bodies the fake received contain s.
func (f *fakeDaemon) count(s string) int {
	n := 0
	for _, p := range f.posted() {
		if strings.Contains(p, s) {
			n++
		}
	}
	return n
}

// A kept-alive connection closed after the daemon read a message, before
// it answered: the message is not sent again (the daemon got it once). A
// request's response then comes on the stream, once; a notification is
// dropped with a warning. What follows goes out on a fresh connection.
func TestACPConnNoDuplicateOnStaleConn(t *testing.T) {
	eachTransport(t, func(t *testing.T, client func(string) *Client) {
		var reused func() int
		f := newFakeDaemon(t, func(string) (int, string) { return 202, "" }, func(f *fakeDaemon) {
			reused = closeAfterReading(t, f, `"lost"`)
		})
		conn, r, logs := dialFakeLogged(t, f, client(f.srv.URL))
		io.WriteString(conn, `{"jsonrpc":"2.0","method":"n1"}`+"\n") // creates the instance, starts the stream
		io.WriteString(conn, `{"jsonrpc":"2.0","method":"n2"}`+"\n") // leaves a kept-alive connection idle
		io.WriteString(conn, `{"jsonrpc":"2.0","method":"lost"}`+"\n")
		logs.waitFor(t, "not sent again")
		io.WriteString(conn, `{"jsonrpc":"2.0","method":"n3"}`+"\n")
		io.WriteString(conn, `{"jsonrpc":"2.0","id":"r","method":"lost"}`+"\n")
		conn.send.waitIdle(nil)
		if n := f.count(`"lost"`); n != 2 {
			t.Fatalf("the daemon got %d lost messages, want each once: %q", n, f.posted())
		}
		if reused() == 0 {
			t.Fatal("no lost message came on a reused connection")
		}
		if f.count(`"n3"`) != 1 {
			t.Fatalf("posts %q", f.posted())
		}
		// The daemon got the request: the agent's response comes on the
		// stream, and reaches the reader once.
		streamInOrder(t, f, r, `{"jsonrpc":"2.0","id":"r","result":{}}`, upd)
		if l := logs.String(); strings.Contains(l, "retrying") {
			t.Fatalf("a message that reached the daemon was sent again:\n%s", l)
		}
	})
}

// The request that creates the instance has no stream yet to wait on: when
// its POST fails after it may have reached the daemon, it gets a JSON-RPC
// error at once, and the next message still carries ?agent=.
func TestACPConnBootstrapDeliveryUnknown(t *testing.T) {
	var mu sync.Mutex
	var uris []string
	f := newFakeDaemon(t, func(string) (int, string) { return 200, resp1 }, func(f *fakeDaemon) {
		closeAfterReading(t, f, `"lost"`)
		wrapPosts(f, func(w http.ResponseWriter, r *http.Request) bool {
			mu.Lock()
			uris = append(uris, r.RequestURI)
			mu.Unlock()
			return false
		})
	})
	conn, r, _ := dialFakeLogged(t, f, &Client{BaseURL: f.srv.URL})
	io.WriteString(conn, `{"jsonrpc":"2.0","id":0,"method":"lost"}`+"\n")
	a := parseAnswer(t, readLine(t, r))
	if string(a.ID) != "0" || a.Error == nil || !strings.HasPrefix(a.Error.Message, ErrDeliveryUnknown.Error()) {
		t.Fatalf("answer %+v", a)
	}
	io.WriteString(conn, req1+"\n")
	streamInOrder(t, f, r, resp1)
	mu.Lock()
	defer mu.Unlock()
	if len(uris) != 2 || !strings.HasSuffix(uris[1], "?agent=fake") {
		t.Fatalf("POSTs %q", uris)
	}
}

// Kept-alive connections are reused, and one the daemon closed while it
// sat idle is left for a fresh one: the next message reaches the daemon
// once, with nothing logged.
func TestACPConnKeptAlivePosts(t *testing.T) {
	var cmu sync.Mutex
	idle := map[string]net.Conn{}
	closed := map[string]chan struct{}{}
	wentIdle := make(chan struct{}, 1)
	f := newFakeDaemon(t, func(string) (int, string) { return 202, "" }, func(f *fakeDaemon) {
		f.srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
			cmu.Lock()
			defer cmu.Unlock()
			addr := c.RemoteAddr().String()
			if closed[addr] == nil {
				closed[addr] = make(chan struct{})
			}
			switch st {
			case http.StateIdle:
				idle[addr] = c
				signal(wentIdle)
			case http.StateClosed, http.StateHijacked:
				close(closed[addr])
				delete(idle, addr)
			default:
				delete(idle, addr)
			}
		}
	})
	conn, _, logs := dialFakeLogged(t, f, &Client{BaseURL: f.srv.URL})
	const n = 20
	for i := range n {
		fmt.Fprintf(conn, `{"jsonrpc":"2.0","method":"n%d"}`+"\n", i)
	}
	f.mu.Lock()
	// The first POSTs and the stream's GET share the idle connections
	// while the stream starts; then one connection carries the rest.
	addrs := slices.Compact(slices.Clone(f.addrs[5:]))
	f.mu.Unlock()
	if len(addrs) != 1 {
		t.Fatalf("%d notifications took %d connections: %v", n-5, len(addrs), addrs)
	}
	last := addrs[0]
	// The daemon closes the idle connection (its idle timeout, a proxy's):
	// its side first, then the client notices and closes its own.
	timeout := time.After(10 * time.Second)
	for {
		cmu.Lock()
		c := idle[last]
		cmu.Unlock()
		if c != nil {
			c.(*net.TCPConn).CloseWrite()
			break
		}
		select {
		case <-wentIdle:
		case <-timeout:
			t.Fatal("the POST connection never went idle")
		}
	}
	cmu.Lock()
	gone := closed[last]
	cmu.Unlock()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the client kept the connection the daemon closed")
	}
	io.WriteString(conn, `{"jsonrpc":"2.0","method":"after"}`+"\n")
	if f.count(`"after"`) != 1 || len(f.posted()) != n+1 {
		t.Fatalf("after the daemon closed the idle connection: %q", f.posted())
	}
	noTransportTrouble(t, logs)
}

// flakyListener resets the connections it accepts whose number (from 1)
// is in drop, as a restarting daemon or a proxy dropping connections would.
type flakyListener struct {
	net.Listener
	mu      sync.Mutex
	n       int
	drop    map[int]bool
	dropped int
}

func (l *flakyListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		l.n++
		drop := l.drop[l.n]
		if drop {
			l.dropped++
		}
		l.mu.Unlock()
		if !drop {
			return c, nil
		}
		c.(*net.TCPConn).SetLinger(0) // reset, not a clean close
		c.Close()
	}
}

// noKeepAlive is a client whose every request dials.
func noKeepAlive(url string) *Client {
	return &Client{BaseURL: url, HTTP: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
}

// A POST that could not connect (nothing of it sent) is tried again until
// the daemon listens; the message reaches it once.
func TestACPConnRetriesWhenNothingSent(t *testing.T) {
	f := newFakeDaemon(t, func(string) (int, string) { return 202, "" })
	conn, _, logs := dialFakeLogged(t, f, noKeepAlive(f.srv.URL))
	addr := f.srv.Listener.Addr().String()
	f.srv.Listener.Close() // the daemon restarts: connections are refused
	wrote := make(chan error, 1)
	go func() {
		_, err := io.WriteString(conn, `{"jsonrpc":"2.0","method":"n","params":{}}`+"\n")
		wrote <- err
	}()
	logs.waitFor(t, "nothing sent; retrying")
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: f.srv.Config.Handler}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if p := f.posted(); len(p) != 1 || !strings.Contains(p[0], `"method":"n"`) {
		t.Fatalf("posts %q", p)
	}
}

// A connection the daemon's side reset once it was made is not tried
// again: the message may have reached the daemon (or, reset before it was
// written whole, it did not). It is dropped with a warning and the
// connection goes on. (A reset so early that connecting itself fails is a
// dial failure: nothing was sent, and the message is sent again.)
func TestACPConnNoRetryOnceConnected(t *testing.T) {
	var fl *flakyListener
	f := newFakeDaemon(t, func(string) (int, string) { return 202, "" }, func(f *fakeDaemon) {
		fl = &flakyListener{Listener: f.srv.Listener, drop: map[int]bool{2: true}} // 1 is the dial's GET
		f.srv.Listener = fl
	})
	conn, _, logs := dialFakeLogged(t, f, noKeepAlive(f.srv.URL))
	if _, err := io.WriteString(conn, `{"jsonrpc":"2.0","method":"lost"}`+"\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	if _, err := io.WriteString(conn, `{"jsonrpc":"2.0","method":"next"}`+"\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	fl.mu.Lock()
	dropped := fl.dropped
	fl.mu.Unlock()
	l := logs.String()
	switch p := f.posted(); {
	case dropped != 1 || len(p) == 0 || !strings.Contains(p[len(p)-1], `"next"`):
		t.Fatalf("%d connections reset; posts: %q", dropped, p)
	case strings.Contains(l, "nothing sent; retrying"):
		// The reset came while connecting (connect itself failed):
		// nothing was sent, and it was sent again, once.
		if len(p) != 2 {
			t.Fatalf("posts %q after a failed connect:\n%s", p, l)
		}
	case len(p) != 1 || !(strings.Contains(l, "not sent again") || strings.Contains(l, "did not reach the agent")):
		// Reset before the request was written whole (it did not reach
		// the agent) or after (unknown): reported either way, and not
		// sent again.
		t.Fatalf("posts %q; log:\n%s", p, l)
	}
}

// PostACP returns when its context ends while the answer is being read.
func TestPostACPCancelMidRead(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(200)
		io.WriteString(w, `{"jsonrpc":`)
		w.(http.Flusher).Flush()
		<-block
	}))
	defer srv.Close()
	defer close(block) // before Close waits for the handler
	ctx, cancel := context.WithCancel(context.Background())
	// Cancelled once the answer has begun to arrive.
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotFirstResponseByte: cancel})
	errc := make(chan error, 1)
	go func() {
		_, err := (&Client{BaseURL: srv.URL}).PostACP(ctx, "s", "", []byte(req1))
		errc <- err
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("PostACP did not return after its context ended")
	}
}
