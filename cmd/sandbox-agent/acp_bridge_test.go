package main

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// lineSink records what the relay sends to the connection, one Write each.
type lineSink struct {
	mu     sync.Mutex
	writes []string
}

func (l *lineSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, string(p))
	return len(p), nil
}

// TestRelayStdin: valid messages go to the connection whole, each with its
// line ending (a last line without one included); blank lines are skipped;
// anything else is answered on stdout, in order, and the relay goes on.
func TestRelayStdin(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":"long","method":"x","params":{"p":"` + strings.Repeat("a", 200<<10) + `"}}`
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize"`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`,
		``,
		"  \r",
		`[]`,
		`{"jsonrpc":"2.0","id":2}` + "\r",
		long,
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`,
	}, "\n")
	var conn lineSink
	var stdout bytes.Buffer
	if err := relayStdin(&conn, strings.NewReader(in), &stdoutLines{w: &stdout}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}` + "\n",
		long + "\n",
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}` + "\n",
	}
	if strings.Join(conn.writes, "") != strings.Join(want, "") || len(conn.writes) != len(want) {
		t.Errorf("sent %d writes:\n%.300q", len(conn.writes), conn.writes)
	}
	wantOut := `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error","data":"the line is not JSON"}}` + "\n" +
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request","data":"JSON-RPC batches are not supported"}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"Invalid Request","data":"a request needs a \"method\""}}` + "\n"
	if stdout.String() != wantOut {
		t.Errorf("answered:\n%s", stdout.String())
	}
}

// TestRelayStdinLineLimit: a line past the limit is dropped (what is
// gathered of it is let go at the limit), answered with -32600, and the next
// line goes through as usual.
func TestRelayStdinLineLimit(t *testing.T) {
	r := io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"x","params":{"p":"`),
		&repeatReader{b: 'a', n: bridgeMaxLine + 1}, strings.NewReader("\"}}\n"+`{"jsonrpc":"2.0","id":2,"method":"next"}`+"\n"))
	var stdout strings.Builder
	sink := &lineSink{}
	if err := relayStdin(sink, r, &stdoutLines{w: &stdout}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("err %v", err)
	}
	want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request","data":"message longer than 67108864 bytes"}}` + "\n"
	if stdout.String() != want {
		t.Errorf("answered %q", stdout.String())
	}
	if got := strings.Join(sink.writes, ""); got != `{"jsonrpc":"2.0","id":2,"method":"next"}`+"\n" {
		t.Errorf("relayed %q", got)
	}
}

type repeatReader struct {
	b byte
	n int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.n)
	for i := range n {
		p[i] = r.b
	}
	r.n -= n
	return n, nil
}

// TestStdoutLinesAnswerBetweenLines: an answer given while an agent line is
// half written waits for that line's end and goes between it and the next.
func TestStdoutLinesAnswerBetweenLines(t *testing.T) {
	var buf bytes.Buffer
	s := &stdoutLines{w: &buf}
	if _, err := s.Write([]byte("{\"a\":1}\n{\"b\":")); err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() { answered <- s.answer([]byte(`{"answer":1}`)) }()
	// The answer cannot be written until the line in progress ends.
	for {
		s.mu.Lock()
		held := s.held != nil
		s.mu.Unlock()
		if held {
			break
		}
		runtime.Gosched()
		select {
		case err := <-answered:
			t.Fatalf("answered mid-line: %v, %q", err, buf.String())
		default:
		}
	}
	if _, err := s.Write([]byte("2}\n{\"c\"")); err != nil {
		t.Fatal(err)
	}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte(":3}\n")); err != nil {
		t.Fatal(err)
	}
	if err := s.answer([]byte(`{"answer":2}`)); err != nil {
		t.Fatal(err)
	}
	want := "{\"a\":1}\n{\"b\":2}\n{\"answer\":1}\n{\"c\":3}\n{\"answer\":2}\n"
	if buf.String() != want {
		t.Fatalf("stdout %q, want %q", buf.String(), want)
	}
}

// TestStdoutLinesFinish: an answer held for a line that never ends (the
// connection closed mid-line) is still written, on a line of its own.
func TestStdoutLinesFinish(t *testing.T) {
	var buf bytes.Buffer
	s := &stdoutLines{w: &buf}
	s.Write([]byte(`{"cut":`))
	answered := make(chan error, 1)
	go func() { answered <- s.answer([]byte(`{"answer":1}`)) }()
	for {
		s.mu.Lock()
		held := s.held != nil
		s.mu.Unlock()
		if held {
			break
		}
		runtime.Gosched()
	}
	s.finish()
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if buf.String() != "{\"cut\":\n{\"answer\":1}\n" {
		t.Fatalf("stdout %q", buf.String())
	}
}

// TestReadLineCap: "api acp post" reads stdin lines of any length up to its
// cap, the last one without its line ending too, and refuses one byte
// more without holding it.
func TestReadLineCap(t *testing.T) {
	const max = 200 << 10 // over the reader's 64 KiB buffer
	long := strings.Repeat("a", max-1) + "\n"
	r := bufio.NewReaderSize(strings.NewReader(long+"last"), 64<<10)
	if l, err := readLine(r, max); err != nil || string(l) != long {
		t.Fatalf("a line of the cap: %d bytes, %v", len(l), err)
	}
	if l, err := readLine(r, max); err != io.EOF || string(l) != "last" {
		t.Fatalf("the last line: %q, %v", l, err)
	}
	r = bufio.NewReaderSize(strings.NewReader(strings.Repeat("a", max)+"\n"), 64<<10)
	if l, err := readLine(r, max); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("one byte more: %d bytes, %v", len(l), err)
	}
}
