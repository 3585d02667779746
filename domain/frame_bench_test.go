package domain

import (
	"strings"
	"testing"
)

// BenchmarkParseFrame measures the peek on the hot path (every POST body and
// every agent stdout line): a typical request, a small response, and a
// 64 KiB prompt whose params dominate.
func BenchmarkParseFrame(b *testing.B) {
	for _, c := range []struct{ name, in string }{
		{"request", `{"jsonrpc":"2.0","id":17,"method":"session/prompt","params":{"sessionId":"s-1","prompt":[{"type":"text","text":"hello"}]}}`},
		{"response", `{"jsonrpc":"2.0","id":17,"result":{"stopReason":"end_turn"}}`},
		{"prompt64k", `{"jsonrpc":"2.0","id":18,"method":"session/prompt","params":{"sessionId":"s-1","prompt":[{"type":"text","text":"` + strings.Repeat("lorem ipsum ", 64<<10/12) + `"}]}}`},
	} {
		in := []byte(c.in)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseFrame(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
