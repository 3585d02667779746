package domain

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAdapterMessages(t *testing.T) {
	zero, one := 0, 1
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"exited ok", AgentExitedMessage(true, &zero), `{"jsonrpc":"2.0","method":"_adapter/agent_exited","params":{"success":true,"code":0}}`},
		{"exited code", AgentExitedMessage(false, &one), `{"jsonrpc":"2.0","method":"_adapter/agent_exited","params":{"success":false,"code":1}}`},
		{"exited by signal", AgentExitedMessage(false, nil), `{"jsonrpc":"2.0","method":"_adapter/agent_exited","params":{"success":false,"code":null}}`},
		{"invalid stdout", InvalidStdoutMessage("not JSON", []byte(`hello "x" \ <b>`)),
			`{"jsonrpc":"2.0","method":"_adapter/invalid_stdout","params":{"error":"not JSON","raw":"hello \"x\" \\ \u003cb\u003e"}}`},
		{"invalid stdout control bytes", InvalidStdoutMessage("e", []byte("a\tb\x00")),
			`{"jsonrpc":"2.0","method":"_adapter/invalid_stdout","params":{"error":"e","raw":"a\tb\u0000"}}`},
		{"replay gap", ReplayGapMessage(3, 10), `{"jsonrpc":"2.0","method":"_adapter/replay_gap","params":{"lastEventId":3,"oldestAvailable":10}}`},
		{"replay gap from start", ReplayGapMessage(0, 18446744073709551615), `{"jsonrpc":"2.0","method":"_adapter/replay_gap","params":{"lastEventId":0,"oldestAvailable":18446744073709551615}}`},
		{"stopped number id", AgentStoppedResponse([]byte(`7`)), `{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"agent process stopped before responding"}}`},
		{"stopped string id", AgentStoppedResponse([]byte(`"7"`)), `{"jsonrpc":"2.0","id":"7","error":{"code":-32603,"message":"agent process stopped before responding"}}`},
		{"stopped object id", AgentStoppedResponse([]byte(`{"a":null}`)), `{"jsonrpc":"2.0","id":{"a":null},"error":{"code":-32603,"message":"agent process stopped before responding"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if string(tt.got) != tt.want {
				t.Errorf("got  %s\nwant %s", tt.got, tt.want)
			}
			f, err := ParseFrame(tt.got)
			if err != nil || strings.ContainsAny(string(tt.got), "\r\n") {
				t.Fatalf("not a single-line JSON object: %v", err)
			}
			if &f.Data[0] != &tt.got[0] {
				t.Errorf("builder output needed compaction")
			}
		})
	}
}

// The quoted line is cut at 4 KiB, never inside a character, and the
// message stays valid JSON whatever bytes the agent wrote.
func TestInvalidStdoutTruncation(t *testing.T) {
	a := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name string
		line string
		raw  string
	}{
		{"short", "abc", "abc"},
		{"exactly the limit", a(MaxInvalidStdoutRaw), a(MaxInvalidStdoutRaw)},
		{"over the limit", a(MaxInvalidStdoutRaw + 100), a(MaxInvalidStdoutRaw)},
		{"two-byte rune across the cut", a(MaxInvalidStdoutRaw-1) + "é" + a(10), a(MaxInvalidStdoutRaw - 1)},
		{"two-byte rune ending at the cut", a(MaxInvalidStdoutRaw-2) + "é" + a(10), a(MaxInvalidStdoutRaw-2) + "é"},
		{"four-byte rune across the cut", a(MaxInvalidStdoutRaw-2) + "😀" + a(10), a(MaxInvalidStdoutRaw - 2)},
		{"three-byte rune across the cut", a(MaxInvalidStdoutRaw-1) + "€" + a(10), a(MaxInvalidStdoutRaw - 1)},
		// Invalid bytes are quoted as U+FFFD; they do not empty the quote.
		{"invalid byte early in a long line", "\xff" + a(MaxInvalidStdoutRaw+10), "\ufffd" + a(MaxInvalidStdoutRaw-1)},
		{"invalid byte in a short line", "a\xffb", "a\ufffdb"},
		{"binary garbage", strings.Repeat("\xfe\x80", MaxInvalidStdoutRaw), strings.Repeat("\ufffd", MaxInvalidStdoutRaw)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := InvalidStdoutMessage("bad", []byte(tt.line))
			if !utf8.Valid(msg) || !json.Valid(msg) {
				t.Fatalf("not valid UTF-8 JSON: %q", msg)
			}
			var v struct {
				Method string `json:"method"`
				Params struct {
					Error string `json:"error"`
					Raw   string `json:"raw"`
				} `json:"params"`
			}
			if err := json.Unmarshal(msg, &v); err != nil {
				t.Fatal(err)
			}
			if v.Method != "_adapter/invalid_stdout" || v.Params.Error != "bad" {
				t.Errorf("method %q error %q", v.Method, v.Params.Error)
			}
			if v.Params.Raw != tt.raw {
				t.Errorf("raw: %d bytes %.40q..., want %d bytes %.40q...", len(v.Params.Raw), v.Params.Raw, len(tt.raw), tt.raw)
			}
		})
	}
}

func FuzzInvalidStdoutMessage(f *testing.F) {
	f.Add("reason", []byte("plain"))
	f.Add("", []byte("\xff\xfe"))
	f.Add("r", []byte(strings.Repeat("é", MaxInvalidStdoutRaw)))
	f.Fuzz(func(t *testing.T, reason string, line []byte) {
		msg := InvalidStdoutMessage(reason, line)
		fr, err := ParseFrame(msg)
		if err != nil || fr.Kind != FrameNotification || fr.Method != "_adapter/invalid_stdout" || &fr.Data[0] != &msg[0] {
			t.Fatalf("%q: %v %+v", msg, err, fr)
		}
		var v struct{ Params struct{ Raw string } }
		if err := json.Unmarshal(msg, &v); err != nil {
			t.Fatal(err)
		}
		if n := len(line); n > 0 && len(v.Params.Raw) == 0 {
			t.Fatalf("a %d-byte line was quoted as empty", n)
		}
	})
}

func TestValidServerID(t *testing.T) {
	tests := map[string]bool{
		"":                                    false,
		"a":                                   true,
		"my-server_1.x":                       true,
		"with space":                          true,
		"ünïcode":                             true,
		"a/b":                                 false,
		"/":                                   false,
		"a\x00b":                              false,
		"\xff\xfe":                            false,
		"ok\xc3":                              false,
		strings.Repeat("x", MaxServerIDLen):   true,
		strings.Repeat("x", MaxServerIDLen+1): false,
	}
	for id, want := range tests {
		if got := ValidServerID(id); got != want {
			t.Errorf("ValidServerID(%.20q) = %v, want %v", id, got, want)
		}
	}
}

func TestValidAgentID(t *testing.T) {
	tests := map[string]bool{
		"":                       false,
		"claude":                 true,
		"my-agent_2.0":           true,
		"A":                      true,
		".hidden":                false,
		"..":                     false,
		"a/b":                    false,
		"a\\b":                   false,
		"a b":                    false,
		"é":                      false,
		"a\x00":                  false,
		"a:b":                    false,
		strings.Repeat("x", 128): true,
		strings.Repeat("x", 129): false,
	}
	for id, want := range tests {
		if got := ValidAgentID(id); got != want {
			t.Errorf("ValidAgentID(%.20q) = %v, want %v", id, got, want)
		}
	}
	for _, id := range KnownAgents {
		if !ValidAgentID(id) || !IsKnownAgent(id) {
			t.Errorf("known agent %q rejected", id)
		}
	}
	if IsKnownAgent("Claude") || IsKnownAgent("") {
		t.Errorf("IsKnownAgent accepts unknown ids")
	}
}
