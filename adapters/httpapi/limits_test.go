package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi/internal/route"
)

// A body that stalls is cut with a 408 problem after the idle timeout; one
// that keeps delivering is not, however long it takes in all.
func TestReadIdle(t *testing.T) {
	h := readIdle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _, err := route.ReadCharged(r, 1<<20, nil)
		if err != nil {
			route.WriteProblem(w, route.ProblemFor(r.Context(), err))
			return
		}
		fmt.Fprintf(w, "%d", len(b))
	}), 200*time.Millisecond)
	srv := httptest.NewServer(h)
	defer srv.Close()
	send := func(t *testing.T, parts ...string) (int, string) {
		t.Helper()
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
		for _, p := range parts {
			time.Sleep(100 * time.Millisecond)
			if _, err := io.WriteString(c, p); err != nil {
				t.Fatal(err)
			}
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, b := send(t, "12345"); st != 408 || !strings.Contains(b, "read-idle-timeout") {
		t.Fatalf("stalled body: %d %s", st, b)
	}
	if st, b := send(t, "12", "34", "56", "78", "90"); st != 200 || b != "10" {
		t.Fatalf("steady body: %d %s", st, b)
	}
}

// HTTP/2 streams being served count against --max-conns as connections
// do: past it a stream is answered 503 with Retry-After before its handler
// runs; HTTP/1.1 requests are counted by their connection only.
func TestConnLimitCountsStreams(t *testing.T) {
	l := NewConnLimit(2)
	if !l.take() { // the connection itself
		t.Fatal("first slot refused")
	}
	entered, release := make(chan struct{}), make(chan struct{})
	ran := 0
	h := l.Streams(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran++
		if r.URL.Path == "/block" {
			close(entered)
			<-release
		}
	}))
	h2 := func(path string) *http.Request {
		r := httptest.NewRequest("GET", path, nil)
		r.ProtoMajor, r.ProtoMinor, r.Proto = 2, 0, "HTTP/2.0"
		return r
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), h2("/block"))
	}()
	<-entered
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, h2("/next"))
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "1" || !strings.Contains(rec.Body.String(), "--max-conns") || ran != 1 {
		t.Fatalf("stream past the limit: %d %v %s (handler ran %d times)", rec.Code, rec.Header(), rec.Body, ran)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/http1", nil))
	if rec.Code != 200 || ran != 2 {
		t.Fatalf("an HTTP/1.1 request was counted: %d", rec.Code)
	}
	close(release)
	<-done
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, h2("/again"))
	if rec.Code != 200 || l.open.Load() != 1 {
		t.Fatalf("after the first stream ended: %d, %d open", rec.Code, l.open.Load())
	}
}

// A connection over --max-conns is answered once its request has begun,
// not before: Go's net/http client takes an answer that comes first for
// an unsolicited one and fails the request without it. In a bubble, over
// a net.Pipe: nothing can be read before the request is written; then the
// 503 can.
func TestRefusedConnAnswersTheRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client, server := net.Pipe()
		defer client.Close()
		done := make(chan struct{})
		go func() { refuseConn(server, connLimitProblem(1), time.Second); close(done) }()
		type answer struct {
			resp *http.Response
			body string
			err  error
		}
		answered := make(chan answer, 1)
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(client), nil)
			var b []byte
			if err == nil {
				b, _ = io.ReadAll(resp.Body)
			}
			answered <- answer{resp, string(b), err}
		}()
		time.Sleep(500 * time.Millisecond)
		select {
		case a := <-answered:
			t.Fatalf("answered before the request: %+v", a)
		default:
		}
		go io.WriteString(client, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
		a := <-answered
		if a.err != nil || a.resp.StatusCode != 503 || a.resp.Header.Get("Retry-After") != "1" || !strings.Contains(a.body, "--max-conns") {
			t.Fatalf("%+v", a)
		}
		client.Close()
		<-done
	})
}
