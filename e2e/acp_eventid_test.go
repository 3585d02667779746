package e2e

import (
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// eventIDHeader is the wire name, spelled out: e2e tests the binary as a
// client sees it.
const eventIDHeader = "Sandbox-Agent-Event-Id"

// TestPostAnswerNamesItsEvent: a synchronous POST's 200 answer names its
// response's event on the stream (Sandbox-Agent-Event-Id), the event that
// carries the same bytes; a notification's 202 names none.
func TestPostAnswerNamesItsEvent(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	st, h, body := d.Do("POST", "/v1/acp/ev?agent=mock", []byte(initMsg), "Content-Type", "application/json")
	if st != 200 {
		t.Fatalf("initialize: %d %s", st, body)
	}
	id := h.Get(eventIDHeader)
	if id == "" {
		t.Fatalf("no %s header: %v", eventIDHeader, h)
	}
	s := d.Stream("/v1/acp/ev")
	defer s.Close()
	for {
		ev := s.NextWithin(t, 5*time.Second)
		if ev.ID != id {
			continue
		}
		if ev.Data != string(body) {
			t.Fatalf("event %s is %q, the answer %q", id, ev.Data, body)
		}
		break
	}
	st, h, _ = d.Do("POST", "/v1/acp/ev", []byte(`{"jsonrpc":"2.0","method":"bench/note"}`), "Content-Type", "application/json")
	if st != 202 || h.Get(eventIDHeader) != "" {
		t.Fatalf("notification: %d, header %q", st, h.Get(eventIDHeader))
	}
}
