package httpclient

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name, in string
		want     []SSEEvent
		err      error
	}{
		{"daemon frames", "event: message\nid: 1\ndata: {\"a\":1}\n\n: heartbeat\n\nevent: message\ndata: {\"gap\":1}\n\n",
			[]SSEEvent{{"message", "1", []byte(`{"a":1}`)}, {"message", "", []byte(`{"gap":1}`)}}, io.EOF},
		{"crlf", "id: 7\r\ndata: x\r\n\r\n", []SSEEvent{{"", "7", []byte("x")}}, io.EOF},
		{"lone cr", "id: 7\rdata: x\r\rdata: y\r\r", []SSEEvent{{"", "7", []byte("x")}, {"", "", []byte("y")}}, io.EOF},
		{"multi-line data, no space", "data:a\ndata: b\n\n", []SSEEvent{{"", "", []byte("a\nb")}}, io.EOF},
		{"event without data is skipped", "id: 1\n\ndata: z\n\n", []SSEEvent{{"", "", []byte("z")}}, io.EOF},
		{"colon in value", "data: {\"k\":\"v:w\"}\n\n", []SSEEvent{{"", "", []byte(`{"k":"v:w"}`)}}, io.EOF},
		{"cut mid-event", "id: 1\ndata: {\"a\"", nil, io.ErrUnexpectedEOF},
		{"cut before blank line", "id: 1\ndata: {}\n", nil, io.ErrUnexpectedEOF},
		{"too large", "data: " + strings.Repeat("x", 100) + "\n\n", nil, ErrSSEEventTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, name := range []string{"whole", "one byte at a time"} {
				var src io.Reader = strings.NewReader(tt.in)
				if name != "whole" {
					src = iotest.OneByteReader(src)
				}
				r := NewSSEReader(src, 64)
				var got []SSEEvent
				var err error
				for {
					var ev SSEEvent
					if ev, err = r.Next(); err != nil {
						break
					}
					got = append(got, ev)
				}
				if !errors.Is(err, tt.err) {
					t.Fatalf("%s: err %v, want %v", name, err, tt.err)
				}
				if len(got) != len(tt.want) {
					t.Fatalf("%s: got %d events %q, want %q", name, len(got), got, tt.want)
				}
				for i := range got {
					if got[i].Event != tt.want[i].Event || got[i].ID != tt.want[i].ID || string(got[i].Data) != string(tt.want[i].Data) {
						t.Errorf("%s: event %d = %+v, want %+v", name, i, got[i], tt.want[i])
					}
				}
			}
		})
	}
}

// An event far larger than bufio's buffer and than bufio.Scanner's 64 KiB
// default comes through whole.
func TestSSEReaderLargeEvent(t *testing.T) {
	big := strings.Repeat("y", 5<<20)
	r := NewSSEReader(strings.NewReader("id: 1\ndata: "+big+"\n\n"), 0)
	ev, err := r.Next()
	if err != nil || string(ev.Data) != big {
		t.Fatalf("len %d, err %v", len(ev.Data), err)
	}
}

func FuzzSSEReader(f *testing.F) {
	f.Add("event: message\nid: 1\ndata: {}\n\n")
	f.Add("data: a\r\ndata: b\r\r\n")
	f.Fuzz(func(t *testing.T, in string) {
		r := NewSSEReader(strings.NewReader(in), 1024)
		for range len(in) + 1 {
			ev, err := r.Next()
			if err != nil {
				return
			}
			if len(ev.Data) > 1024 {
				t.Fatalf("event of %d bytes past the limit", len(ev.Data))
			}
		}
		t.Fatal("more events than input bytes")
	})
}

// BenchmarkSSEReader parses daemon-shaped frames from memory; the cost per
// event of the reader itself.
func BenchmarkSSEReader(b *testing.B) {
	var sb strings.Builder
	for i := range 1000 {
		sb.WriteString("event: message\nid: ")
		sb.WriteString(strings.Repeat("9", 1+i%6))
		sb.WriteString(`
data: {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"mock-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"mock: chunk 123"}}}}

`)
	}
	in := sb.String()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		r := NewSSEReader(strings.NewReader(in), 0)
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/event")
}
