package route

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestSameOrigin: a WebSocket upgrade from another origin is refused unless
// the CORS settings allow that origin.
func TestSameOrigin(t *testing.T) {
	tests := []struct {
		origin, host string
		allowed      []string
		want         bool
	}{
		{"", "127.0.0.1:2468", nil, true},
		{"http://127.0.0.1:2468", "127.0.0.1:2468", nil, true},
		{"http://LOCALHOST:2468", "localhost:2468", nil, true},
		{"https://evil.example", "127.0.0.1:2468", nil, false},
		{"http://127.0.0.1:9999", "127.0.0.1:2468", nil, false},
		{"https://app.example", "127.0.0.1:2468", []string{"https://app.example"}, true},
		{"null", "127.0.0.1:2468", nil, false},
	}
	for _, tt := range tests {
		r, _ := http.NewRequest(http.MethodGet, "http://"+tt.host+"/acp/mock", nil)
		r.Host = tt.host
		if tt.origin != "" {
			r.Header.Set("Origin", tt.origin)
		}
		allowed := func(o string) bool { return slices.Contains(tt.allowed, o) }
		if got := SameOrigin(r, allowed); got != tt.want {
			t.Errorf("origin %q on host %q: %v, want %v", tt.origin, tt.host, got, tt.want)
		}
	}
}

// CheckHandshake refuses, as a problem, every upgrade the WebSocket
// library's Accept would refuse in text/plain, and lets a good one by.
func TestCheckHandshake(t *testing.T) {
	good := func() *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		r.Header.Set("Connection", "keep-alive, Upgrade")
		r.Header.Set("Upgrade", "websocket")
		r.Header.Set("Sec-WebSocket-Version", "13")
		r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		return r
	}
	if err := CheckHandshake(good()); err != nil {
		t.Fatalf("a good handshake: %v", err)
	}
	for _, c := range []struct {
		name   string
		change func(r *http.Request)
		status int
		want   string
	}{
		{"HTTP/2", func(r *http.Request) { r.ProtoMajor = 2 }, 400, "HTTP/1.1"},
		{"HEAD", func(r *http.Request) { r.Method = http.MethodHead }, 405, "must be a GET"},
		{"POST", func(r *http.Request) { r.Method = http.MethodPost }, 405, "must be a GET"},
		{"no Connection: Upgrade", func(r *http.Request) { r.Header.Set("Connection", "keep-alive") }, 400, "Connection: Upgrade"},
		{"no Upgrade", func(r *http.Request) { r.Header.Del("Upgrade") }, 400, "Upgrade: websocket"},
		{"Upgrade: h2c", func(r *http.Request) { r.Header.Set("Upgrade", "h2c") }, 400, "Upgrade: websocket"},
		{"version 8", func(r *http.Request) { r.Header.Set("Sec-WebSocket-Version", "8") }, 400, `Sec-WebSocket-Version "8"`},
		{"no version", func(r *http.Request) { r.Header.Del("Sec-WebSocket-Version") }, 400, "Sec-WebSocket-Version"},
		{"no key", func(r *http.Request) { r.Header.Del("Sec-WebSocket-Key") }, 400, "exactly one Sec-WebSocket-Key"},
		{"two keys", func(r *http.Request) { r.Header.Add("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==") }, 400, "exactly one"},
		{"key not base64", func(r *http.Request) { r.Header.Set("Sec-WebSocket-Key", "not base64!") }, 400, "16 bytes in base64"},
		{"key of 15 bytes", func(r *http.Request) { r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25j") }, 400, "16 bytes"},
	} {
		r := good()
		c.change(r)
		err := CheckHandshake(r)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		p := ProblemFor(context.Background(), err)
		if p.Status != c.status || !strings.Contains(p.Detail, c.want) {
			t.Errorf("%s: %d %q, want %d with %q", c.name, p.Status, p.Detail, c.status, c.want)
		}
	}
}
