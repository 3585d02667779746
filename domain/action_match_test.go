package domain

import "testing"

// Match splits by hand (it runs inside wasm guests); these are the
// patterns the docs promise, and the edges of the split.
func TestActionMatch(t *testing.T) {
	tests := []struct {
		action  Action
		pattern string
		want    bool
	}{
		{"acp.send", "acp.send", true},
		{"acp.send", "*", true},
		{"acp.send", "acp.*", true},
		{"acp.send", "*.send", true},
		{"acp.send", "*.*", true},
		{"acp.send", "*.read", false},
		{"acp.send", "fs.*", false},
		{"acp.send", "acp.sen", false},
		{"acp.send", "acp", false},
		{"acp.send", "", false},
		{"acp", "acp", false}, // a pattern without a dot only matches as "*"
		{"acp", "acp.*", true},
		{"acp", "*.read", false},
		{"fs.read.x", "fs.read.x", true},
		{"fs.read.x", "*.read.x", true},
		{"fs.read.x", "*.read", false},
		{"", "*.*", true},
		{"", "x.*", false},
	}
	for _, tt := range tests {
		if got := tt.action.Match(tt.pattern); got != tt.want {
			t.Errorf("Action(%q).Match(%q) = %v, want %v", tt.action, tt.pattern, got, tt.want)
		}
	}
}
