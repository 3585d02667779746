package opencode

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkFirstReply is the adapter's part of a prompt's first reply, in
// process (a scripted agent on pipes, the database on a file): from
// prompt_async to the reply's first text on /event.
func BenchmarkFirstReply(b *testing.B) {
	h := newHarness(b, harnessOptions{dbPath: b.TempDir() + "/bench.db"})
	ev := h.events("/event")
	id := h.newSession()
	h.prompt(id, "warm")
	n := 0
	for b.Loop() {
		n++
		text := fmt.Sprint("hi ", n)
		if code, body := h.do("POST", "/session/"+id+"/prompt_async", promptBody(text)); code != 204 {
			b.Fatalf("%d %s", code, body)
		}
		for {
			e := ev.next()
			if e.Type == "message.part.updated" && strings.Contains(string(e.Raw), `"delta":"echo: `+text+`"`) {
				break
			}
		}
		ev.until("session.idle")
	}
}
