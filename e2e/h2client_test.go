package e2e

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// h2Conn is a minimal HTTP/2 client over cleartext (prior knowledge) for
// black-box tests of what a hostile client can do on one connection:
// e2e imports no third-party package, and net/http's client keeps to the
// server's limits, which is what an attacker does not do. It sends
// requests with literal (never indexed) header fields, so it needs no
// HPACK state, and reads responses as frames: the status of an answer is
// taken from its problem body (every error of the daemon is a JSON
// problem with a status member).
type h2Conn struct {
	t    testing.TB
	conn net.Conn
	wmu  sync.Mutex

	mu      sync.Mutex
	streams map[uint32]*h2Stream
	changed chan struct{} // closed and replaced on every frame that ends or answers a stream
	goaway  bool
	readErr error
}

// h2Stream is what came back on one stream.
type h2Stream struct {
	headers bool   // a HEADERS frame came (the answer began)
	body    []byte // DATA payloads
	ended   bool   // END_STREAM from the server
	reset   uint32 // the RST_STREAM error code + 1 (0: none)
}

const (
	h2Data         = 0x0
	h2Headers      = 0x1
	h2RSTStream    = 0x3
	h2Settings     = 0x4
	h2Ping         = 0x6
	h2GoAway       = 0x7
	h2WindowUpdate = 0x8

	h2EndStream  = 0x1
	h2Ack        = 0x1
	h2EndHeaders = 0x4
)

// dialH2 opens the connection and starts reading frames.
func dialH2(t testing.TB, addr string) *h2Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &h2Conn{t: t, conn: conn, streams: map[uint32]*h2Stream{}, changed: make(chan struct{})}
	if _, err := io.WriteString(conn, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	c.frame(h2Settings, 0, 0, nil)
	go c.readLoop()
	return c
}

func (c *h2Conn) frame(typ, flags byte, stream uint32, payload []byte) {
	hdr := make([]byte, 9, 9+len(payload))
	hdr[0], hdr[1], hdr[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	hdr[3], hdr[4] = typ, flags
	binary.BigEndian.PutUint32(hdr[5:], stream)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, _ = c.conn.Write(append(hdr, payload...))
}

// hpackLiteral encodes one header field as a literal without indexing,
// with a new name; every string is at most 126 bytes.
func hpackLiteral(name, value string) []byte {
	b := []byte{0x00, byte(len(name))}
	b = append(b, name...)
	b = append(b, byte(len(value)))
	return append(b, value...)
}

// request opens stream id with method and path; body, when not nil, is
// sent as one DATA frame, with END_STREAM when end is set.
func (c *h2Conn) request(id uint32, method, authority, path string, body []byte, end bool) {
	if len(path) > 126 {
		c.t.Fatalf("path too long for this client: %d", len(path))
	}
	var block []byte
	block = append(block, hpackLiteral(":method", method)...)
	block = append(block, hpackLiteral(":scheme", "http")...)
	block = append(block, hpackLiteral(":authority", authority)...)
	block = append(block, hpackLiteral(":path", path)...)
	flags := byte(h2EndHeaders)
	if body == nil && end {
		flags |= h2EndStream
	}
	c.mu.Lock()
	c.streams[id] = &h2Stream{}
	c.mu.Unlock()
	c.frame(h2Headers, flags, id, block)
	if body != nil {
		f := byte(0)
		if end {
			f = h2EndStream
		}
		c.frame(h2Data, f, id, body)
	}
}

func (c *h2Conn) readLoop() {
	br := bufio.NewReader(c.conn)
	hdr := make([]byte, 9)
	for {
		if _, err := io.ReadFull(br, hdr); err != nil {
			c.fail(err)
			return
		}
		n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		typ, flags := hdr[3], hdr[4]
		id := binary.BigEndian.Uint32(hdr[5:]) & 0x7fffffff
		payload := make([]byte, n)
		if _, err := io.ReadFull(br, payload); err != nil {
			c.fail(err)
			return
		}
		switch typ {
		case h2Settings:
			if flags&h2Ack == 0 {
				c.frame(h2Settings, h2Ack, 0, nil)
			}
		case h2Ping:
			if flags&h2Ack == 0 {
				c.frame(h2Ping, h2Ack, 0, payload)
			}
		case h2Data:
			if n > 0 { // give the window back, so answers never stall
				var inc [4]byte
				binary.BigEndian.PutUint32(inc[:], uint32(n))
				c.frame(h2WindowUpdate, 0, 0, inc[:])
			}
			c.update(id, func(s *h2Stream) {
				s.body = append(s.body, payload...)
				s.ended = flags&h2EndStream != 0
			})
		case h2Headers:
			c.update(id, func(s *h2Stream) {
				s.headers = true
				s.ended = flags&h2EndStream != 0
			})
		case h2RSTStream:
			code := binary.BigEndian.Uint32(payload)
			c.update(id, func(s *h2Stream) { s.reset = code + 1 })
		case h2GoAway:
			c.mu.Lock()
			c.goaway = true
			c.mu.Unlock()
		}
	}
}

func (c *h2Conn) fail(err error) {
	c.mu.Lock()
	c.readErr = err
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func (c *h2Conn) update(id uint32, fn func(*h2Stream)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.streams[id]
	if s == nil {
		s = &h2Stream{}
		c.streams[id] = s
	}
	fn(s)
	close(c.changed)
	c.changed = make(chan struct{})
}

// snapshot copies the streams' state.
func (c *h2Conn) snapshot() map[uint32]h2Stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[uint32]h2Stream, len(c.streams))
	for id, s := range c.streams {
		out[id] = *s
	}
	return out
}

// wait blocks until cond holds over the streams, or limit passes.
func (c *h2Conn) wait(limit time.Duration, cond func(map[uint32]h2Stream) bool) bool {
	deadline := time.After(limit)
	for {
		c.mu.Lock()
		ch, err := c.changed, c.readErr
		c.mu.Unlock()
		if cond(c.snapshot()) {
			return true
		}
		if err != nil {
			return false
		}
		select {
		case <-ch:
		case <-deadline:
			return false
		}
	}
}

// status is the status an answered stream carries in its problem body, or
// 0 (no body, or not a problem).
func (s h2Stream) status() int {
	var st int
	for i := 0; i+9 < len(s.body); i++ {
		if string(s.body[i:i+9]) == `"status":` {
			fmt.Sscan(string(s.body[i+9:]), &st)
			return st
		}
	}
	return 0
}
