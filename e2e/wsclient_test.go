package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	be "encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// wsClient is a minimal WebSocket client (RFC 6455) for black-box tests:
// e2e imports no third-party package, and a test of a reader that stops
// reading needs control over every read anyway. Text frames only, no
// fragmentation on send, pings answered while reading.
type wsClient struct {
	conn net.Conn
	br   *bufio.Reader
	Resp *http.Response
}

// dialWS performs the upgrade handshake. A non-101 answer is returned in
// Resp with a nil error, so tests can check refusals.
func dialWS(t testing.TB, rawURL string, headers ...string) (*wsClient, error) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		return nil, err
	}
	var key [16]byte
	_, _ = rand.Read(key[:])
	req, _ := http.NewRequest(http.MethodGet, "http://"+u.Host+u.RequestURI(), nil)
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Sec-WebSocket-Key", base64.StdEncoding.EncodeToString(key[:]))
	req.Header.Set("Sec-WebSocket-Version", "13")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, err
	}
	c := &wsClient{conn: conn, br: br, Resp: resp}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer conn.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body = io.NopCloser(bytes.NewReader(b))
		return c, nil
	}
	t.Cleanup(func() { conn.Close() })
	return c, nil
}

func (c *wsClient) Close() { c.conn.Close() }

// writeFrame sends one masked frame.
func (c *wsClient) writeFrame(op byte, payload []byte) error {
	hdr := make([]byte, 0, 14)
	hdr = append(hdr, 0x80|op)
	switch n := len(payload); {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n <= 0xffff:
		hdr = append(hdr, 0x80|126)
		hdr = be.BigEndian.AppendUint16(hdr, uint16(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = be.BigEndian.AppendUint64(hdr, uint64(n))
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	hdr = append(hdr, mask[:]...)
	masked := make([]byte, len(payload))
	for i, b := range payload {
		masked[i] = b ^ mask[i%4]
	}
	_ = c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := c.conn.Write(append(hdr, masked...))
	return err
}

// send writes one text frame.
func (c *wsClient) send(t testing.TB, text string) {
	t.Helper()
	if err := c.writeFrame(0x1, []byte(text)); err != nil {
		t.Fatalf("websocket send: %v", err)
	}
}

// errClosed is returned by read for a close frame; closeCode has its code.
type errClosed struct {
	code   int
	reason string
}

func (e *errClosed) Error() string { return fmt.Sprintf("websocket closed: %d %s", e.code, e.reason) }

// read returns the next text or binary message (opcode and payload),
// answering pings; a close frame is an *errClosed.
func (c *wsClient) read(timeout time.Duration) (byte, []byte, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(timeout))
	for {
		var h [2]byte
		if _, err := io.ReadFull(c.br, h[:]); err != nil {
			return 0, nil, err
		}
		op := h[0] & 0x0f
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(c.br, b[:]); err != nil {
				return 0, nil, err
			}
			n = uint64(be.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(c.br, b[:]); err != nil {
				return 0, nil, err
			}
			n = be.BigEndian.Uint64(b[:])
		}
		if h[1]&0x80 != 0 {
			return 0, nil, errors.New("server frame is masked")
		}
		if n > 64<<20 {
			return 0, nil, fmt.Errorf("frame of %d bytes", n)
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(c.br, payload); err != nil {
			return 0, nil, err
		}
		switch op {
		case 0x9: // ping
			if err := c.writeFrame(0xA, payload); err != nil {
				return 0, nil, err
			}
		case 0xA: // pong
		case 0x8:
			e := &errClosed{}
			if len(payload) >= 2 {
				e.code = int(be.BigEndian.Uint16(payload))
				e.reason = string(payload[2:])
			}
			return op, payload, e
		default:
			if h[0]&0x80 == 0 {
				return 0, nil, errors.New("fragmented frames are not handled by this test client")
			}
			return op, payload, nil
		}
	}
}

// readText returns the next text message, failing the test otherwise.
func (c *wsClient) readText(t testing.TB, timeout time.Duration) string {
	t.Helper()
	op, p, err := c.read(timeout)
	if err != nil {
		t.Fatalf("websocket read: %v", err)
	}
	if op != 0x1 {
		t.Fatalf("websocket read: opcode %d, want text", op)
	}
	return string(p)
}
