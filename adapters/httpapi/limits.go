package httpapi

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// inflight is the daemon-wide budget of ACP request bodies held in memory
// (--inflight-bytes). Without it, many large POSTs to an agent that reads
// nothing each hold their whole body while they wait for its stdin, and
// the daemon's memory is whatever the clients choose.
type inflight struct {
	max  int64
	used atomic.Int64
}

// take charges n bytes, or charges nothing and reports false when that
// would pass the budget.
func (b *inflight) take(n int64) bool {
	if b.used.Add(n) > b.max {
		b.used.Add(-n)
		return false
	}
	return true
}

func (b *inflight) give(n int64) {
	if b != nil && n != 0 {
		b.used.Add(-n)
	}
}

func (b *inflight) overloaded() error {
	msg := "request bodies waiting for agents already hold " + strconv.FormatInt(b.max, 10) + " bytes (--inflight-bytes); retry later"
	return domain.Overloaded(msg, b.max)
}

// readIdle cuts request bodies that deliver nothing for timeout: each Read
// of the body runs under a read deadline on the connection, which is
// cleared again when the Read returns, so a handler that has its body and
// waits (a synchronous ACP request, a stream) is never cut. A body cut this
// way fails with a 408 problem. The server's ReadHeaderTimeout covers the
// headers, its IdleTimeout connections between requests.
func readIdle(next http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			// On a shallow copy: net/http looks at the original request's
			// Body after the handler to decide whether the connection can
			// be reused (an unread remainder past 256 KiB closes it); a
			// wrapper there would hide that, and the rest of a refused
			// body would be read as the next request.
			body := &idleBody{ReadCloser: r.Body, w: w, rc: http.NewResponseController(w), timeout: timeout, http1: r.ProtoMajor == 1}
			r = r.WithContext(r.Context())
			r.Body = body
		}
		next.ServeHTTP(w, r)
	})
}

type idleBody struct {
	io.ReadCloser
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	http1   bool // HTTP/2 has no Connection header; the stream alone ends
	cut     bool
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.cut {
		return 0, bodyIdle(b.timeout)
	}
	armed := b.rc.SetReadDeadline(time.Now().Add(b.timeout)) == nil
	n, err := b.ReadCloser.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		// The deadline stays in the past: net/http reads what is left of
		// a small body before it writes the answer, and that read must
		// fail at once too. The connection is not reused.
		b.cut = true
		if b.http1 {
			b.w.Header().Set("Connection", "close")
		}
		return n, bodyIdle(b.timeout)
	}
	if armed {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// bodyIdle is the 408 of a body cut by the read idle timeout.
func bodyIdle(timeout time.Duration) error {
	msg := "the request body delivered nothing for " + timeout.String() + " (--read-idle-timeout)"
	return withStatus(http.StatusRequestTimeout, domain.Timeout(msg))
}

// LimitListener caps the connections open at once (--max-conns). A
// connection past the cap is answered at once with a 503 problem and
// closed, rather than left waiting in the kernel's queue: the client learns
// why, and the daemon holds nothing for it.
func LimitListener(ln net.Listener, max int) net.Listener {
	return &limitListener{Listener: ln, max: int64(max)}
}

type limitListener struct {
	net.Listener
	max  int64
	open atomic.Int64
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		go refuseConn(c, l.max)
	}
}

// refuseConn writes a 503 to a connection over the cap and closes it after
// a short drain, so the client reads the answer instead of a reset.
func refuseConn(c net.Conn, max int64) {
	defer c.Close()
	msg := "the daemon already has " + strconv.FormatInt(max, 10) + " connections open (--max-conns)"
	body := (&Problem{Type: "urn:sandbox-agent:error:overloaded", Title: "Overloaded", Status: 503, Detail: "overloaded: " + msg,
		Details: map[string]any{"message": msg}}).body()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	_, err := c.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + string(body)))
	if err != nil {
		return
	}
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}

type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}
