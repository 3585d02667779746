package httpclient

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// acpPoster sends one ACP connection's POSTs over HTTP/1.1 connections of
// its own, kept alive, writing each request on the goroutine that sends it.
//
// Why not net/http's Transport: it hands every request to a writer
// goroutine of the connection and every answer back from a reader
// goroutine, and builds each request through URL parsing, header maps and
// its generic encoder. Each hand-off wakes another thread; on the 2-CPU
// machines sandboxes run on, those wake-ups and that work were the largest
// part of what the stdio bridge added to a round trip (see
// BenchmarkBridgeRoundTrip). Here the sender writes the request, a fixed
// header block and the message in one writev, and the message reaches the
// daemon with no hand-off at all; answers are parsed by http.ReadResponse.
//
// It is used only where net/http would send exactly this: a plain http://
// endpoint, no proxy from the environment, no custom Client.HTTP, a token
// that is a valid header value. Anything else (https, proxies, a caller's
// transport) goes through net/http.
type acpPoster struct {
	addr   string // host:port to dial
	dialer net.Dialer
	// header is every header line but Content-Length, each ending in
	// CRLF: Host, User-Agent, Content-Type, Accept, Authorization.
	header string

	mu     sync.Mutex
	idle   []*postConn // most recently used last
	closed bool
}

// postConn is one kept-alive connection; it belongs to one POST at a time.
type postConn struct {
	conn   net.Conn
	br     *bufio.Reader
	head   []byte    // the request line and header being written
	reused bool      // it carried an earlier request
	idleAt time.Time // when it was put back in the pool
}

const (
	// postIdleTimeout retires pooled connections well before the daemon's
	// own idle timeout (120 s) closes them under a request.
	postIdleTimeout = 30 * time.Second
	maxIdlePosts    = 4 // one connection per POST in flight; a few stay warm
)

// newACPPoster returns a poster for c, or nil when c's requests need
// net/http (see acpPoster).
func newACPPoster(c *Client) *acpPoster {
	if c.HTTP != nil {
		return nil
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil
	}
	if p, err := http.ProxyFromEnvironment(&http.Request{URL: u}); err != nil || p != nil {
		return nil
	}
	for _, b := range []byte(u.Host) {
		if b <= ' ' || b >= 0x7f || b == '%' {
			return nil // net/http rewrites it (IDNA, an IPv6 zone) or refuses it
		}
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	header := "Host: " + u.Host + "\r\nUser-Agent: Go-http-client/1.1\r\nContent-Type: application/json\r\nAccept: application/json\r\n"
	if c.Token != "" {
		for _, b := range []byte(c.Token) {
			if b < ' ' || b == 0x7f {
				return nil // net/http refuses it with a clear error
			}
		}
		header += "Authorization: Bearer " + c.Token + "\r\n"
	}
	return &acpPoster{addr: addr, header: header, dialer: net.Dialer{Timeout: 10 * time.Second, KeepAlive: 15 * time.Second}}
}

// requestURI is the request target net/http would send for path under
// base (base's own path prefix included).
func requestURI(base, path string) string {
	u, err := url.Parse(strings.TrimRight(base, "/") + path)
	if err != nil {
		return path
	}
	return u.RequestURI()
}

// get takes a pooled connection or dials a new one.
func (p *acpPoster) get(ctx context.Context) (*postConn, error) {
	p.mu.Lock()
	for len(p.idle) > 0 {
		pc := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if time.Since(pc.idleAt) < postIdleTimeout {
			p.mu.Unlock()
			return pc, nil
		}
		_ = pc.conn.Close()
	}
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	conn, err := p.dialer.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	return &postConn{conn: conn, br: bufio.NewReaderSize(conn, 4096)}, nil
}

// put returns a connection whose answer was read to its end.
func (p *acpPoster) put(pc *postConn) {
	pc.reused, pc.idleAt = true, time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle) >= maxIdlePosts {
		_ = pc.conn.Close()
		return
	}
	p.idle = append(p.idle, pc)
}

// close closes the pooled connections; connections in use are closed by
// their POST's context.
func (p *acpPoster) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, pc := range p.idle {
		_ = pc.conn.Close()
	}
	p.idle = nil
}

