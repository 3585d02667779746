package processes

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

func TestEncoderUTF8(t *testing.T) {
	out, errs := domain.StreamStdout, domain.StreamStderr
	for _, c := range []struct {
		name   string
		chunks []Chunk
		want   []string
	}{
		{"ascii", []Chunk{{Stream: out, Data: []byte("hello\n")}}, []string{"hello\n"}},
		{"invalid bytes replaced", []Chunk{{Stream: out, Data: []byte("a\xffb\xc0")}}, []string{"a\uFFFDb\uFFFD"}},
		{"a character split between reads", []Chunk{
			{Stream: out, Data: []byte("h\xc3")}, {Stream: out, Data: []byte("\xa9llo")},
		}, []string{"h", "éllo"}},
		{"a 4-byte character in three reads", []Chunk{
			{Stream: out, Data: []byte("\xf0\x9f")}, {Stream: out, Data: []byte("\x98")}, {Stream: out, Data: []byte("\x80!")},
		}, []string{"", "", "😀!"}},
		{"carried per stream", []Chunk{
			{Stream: out, Data: []byte("x\xe2\x82")}, {Stream: errs, Data: []byte("err")}, {Stream: out, Data: []byte("\xac")},
		}, []string{"x", "err", "€"}},
		{"an impossible prefix is not held", []Chunk{
			{Stream: out, Data: []byte("a\xe0\x80")}, {Stream: out, Data: []byte("b")},
		}, []string{"a\uFFFD", "b"}},
		{"a held prefix that is not completed", []Chunk{
			{Stream: out, Data: []byte("a\xc3")}, {Stream: out, Data: []byte("b")},
		}, []string{"a", "\uFFFDb"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := NewEncoder(domain.LogUTF8)
			for i, ch := range c.chunks {
				got := e.Entry(ch)
				if got.Data != c.want[i] || got.Encoding != "utf8" || got.Stream != ch.Stream {
					t.Errorf("chunk %d: %+v, want data %q", i, got, c.want[i])
				}
			}
		})
	}
	e := NewEncoder(domain.LogUTF8)
	e.Entry(Chunk{Stream: out, Data: []byte("\xc3")})
	e.Gap()
	if got := e.Entry(Chunk{Stream: out, Data: []byte("\xa9")}).Data; got != "\uFFFD" {
		t.Errorf("after a gap: %q, want the orphan continuation byte replaced", got)
	}
	if got := NewEncoder("").Entry(Chunk{Stream: out, Data: []byte("\xff")}); got.Data != "/w==" || got.Encoding != "base64" {
		t.Errorf("default: %+v", got)
	}
}

// However valid UTF-8 output is cut into reads, the utf8 entries put back
// together are the output, unchanged; invalid output only gains U+FFFD.
func FuzzEncoderUTF8(f *testing.F) {
	f.Add([]byte("héllo wörld €😀"), uint8(3), uint8(7))
	f.Add([]byte("\xff\xc3\xa9\xe2\x82"), uint8(1), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, a, b uint8) {
		cuts := []int{int(a) % (len(data) + 1), int(b) % (len(data) + 1)}
		if cuts[0] > cuts[1] {
			cuts[0], cuts[1] = cuts[1], cuts[0]
		}
		e := NewEncoder(domain.LogUTF8)
		var got strings.Builder
		for _, part := range [][]byte{data[:cuts[0]], data[cuts[0]:cuts[1]], data[cuts[1]:], nil} {
			ent := e.Entry(Chunk{Stream: domain.StreamStdout, Data: part})
			if !utf8.ValidString(ent.Data) {
				t.Fatalf("entry %q is not valid UTF-8", ent.Data)
			}
			got.WriteString(ent.Data)
		}
		if utf8.Valid(data) && got.String() != string(data) {
			t.Fatalf("valid %q cut at %v came back as %q", data, cuts, got.String())
		}
	})
}
