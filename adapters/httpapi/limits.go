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
	"syscall"
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

// Listener caps the connections ln accepts. It also keeps one descriptor
// in reserve (an open /dev/null) for when the process runs out of them:
// accept then fails with EMFILE, and the connection would wait in the
// kernel's queue, its client hanging, until some descriptor is closed.
// Instead the reserve is closed, the connection accepted in its place,
// answered 503 overloaded naming what ran out, and closed; then the
// reserve is opened again (once a descriptor is free: until then accept
// fails as before and net/http retries it with a growing pause, up to a
// second, so a full table never spins a CPU).
func (l *ConnLimit) Listener(ln net.Listener) net.Listener {
	ll := &limitListener{Listener: ln, l: l, nofile: openFileLimit()}
	ll.reserve.restore()
	return ll
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
	l       *ConnLimit
	reserve fdReserve
	nofile  int // the open-file limit, for the 503's message (0: unknown)
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !outOfFDs(err) {
				return nil, err
			}
			// The reserve makes room for this one connection, which is
			// told why; without a reserve (not reopened yet) the error
			// goes to net/http, which retries after a pause.
			if !l.reserve.release() {
				return nil, err
			}
			c, err = l.Listener.Accept()
			if err != nil {
				l.reserve.restore()
				return nil, err
			}
			go func() {
				refuseConn(c, fdProblem(l.nofile), reserveLinger)
				l.reserve.restore()
			}()
			continue
		}
		if l.l.take() {
			return &limitConn{Conn: c, l: l.l}, nil
		}
		go refuseConn(c, connLimitProblem(l.l.max), time.Second)
	}
}

// Close closes the listener and the reserve.
func (l *limitListener) Close() error {
	l.reserve.mu.Lock()
	if l.reserve.f != nil {
		l.reserve.f.Close()
		l.reserve.f = nil
	}
	l.reserve.closed = true
	l.reserve.mu.Unlock()
	return l.Listener.Close()
}

// reserveLinger is how long a connection answered on the descriptor
// reserve is drained before it is closed: the request it sent is read
// (closing with unread bytes would reset the connection, and the client
// could lose the answer), and a client that reads the answer and closes
// ends it sooner.
const reserveLinger = 100 * time.Millisecond

// outOfFDs reports whether err is the process's (EMFILE) or the system's
// (ENFILE) descriptor table being full.
func outOfFDs(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// fdReserve is the descriptor limitListener keeps for answering a
// connection when the table is full. Accept runs on one goroutine, the
// refusal that gives the reserve back on another: hence the lock.
type fdReserve struct {
	mu     sync.Mutex
	f      *os.File
	closed bool // the listener is closed: never reopened
}

// release closes the reserve, reporting whether there was one.
func (r *fdReserve) release() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil && !r.closed {
		r.f = r.reopen()
	}
	if r.f == nil {
		return false
	}
	r.f.Close()
	r.f = nil
	return true
}

// restore opens the reserve again if it is not open (it stays closed
// while the table is still full).
func (r *fdReserve) restore() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil && !r.closed {
		r.f = r.reopen()
	}
}

func (r *fdReserve) reopen() *os.File {
	f, err := os.Open(os.DevNull)
	if err != nil {
		return nil
	}
	return f
}

// openFileLimit is the process's open-file limit (0 when unknown).
func openFileLimit() int {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) != nil || rl.Cur > 1<<31 {
		return 0
	}
	return int(rl.Cur)
}

// fdProblem is the 503 of a connection accepted on the reserve: the
// daemon is out of file descriptors.
func fdProblem(nofile int) *Problem {
	msg := "the daemon is out of file descriptors"
	if nofile > 0 {
		msg += " (its open-file limit is " + strconv.Itoa(nofile) + ")"
	}
	msg += "; retry later, or close event streams, processes or agents"
	p := &Problem{Type: "urn:sandbox-agent:error:overloaded", Title: "Overloaded", Status: 503, Detail: "overloaded: " + msg,
		Details: map[string]any{"message": msg, "resource": domain.ResourceFileDescriptors}}
	if nofile > 0 {
		p.Details["limit"] = nofile
	}
	return p
}

// connLimitProblem is the 503 of --max-conns (a connection or an HTTP/2
// stream past it).
func connLimitProblem(max int64) *Problem {
	msg := "the daemon already has " + strconv.FormatInt(max, 10) + " connections and HTTP/2 streams open (--max-conns)"
	return &Problem{Type: "urn:sandbox-agent:error:overloaded", Title: "Overloaded", Status: 503, Detail: "overloaded: " + msg,
		Details: map[string]any{"message": msg}}
}

// refuseConn writes a 503 problem to a connection the daemon will not
// serve (over the cap, or accepted on the descriptor reserve) and closes
// it after a short drain, so the client reads the answer instead of a
// reset. The answer waits for the request to begin (within linger): an
// HTTP/1.1 client such as Go's net/http takes bytes that come before its
// request for an unsolicited response, drops the connection and fails the
// request without the problem (and an ACP client could not tell it was
// refused before anything was taken).
//
// linger bounds the whole: a second for a connection over the cap (each
// has a goroutine of its own); less for one accepted on the descriptor
// reserve, which holds the reserve until it is closed, so the next
// queued connection waits for it.
func refuseConn(c net.Conn, p *Problem, linger time.Duration) {
	defer c.Close()
	body := p.Body()
	_ = c.SetDeadline(time.Now().Add(linger))
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
