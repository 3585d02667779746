package domain

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// BenchmarkParseFrame measures the peek on the hot path (every POST body and
// every agent stdout line): a typical request, a small response, and a
// 64 KiB prompt whose params dominate. Each case runs twice: "now" is
// ParseFrame, "before" the peek as it was before the params rule (a copy
// kept below, for this comparison only), so both legs are measured in the
// same run; with -count they alternate.
func BenchmarkParseFrame(b *testing.B) {
	for _, c := range []struct{ name, in string }{
		{"request", `{"jsonrpc":"2.0","id":17,"method":"session/prompt","params":{"sessionId":"s-1","prompt":[{"type":"text","text":"hello"}]}}`},
		{"response", `{"jsonrpc":"2.0","id":17,"result":{"stopReason":"end_turn"}}`},
		{"prompt64k", `{"jsonrpc":"2.0","id":18,"method":"session/prompt","params":{"sessionId":"s-1","prompt":[{"type":"text","text":"` + strings.Repeat("lorem ipsum ", 64<<10/12) + `"}]}}`},
	} {
		in := []byte(c.in)
		for _, leg := range []struct {
			name  string
			parse func([]byte) (Frame, error)
		}{{"before", parseFrameBefore}, {"now", ParseFrame}} {
			b.Run(c.name+"/"+leg.name, func(b *testing.B) {
				b.SetBytes(int64(len(in)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := leg.parse(in); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// parseFrameBefore is ParseFrame before params were checked (at 73ab303,
// without the CR/LF compaction the benchmark inputs never need): the
// top-level walk skipped over params without looking inside.
func parseFrameBefore(b []byte) (Frame, error) {
	if !json.Valid(b) {
		return Frame{}, ErrNotJSON
	}
	f := Frame{Data: b}
	hasMethod := false
	var seen uint8
	err := eachMember(b, func(key, val []byte) error {
		if k := rpcKeyIndex(key); k >= 0 {
			if seen&(1<<k) != 0 {
				return &AmbiguousKeyError{Key: string(key), Duplicate: true}
			}
			seen |= 1 << k
		} else if len(key) <= 4*len("jsonrpc") && foldsTo(key, rpcKeys[:]) {
			return &AmbiguousKeyError{Key: string(key)}
		}
		switch string(key) {
		case "id":
			f.ID = val
		case "method":
			hasMethod = true
			f.Method = ""
			if val[0] == '"' {
				raw := val[1 : len(val)-1]
				if bytes.IndexByte(raw, '\\') < 0 {
					f.Method = string(raw)
				} else {
					_ = json.Unmarshal(val, &f.Method)
				}
			}
		}
		return nil
	})
	if err != nil {
		return Frame{}, err
	}
	switch {
	case hasMethod && f.ID != nil:
		f.Kind = FrameRequest
	case hasMethod:
		f.Kind = FrameNotification
	case f.ID != nil:
		f.Kind = FrameResponse
	}
	return f, nil
}
