package domain

import (
	"strings"
	"testing"
)

// TestBearerToken: the one reading of "Authorization: Bearer <token>",
// as the reference server reads it (lower-case schemes and two spaces
// are 401 there too).
func TestBearerToken(t *testing.T) {
	for _, tt := range []struct {
		in, tok string
		ok      bool
	}{
		{"Bearer tok", "tok", true},
		{"Bearer tok  ", "tok", true},    // trailing optional whitespace
		{" \tBearer tok\t", "tok", true}, // around the field value
		{"Bearer tok,x", "tok,x", true},  // a comma is a token character here
		{"Bearer t\u00e9k", "t\u00e9k", true},
		{"bearer tok", "", false},
		{"BEARER tok", "", false},
		{"Bearer  tok", "", false},
		{"Bearer\ttok", "", false},
		{"Bearer tok, Bearer other", "", false},
		{"Bearer a b", "", false},
		{"Bearer tok\x00", "", false},
		{"Bearer to\x7fk", "", false},
		{"Bearer to\rk", "", false},
		{"Bearer ", "", false},
		{"Bearer", "", false},
		{"Bearertok", "", false},
		{"Basic dG9rOg==", "", false},
		{"Token tok", "", false},
		{"tok", "", false},
		{"", "", false},
		{"Bearer\u00a0tok", "", false},
		{"Bear\u0435r tok", "", false}, // a Cyrillic e
	} {
		tok, ok := BearerToken(tt.in)
		if tok != tt.tok || ok != tt.ok {
			t.Errorf("BearerToken(%q) = %q, %v; want %q, %v", tt.in, tok, ok, tt.tok, tt.ok)
		}
	}
}

// FuzzBearerToken: a token found is non-empty, holds no space or control
// character, ends the value, and is found again in "Bearer <token>"; a
// value is read only when it is that form, give or take whitespace around.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer tok", "bearer  tok", "Bearer\ttok", "Bearer a b", "Basic x", "Bearer \x00", " Bearer t "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		tok, ok := BearerToken(v)
		if !ok {
			if tok != "" {
				t.Fatalf("%q: refused but returned %q", v, tok)
			}
			return
		}
		if tok == "" || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			t.Fatalf("%q: token %q is empty or holds a space or control character", v, tok)
		}
		if trimOWS(v) != "Bearer "+tok {
			t.Fatalf("%q: read as %q, which is not the whole value", v, tok)
		}
		if again, ok := BearerToken("Bearer " + tok); !ok || again != tok {
			t.Fatalf("%q: token %q read back as %q, %v", v, tok, again, ok)
		}
	})
}
