package httpclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// The tests that use this file run in a synctest bubble: the client, a
// fake daemon (a real http.Server) and the network between them (net.Pipe
// connections) all live in it, so the daemon can be killed, stopped or
// slowed at will, time is fake (a 45 s silence passes at once), and once
// everything has settled, a goroutine of the client still blocked is a
// leak the test reports with its stack.

// pipeNet is a bubble's network: the fake daemon's listener and the
// client's dialer. kill resets every connection and refuses new ones, as
// a daemon killed with SIGKILL does; revive lets connections in again.
type pipeNet struct {
	accept chan net.Conn
	closed chan struct{}

	mu    sync.Mutex
	open  map[net.Conn]struct{} // the daemon's ends
	down  bool
	close sync.Once
}

func newPipeNet() *pipeNet {
	return &pipeNet{accept: make(chan net.Conn), closed: make(chan struct{}), open: map[net.Conn]struct{}{}}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "daemon:80" }

// Accept is the daemon's side.
func (n *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-n.accept:
		return c, nil
	case <-n.closed:
		return nil, net.ErrClosed
	}
}

// Close closes the listener.
func (n *pipeNet) Close() error {
	n.close.Do(func() { close(n.closed) })
	return nil
}

func (n *pipeNet) Addr() net.Addr { return pipeAddr{} }

// dial is the client's side (a Transport's DialContext).
func (n *pipeNet) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	n.mu.Lock()
	if n.down {
		n.mu.Unlock()
		return nil, refused
	}
	c, s := net.Pipe()
	n.open[s] = struct{}{}
	n.mu.Unlock()
	select {
	case n.accept <- &trackedConn{Conn: s, n: n}:
		return c, nil
	case <-ctx.Done():
		s.Close()
		return nil, ctx.Err()
	case <-n.closed:
		s.Close()
		return nil, refused
	}
}

// kill closes every connection and refuses new ones until revive.
func (n *pipeNet) kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down = true
	for c := range n.open {
		c.Close()
	}
}

func (n *pipeNet) revive() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down = false
}

// trackedConn forgets itself when closed.
type trackedConn struct {
	net.Conn
	n *pipeNet
}

func (c *trackedConn) Close() error {
	c.n.mu.Lock()
	delete(c.n.open, c.Conn)
	c.n.mu.Unlock()
	return c.Conn.Close()
}

// bubbleDaemon is a fake daemon serving handler on a bubble's network.
// stop makes it hang as a stopped process does (SIGSTOP, a dead peer
// behind a proxy): connections are taken, requests are read, nothing is
// answered and nothing more is written on open streams, until cont.
type bubbleDaemon struct {
	t   *testing.T
	net *pipeNet
	srv *http.Server
	tr  *http.Transport

	mu      sync.Mutex
	running chan struct{} // closed while running
	gone    chan struct{} // closed by shutdown
	once    sync.Once
}

func startBubbleDaemon(t *testing.T, handler http.HandlerFunc) *bubbleDaemon {
	d := &bubbleDaemon{t: t, net: newPipeNet(), running: make(chan struct{}), gone: make(chan struct{})}
	close(d.running)
	d.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !d.wait(r) {
			return
		}
		handler(w, r)
	}), ErrorLog: discardLog}
	d.tr = &http.Transport{DialContext: d.net.dial, ExpectContinueTimeout: time.Second}
	go d.srv.Serve(d.net)
	// A test that fails leaves no goroutine blocked for synctest to call
	// a deadlock.
	t.Cleanup(d.shutdown)
	return d
}

// within waits for ch, failing t when it takes more than d of the
// bubble's time: a call that hangs fails its test, instead of
// deadlocking the bubble.
func within[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("%s: nothing after %v", what, d)
		panic("unreachable")
	}
}

// client is a Client of the daemon with a transport of its own.
func (d *bubbleDaemon) client() *Client {
	return &Client{BaseURL: "http://daemon", HTTP: &http.Client{Transport: d.tr}}
}

// stop makes the daemon hang; cont lets it go on.
func (d *bubbleDaemon) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.running:
		d.running = make(chan struct{})
	default:
	}
}

func (d *bubbleDaemon) cont() {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.running:
	default:
		close(d.running)
	}
}

// wait returns true once the daemon runs, false when r's client went
// first. Handlers call it before each write of a stream.
func (d *bubbleDaemon) wait(r *http.Request) bool {
	d.mu.Lock()
	running := d.running
	d.mu.Unlock()
	select {
	case <-running:
		return true
	case <-r.Context().Done():
		return false
	}
}

// shutdown closes the daemon and its connections.
func (d *bubbleDaemon) shutdown() {
	d.once.Do(func() { close(d.gone) })
	d.cont()
	d.srv.Close()
	d.net.kill()
	d.tr.CloseIdleConnections()
}

// noClientLeaks fails t with their stacks when goroutines of the bubble
// other than the daemon's and the test's own are left once everything
// has settled. Idle kept-alive connections are closed first: they are the
// transport's pool, not a leak; a connection still in use is.
func (d *bubbleDaemon) noClientLeaks(t *testing.T, what string) {
	t.Helper()
	synctest.Wait()
	d.tr.CloseIdleConnections()
	synctest.Wait()
	if left := bubbleGoroutines(true); left != "" {
		t.Fatalf("goroutines of the client left %s:\n%s", what, left)
	}
}

