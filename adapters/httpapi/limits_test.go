package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A body that stalls is cut with a 408 problem after the idle timeout; one
// that keeps delivering is not, however long it takes in all.
func TestReadIdle(t *testing.T) {
	h := readIdle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _, err := readCharged(r, 1<<20, nil)
		if err != nil {
			writeProblem(w, problemFor(r.Context(), err))
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

// Bodies are charged to the in-flight budget as their buffer grows, before
// the bytes are read into it: a body is refused as soon as it outgrows what
// is left, an announced length costs nothing until bytes come, and what was
// charged is reported to be given back.
func TestInflightBudget(t *testing.T) {
	b := &inflight{max: 64 << 10}
	req := func(body string, length int64) *http.Request {
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		r.ContentLength = length
		return r
	}
	if _, charged, err := readCharged(req(strings.Repeat("x", 80000), 80000), 1<<20, b); !isKind(err, "overloaded") || charged != 64<<10 {
		t.Fatalf("declared 80000: charged %d, %v", charged, err)
	} else {
		b.give(charged)
	}
	// An announced length is not charged until bytes come.
	if _, charged, err := readCharged(req("{}", 1<<20), 1<<20, b); err != nil || charged != 16<<10 {
		t.Fatalf("declared 1 MiB, sent 2 bytes: charged %d, %v", charged, err)
	} else {
		b.give(charged)
	}
	body, charged, err := readCharged(req(strings.Repeat("x", 60000), 60000), 1<<20, b)
	if err != nil || len(body) != 60000 || charged != 60001 || b.used.Load() != 60001 {
		t.Fatalf("declared 60000: %d bytes, charged %d, used %d, %v", len(body), charged, b.used.Load(), err)
	}
	_, charged2, err := readCharged(req(strings.Repeat("x", 6000), -1), 1<<20, b)
	if !isKind(err, "overloaded") || charged2 != 4096 || b.used.Load() != 60001+charged2 {
		t.Fatalf("chunked 6000 with 5535 left: charged %d, used %d, %v", charged2, b.used.Load(), err)
	}
	b.give(charged)
	b.give(charged2)
	if b.used.Load() != 0 {
		t.Fatalf("used %d after giving back", b.used.Load())
	}
}

func isKind(err error, kind string) bool {
	p := problemFor(context.Background(), err)
	return p.Type == "urn:sandbox-agent:error:"+kind
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
