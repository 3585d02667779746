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

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi/internal/route"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

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
	return route.WithStatus(http.StatusRequestTimeout, domain.Timeout(msg))
}

// ConnLimit is --max-conns: the connections open at once, and the HTTP/2
// streams being served, which count as connections do (a connection
// multiplexing streams must not get past the limit one connection
// holds). A connection past the limit is answered at once with a 503
// problem and closed, rather than left waiting in the kernel's queue: the
// client learns why, and the daemon holds nothing for it. A stream past
// it is answered 503 overloaded with Retry-After before its handler runs:
// it opens no file, reads no body.
type ConnLimit struct {
	max  int64
	open atomic.Int64
}

// NewConnLimit returns a limit of max connections and streams.
func NewConnLimit(max int) *ConnLimit { return &ConnLimit{max: int64(max)} }

// take counts one more, or nothing when the limit is reached.
func (l *ConnLimit) take() bool {
	if l.open.Add(1) <= l.max {
		return true
	}
	l.open.Add(-1)
	return false
}

func (l *ConnLimit) release() { l.open.Add(-1) }

// Listener caps the connections ln accepts.
func (l *ConnLimit) Listener(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, l: l}
}

// Streams counts each HTTP/2 request (a stream) being served against the
// limit, as HTTP/1.1 requests are counted by their connection; past it the
// stream is answered 503.
func (l *ConnLimit) Streams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor < 2 {
			next.ServeHTTP(w, r)
			return
		}
		if !l.take() {
			route.WriteProblem(w, connLimitProblem(l.max).WithHeader("Retry-After", "1"))
			return
		}
		defer l.release()
		next.ServeHTTP(w, r)
	})
}

// LimitListener caps the connections open at once (--max-conns), without
// counting HTTP/2 streams (ConnLimit does both).
func LimitListener(ln net.Listener, max int) net.Listener {
	return NewConnLimit(max).Listener(ln)
}

type limitListener struct {
	net.Listener
	l *ConnLimit
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.l.take() {
			return &limitConn{Conn: c, l: l.l}, nil
		}
		go refuseConn(c, l.l.max)
	}
}

// connLimitProblem is the 503 of --max-conns (a connection or an HTTP/2
// stream past it).
func connLimitProblem(max int64) *Problem {
	msg := "the daemon already has " + strconv.FormatInt(max, 10) + " connections and HTTP/2 streams open (--max-conns)"
	return &Problem{Type: "urn:sandbox-agent:error:overloaded", Title: "Overloaded", Status: 503, Detail: "overloaded: " + msg,
		Details: map[string]any{"message": msg}}
}

// refuseConn writes a 503 to a connection over the cap and closes it after
// a short drain, so the client reads the answer instead of a reset. The
// answer waits for the request to begin (within the same second): an
// HTTP/1.1 client such as Go's net/http takes bytes that come before its
// request for an unsolicited response, drops the connection and fails the
// request without the problem (and an ACP client could not tell it was
// refused before anything was taken).
func refuseConn(c net.Conn, max int64) {
	defer c.Close()
	body := connLimitProblem(max).Body()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	_, _ = c.Read(make([]byte, 1))
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
	l    *ConnLimit
	once sync.Once
}

func (c *limitConn) Close() error {
	c.once.Do(c.l.release)
	return c.Conn.Close()
}
