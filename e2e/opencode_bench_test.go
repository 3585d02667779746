package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// BenchmarkOpenCodeFirstReply: how long from a prompt to the first text
// of the mock's reply, through /opencode (prompt_async, the reply's first
// message.part.updated on /event: the prompt recorded, the turn opened,
// each written to the database before it is published) against /v1/acp
// (session/prompt POSTed, the first agent_message_chunk on its SSE
// stream). Same daemon, blocks of each leg interleaved.
//
//	go test ./e2e -run '^$' -bench OpenCodeFirstReply -benchtime 3x
func BenchmarkOpenCodeFirstReply(b *testing.B) {
	d := harness.Start(b, harness.Options{Args: []string{"--log-level", "warn", "--opencode-db", "memory"}})

	// /v1/acp: an instance with one session, its stream open.
	if st, body := d.Post("/v1/acp/bench?agent=mock", initMsg); st != 200 {
		b.Fatalf("%d %s", st, body)
	}
	st, body := d.Post("/v1/acp/bench", `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	if st != 200 {
		b.Fatalf("%d %s", st, body)
	}
	sid := between(string(body), `"sessionId":"`, `"`)
	acpEvents := d.Stream("/v1/acp/bench")

	// /opencode: a session, its agent started, /event open.
	var s struct{ ID string }
	if code, b2 := d.JSONDo("POST", "/opencode/session", map[string]any{}, &s); code != 200 {
		b.Fatalf("%d %s", code, b2)
	}
	ocEvents := d.Stream("/opencode/event")
	prompt := func(text string) string {
		return fmt.Sprintf(`{"parts":[{"type":"text","text":%q}]}`, text)
	}
	if code, _, b2 := d.Do("POST", "/opencode/session/"+s.ID+"/message", []byte(prompt("warm up")), "Content-Type", "application/json"); code != 200 {
		b.Fatalf("%d %s", code, b2)
	}

	var acpd, ocd []time.Duration
	n := 0
	const block = 50
	for b.Loop() {
		for range block {
			n++
			text := fmt.Sprintf("hi %d", n)
			start := time.Now()
			msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":%q}]}}`, n+10, sid, text)
			if st, body := d.Post("/v1/acp/bench", msg); st != http.StatusAccepted {
				b.Fatalf("%d %s", st, body)
			}
			acpEvents.Until(b, 10*time.Second, func(e harness.Event) bool { return strings.Contains(e.Data, "mock: "+text) })
			acpd = append(acpd, time.Since(start))
			acpEvents.Until(b, 10*time.Second, func(e harness.Event) bool { return strings.Contains(e.Data, `"stopReason"`) })
		}
		for range block {
			n++
			text := fmt.Sprintf("hi %d", n)
			start := time.Now()
			if code, _, body := d.Do("POST", "/opencode/session/"+s.ID+"/prompt_async", []byte(prompt(text)), "Content-Type", "application/json"); code != http.StatusNoContent {
				b.Fatalf("%d %s", code, body)
			}
			ocEvents.Until(b, 10*time.Second, func(e harness.Event) bool {
				return strings.Contains(e.Data, `"delta":"mock: `+text+`"`)
			})
			ocd = append(ocd, time.Since(start))
			ocEvents.Until(b, 10*time.Second, func(e harness.Event) bool { return strings.Contains(e.Data, `"type":"session.idle"`) })
		}
	}
	a, o := quantile(acpd, 0.5), quantile(ocd, 0.5)
	b.ReportMetric(float64(a.Microseconds()), "acp-p50-µs")
	b.ReportMetric(float64(o.Microseconds()), "opencode-p50-µs")
	b.ReportMetric(float64(quantile(acpd, 0.99).Microseconds()), "acp-p99-µs")
	b.ReportMetric(float64(quantile(ocd, 0.99).Microseconds()), "opencode-p99-µs")
	b.ReportMetric(float64(o)/float64(a), "opencode/acp")
}

func between(s, from, to string) string {
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, to)
	return v
}
