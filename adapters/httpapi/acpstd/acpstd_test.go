package acpstd

import (
	"context"
	"net/http"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi/internal/route"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

func TestFrameSession(t *testing.T) {
	mk := func(s string) domain.Frame {
		f, err := domain.ParseFrame([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	withSession := mk(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1"}}`)
	noSession := mk(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}`)
	response := mk(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s9"}}`)
	tests := []struct {
		name   string
		header string
		f      domain.Frame
		want   string
		bad    bool
	}{
		{"both agree", "s1", withSession, "s1", false},
		{"disagree", "s2", withSession, "", true},
		{"header missing", "", withSession, "", true},
		{"header only", "s3", noSession, "s3", false},
		{"neither", "", noSession, "", false},
		{"response: header routes it", "s4", response, "s4", false},
		{"response: result.sessionId is not params", "", response, "", false},
		{"header too long", string(make([]byte, maxHeaderID+1)), noSession, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := frameSession(tt.header, tt.f)
			if (err != nil) != tt.bad || got != tt.want {
				t.Fatalf("frameSession(%q) = %q, %v; want %q, error %v", tt.header, got, err, tt.want, tt.bad)
			}
			if err != nil && !domain.IsKind(err, domain.KindInvalidRequest) {
				t.Errorf("error kind: %v", err)
			}
		})
	}
}

func TestAcceptsExactly(t *testing.T) {
	tests := []struct {
		header string
		want   bool
	}{
		{"text/event-stream", true},
		{"application/json, text/event-stream;q=0.5", true},
		{"TEXT/EVENT-STREAM", true},
		{"text/event-stream;q=0", false},
		{"*/*", false},
		{"text/*", false},
		{"", false},
		{"application/json", false},
	}
	for _, tt := range tests {
		if got := acceptsExactly(tt.header, "text/event-stream"); got != tt.want {
			t.Errorf("acceptsExactly(%q) = %v, want %v", tt.header, got, tt.want)
		}
	}
}

func TestParseStdFrame(t *testing.T) {
	for _, body := range []string{"[]", "  [{}]", "\n[1]"} {
		_, err := parseStdFrame([]byte(body))
		if p := route.ProblemFor(context.Background(), err); p.Status != http.StatusNotImplemented || p.Type != "urn:sandbox-agent:error:invalid_request" {
			t.Errorf("parseStdFrame(%q) = %v, want 501", body, err)
		}
	}
	if _, err := parseStdFrame([]byte(`{"jsonrpc":"2.0","method":"x"}`)); err != nil {
		t.Errorf("object refused: %v", err)
	}
	// A request id no answer could carry is refused, and the frame still
	// says it was a request (the WebSocket answers it with the detail).
	for _, id := range []string{`{}`, `[1]`, `true`, `false`} {
		f, err := parseStdFrame([]byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"x"}`))
		if p := route.ProblemFor(context.Background(), err); p.Status != http.StatusBadRequest || f.Kind != domain.FrameRequest {
			t.Errorf("id %s: %v (kind %v), want 400 for a request", id, err, f.Kind)
		}
	}
	for _, body := range []string{`{"id":null,"method":"x"}`, `{"id":-1e9,"method":"x"}`, `{"id":{},"result":1}`, `{"id":true,"error":{}}`} {
		if _, err := parseStdFrame([]byte(body)); err != nil {
			t.Errorf("%s refused: %v", body, err)
		}
	}
}

func TestTextUTF8(t *testing.T) {
	for in, want := range map[string]string{
		`{"s":"é"}`:              `{"s":"é"}`,
		"{\"s\":\"a\xffb\xc3\"}": "{\"s\":\"a\uFFFDb\uFFFD\"}",
		"{\"s\":\"\xe2\x82\"}":   "{\"s\":\"\uFFFD\uFFFD\"}", // a cut 3-byte rune: one U+FFFD a byte, as encoding/json
	} {
		if got := string(textUTF8([]byte(in))); got != want {
			t.Errorf("textUTF8(%q) = %q, want %q", in, got, want)
		}
	}
}
