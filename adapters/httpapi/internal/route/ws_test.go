package route

import (
	"net/http"
	"slices"
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