// bubbleGoroutines returns the stacks of the goroutines of the calling
// goroutine's bubble but the caller and synctest's own; with clientOnly,
// not the daemon's either (its connections and handlers).
func bubbleGoroutines(clientOnly bool) string {
	buf := make([]byte, 4<<20)
	stacks := strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n")
	bubble := ""
	for _, g := range stacks {
		head, _, _ := strings.Cut(g, "\n")
		if strings.Contains(head, "[running") {
			_, bubble, _ = strings.Cut(head, "synctest bubble ")
			bubble = strings.TrimSuffix(bubble, "]:")
		}
	}
	if bubble == "" {
		panic("bubbleGoroutines called outside a bubble")
	}
	var left []string
	for _, g := range stacks {
		head, _, _ := strings.Cut(g, "\n")
		switch {
		case !strings.Contains(head, "synctest bubble "+bubble+"]"),
			strings.Contains(head, "[running"),
			strings.Contains(g, "internal/synctest.Run"),
			strings.Contains(g, "testing/synctest.testingSynctestTest"),
			clientOnly && (strings.Contains(g, "net/http.(*conn).serve") || strings.Contains(g, "net/http.(*Server).Serve") ||
				strings.Contains(g, "(*bubbleDaemon)")):
			continue
		}
		left = append(left, g)
	}
	return strings.Join(left, "\n\n")
}

// noLeaks shuts the daemon down and fails t when any goroutine of the
// bubble is left.
func (d *bubbleDaemon) noLeaks(t *testing.T) {
	t.Helper()
	d.shutdown()
	synctest.Wait()
	if left := bubbleGoroutines(false); left != "" {
		t.Fatalf("goroutines left after the daemon shut down:\n%s", left)
	}
}

// discardLog silences the fake daemon's server log (connections reset on
// purpose).
var discardLog = log.New(io.Discard, "", 0)

// fakeACP is the fake daemon's ACP routes for one instance, "s": the
// list, POSTs answered by post (202 when nil), the event stream (what is
// sent on events, a heartbeat every 15 s as the daemon's), DELETE. gone
// makes the instance unknown (404), as after a restart or a DELETE.
type fakeACP struct {
	d      *bubbleDaemon
	events chan string
	post   func(w http.ResponseWriter, r *http.Request, body string) // nil: 202

	mu      sync.Mutex
	posts   []string
	exists  bool
	gone    bool
	seq     int
	streams int
	deletes int
}

func newFakeACP(t *testing.T, post func(w http.ResponseWriter, r *http.Request, body string)) (*fakeACP, *bubbleDaemon) {
	f := &fakeACP{events: make(chan string, 1000), post: post}
	f.d = startBubbleDaemon(t, f.serve)
	return f, f.d
}

func (f *fakeACP) setGone() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gone, f.exists = true, false
}

func (f *fakeACP) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	exists, gone := f.exists, f.gone
	f.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/acp":
		if exists {
			io.WriteString(w, `{"servers":[{"serverId":"s","agent":"fake","state":"running"}]}`)
		} else {
			io.WriteString(w, `{"servers":[]}`)
		}
	case gone || (!exists && r.Method == http.MethodGet):
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"type":"urn:sandbox-agent:error:session_not_found","title":"Session Not Found","status":404,"detail":"session not found: s","sessionId":"s"}`)
	case r.Method == http.MethodPost:
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.posts = append(f.posts, string(b))
		f.exists = true
		f.mu.Unlock()
		if f.post != nil {
			f.post(w, r, string(b))
			return
		}
		w.WriteHeader(http.StatusAccepted)
	case r.Method == http.MethodGet:
		f.mu.Lock()
		f.streams++
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		heartbeat := time.NewTicker(15 * time.Second)
		defer heartbeat.Stop()
		for {
			var out string
			select {
			case ev := <-f.events:
				if ev == "" { // the daemon ends the stream
					return
				}
				f.mu.Lock()
				f.seq++
				out = fmt.Sprintf("event: message\nid: %d\ndata: %s\n\n", f.seq, ev)
				f.mu.Unlock()
			case <-heartbeat.C:
				out = ": heartbeat\n\n"
			case <-r.Context().Done():
				return
			}
			if !f.d.wait(r) {
				return
			}
			if _, err := io.WriteString(w, out); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	case r.Method == http.MethodDelete:
		f.mu.Lock()
		f.deletes++
		f.exists = false
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}
}

func (f *fakeACP) posted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.posts...)
}

// readAll reads conn in the background; lines returns what it read so far
// once every goroutine has settled, and the error Read ended with (nil
// while it has not).
type readAll struct {
	mu    sync.Mutex
	lines []string
	err   error
	done  chan struct{}
}

func readConn(conn *ACPConn) *readAll {
	ra := &readAll{done: make(chan struct{})}
	go func() {
		defer close(ra.done)
		var buf []byte
		p := make([]byte, 4096)
		for {
			n, err := conn.Read(p)
			buf = append(buf, p[:n]...)
			for {
				i := strings.IndexByte(string(buf), '\n')
				if i < 0 {
					break
				}
				ra.mu.Lock()
				ra.lines = append(ra.lines, string(buf[:i]))
				ra.mu.Unlock()
				buf = buf[i+1:]
			}
			if err != nil {
				ra.mu.Lock()
				ra.err = err
				ra.mu.Unlock()
				return
			}
		}
	}()
	return ra
}

func (ra *readAll) result() ([]string, error) {
	synctest.Wait()
	ra.mu.Lock()
	defer ra.mu.Unlock()
	return append([]string(nil), ra.lines...), ra.err
}

// errorIs fails t unless err is target.
func errorIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("err = %v, want %v", err, target)
	}
}