// write POSTs body to target (path and query, escaped) on a pooled
// connection: the request line, the header and the body in one writev,
// headers and body in one segment when they fit. The connection is then
// owned by the caller, who reads the answer with read.
func (p *acpPoster) write(ctx context.Context, target string, body []byte) (*postConn, error) {
	pc, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	pc.head = append(pc.head[:0], "POST "...)
	pc.head = append(pc.head, target...)
	pc.head = append(pc.head, " HTTP/1.1\r\n"...)
	pc.head = append(pc.head, p.header...)
	pc.head = append(pc.head, "Content-Length: "...)
	pc.head = strconv.AppendInt(pc.head, int64(len(body)), 10)
	pc.head = append(pc.head, "\r\n\r\n"...)
	stop := context.AfterFunc(ctx, func() { _ = pc.conn.SetDeadline(time.Unix(1, 0)) })
	bufs := net.Buffers{pc.head, body}
	_, err = bufs.WriteTo(pc.conn)
	if !stop() && err == nil {
		err = ctx.Err() // the deadline may already be set
	}
	if err != nil {
		_ = pc.conn.Close()
		if pc.reused && ctx.Err() == nil && (errors.Is(err, net.ErrClosed) || isConnReset(err)) {
			return nil, errStaleConn
		}
		return nil, err
	}
	return pc, nil
}

// errStaleConn: a reused connection ended before any answer, the way a
// connection the server closed while it sat idle does.
var errStaleConn = errors.New("kept-alive connection closed by the daemon")

// postRequest is what http.ReadResponse is told the answers answer.
var postRequest = &http.Request{Method: http.MethodPost}

// read reads the answer to the POST written on pc: its status and up to
// limit bytes of body (more is cut: body nil, cut true). A non-2xx answer
// is a *Problem. The connection goes back to the pool when the answer was
// read whole.
func (p *acpPoster) read(ctx context.Context, pc *postConn, limit int64) (status int, body []byte, cut bool, err error) {
	stop := context.AfterFunc(ctx, func() { _ = pc.conn.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (int, []byte, bool, error) {
		stop()
		_ = pc.conn.Close()
		if ctx.Err() != nil {
			return 0, nil, false, ctx.Err()
		}
		return 0, nil, false, err
	}
	if _, err := pc.br.Peek(1); err != nil {
		if pc.reused && ctx.Err() == nil && (errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isConnReset(err)) {
			// Not a byte of answer on a kept-alive connection: the
			// daemon closed it while it sat idle (or took the request
			// and died, which a retry finds out).
			err = errStaleConn
		}
		return fail(err)
	}
	resp, err := http.ReadResponse(pc.br, postRequest)
	for err == nil && resp.StatusCode/100 == 1 && resp.StatusCode != http.StatusSwitchingProtocols {
		// Informational answers come before the real one (net/http skips
		// them too); they have no body.
		resp, err = http.ReadResponse(pc.br, postRequest)
	}
	if err != nil {
		return fail(err)
	}
	if resp.StatusCode/100 != 2 {
		limit = 1 << 20 // as Client.finish reads problems
	}
	body, err = io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err == nil && int64(len(body)) > limit {
		body, cut = nil, true
	}
	reusable := err == nil && !cut && !resp.Close
	if reusable {
		// The body was read up to its end, not just up to its length:
		// that sees a chunked body's terminator too.
		var one [1]byte
		n, rerr := resp.Body.Read(one[:])
		// Nothing may follow the answer: the next one is the next POST's.
		reusable = n == 0 && rerr == io.EOF && pc.br.Buffered() == 0
	}
	_ = resp.Body.Close()
	if !stop() || ctx.Err() != nil {
		_ = pc.conn.Close() // its deadline may be set
		return 0, nil, false, context.Cause(ctx)
	}
	if reusable {
		p.put(pc)
	} else {
		_ = pc.conn.Close()
	}
	if resp.StatusCode/100 != 2 {
		// What came of a problem is the problem, as Client.finish reads
		// it: the daemon took the request.
		return resp.StatusCode, nil, false, parseProblem(resp.StatusCode, body)
	}
	if err != nil {
		return resp.StatusCode, nil, false, err
	}
	return resp.StatusCode, body, cut, nil
}

func isConnReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
