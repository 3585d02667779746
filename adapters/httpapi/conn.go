package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"strconv"
	"strings"
)

// Some requests never reach a handler: net/http answers them itself,
// straight on the connection and in text/plain, when a request's header is
// over Server.MaxHeaderBytes (431) or cannot be parsed (400, 501). The
// contract says every error is a problem, so WrapListener's connections
// recognise those canned answers (a status line, then exactly net/http's
// error headers; a handler's response always carries a Date header, so it
// can never look like one) and write the same status as a problem+json
// body instead.

// errorHeaders is the header block of net/http's canned answers.
const errorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// DefaultMaxHeaderBytes is the header limit the daemon sets on its server
// (net/http accepts 4 KiB more before answering 431).
const DefaultMaxHeaderBytes = 1 << 20

// WrapListener returns ln with connections whose canned net/http error
// answers are rewritten as problems. maxHeaderBytes is the server's
// MaxHeaderBytes, reported in a 431's details.limitBytes.
func WrapListener(ln net.Listener, maxHeaderBytes int) net.Listener {
	return &problemListener{Listener: ln, limit: maxHeaderBytes}
}

type problemListener struct {
	net.Listener
	limit int
}

func (l *problemListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &problemConn{Conn: c, limit: l.limit}, nil
}

// problemConn keeps what net/http looks for on a *net.TCPConn: ReadFrom
// (sendfile) and CloseWrite.
type problemConn struct {
	net.Conn
	limit int
}

func (c *problemConn) Write(b []byte) (int, error) {
	if p, ok := cannedProblem(b, c.limit); ok {
		_, err := c.Conn.Write(p)
		return len(b), err
	}
	return c.Conn.Write(b)
}

func (c *problemConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

func (c *problemConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// cannedProblem turns one of net/http's canned answers into a whole
// problem+json response; ok is false for anything else.
func cannedProblem(b []byte, limit int) ([]byte, bool) {
	const proto = "HTTP/1.1 "
	if len(b) > 4096 || !bytes.HasPrefix(b, []byte(proto)) {
		return nil, false
	}
	i := bytes.Index(b, []byte(errorHeaders))
	if i < 0 || bytes.IndexByte(b[:i], '\n') >= 0 {
		return nil, false
	}
	statusLine := string(b[len(proto):i])
	code, reason, _ := strings.Cut(statusLine, " ")
	status, err := strconv.Atoi(code)
	if err != nil || status < 400 || status > 599 {
		return nil, false
	}
	text := strings.TrimPrefix(string(b[i+len(errorHeaders):]), statusLine)
	text = strings.TrimPrefix(text, ": ")
	p := Problem{Type: "urn:sandbox-agent:error:invalid_request", Title: "Invalid Request", Status: status,
		Detail: "invalid request: " + strings.ToLower(reason)}
	if text != "" {
		p.Detail += ": " + text
	}
	if status == 431 {
		p.Detail = "invalid request: request header fields too large (limit " + strconv.Itoa(limit) + " bytes)"
		p.Details = map[string]any{"limitBytes": limit}
	}
	body, _ := json.Marshal(p)
	out := make([]byte, 0, 160+len(body))
	out = append(out, proto+statusLine+"\r\nContent-Type: application/problem+json\r\nContent-Length: "...)
	out = strconv.AppendInt(out, int64(len(body)), 10)
	out = append(out, "\r\nConnection: close\r\n\r\n"...)
	return append(out, body...), true
}
