package domain

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCheckMessage pins the answer to every kind of line a stdio peer can
// be sent: valid messages pass (frame unchanged), the rest get -32700 or
// -32600 with the id JSON-RPC 2.0 §5.1 allows.
func TestCheckMessage(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		code       int    // 0: valid
		id         string // answer id when invalid
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, 0, ""},
		{"string id", `{"jsonrpc":"2.0","id":"a","method":"x"}`, 0, ""},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"x"}`, 0, ""},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"x"}`, 0, ""},
		{"notification", `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`, 0, ""},
		{"array params", `{"jsonrpc":"2.0","method":"x","params":[1]}`, 0, ""},
		{"null params", `{"jsonrpc":"2.0","id":2,"method":"x","params":null}`, 0, ""},
		{"escaped version", `{"jsonrpc":"\u0032.0","id":2,"method":"x"}`, 0, ""},
		{"result", `{"jsonrpc":"2.0","id":0,"result":null}`, 0, ""},
		{"error response", `{"jsonrpc":"2.0","id":"p","error":{"code":-32000,"message":"no","data":{}}}`, 0, ""},
		{"extra members", `{"jsonrpc":"2.0","id":1,"method":"x","_meta":{}}`, 0, ""},
		{"surrounding space", ` {"jsonrpc":"2.0","method":"x"} `, 0, ""},

		{"cut short", `{"jsonrpc":"2.0","id":1,"method":"initialize"`, CodeParseError, "null"},
		{"not json", `hello`, CodeParseError, "null"},
		{"trailing garbage", `{"jsonrpc":"2.0","method":"x"} x`, CodeParseError, "null"},
		{"empty batch", `[]`, CodeInvalidRequest, "null"},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"x"}]`, CodeInvalidRequest, "null"},
		{"number", `1`, CodeInvalidRequest, "null"},
		{"string", `"x"`, CodeInvalidRequest, "null"},
		{"null", `null`, CodeInvalidRequest, "null"},
		{"empty object", `{}`, CodeInvalidRequest, "null"},
		{"foo bar", `{"foo":"bar"}`, CodeInvalidRequest, "null"},
		{"missing method", `{"jsonrpc":"2.0","id":1}`, CodeInvalidRequest, "1"},
		{"missing method string id", `{"jsonrpc":"2.0","id":"q","params":{}}`, CodeInvalidRequest, `"q"`},
		{"missing version", `{"id":3,"method":"x"}`, CodeInvalidRequest, "3"},
		{"version 1.0", `{"jsonrpc":"1.0","id":3,"method":"x"}`, CodeInvalidRequest, "3"},
		{"version number", `{"jsonrpc":2.0,"id":3,"method":"x"}`, CodeInvalidRequest, "3"},
		{"method number", `{"jsonrpc":"2.0","id":4,"method":1}`, CodeInvalidRequest, "4"},
		{"method null", `{"jsonrpc":"2.0","id":4,"method":null}`, CodeInvalidRequest, "4"},
		{"params string", `{"jsonrpc":"2.0","id":5,"method":"x","params":"bar"}`, CodeInvalidRequest, "5"},
		{"params in notification", `{"jsonrpc":"2.0","method":1,"params":"bar"}`, CodeInvalidRequest, "null"},
		{"id object", `{"jsonrpc":"2.0","id":{"a":1},"method":"x"}`, CodeInvalidRequest, "null"},
		{"id array", `{"jsonrpc":"2.0","id":[1],"method":"x"}`, CodeInvalidRequest, "null"},
		{"id bool", `{"jsonrpc":"2.0","id":true,"method":"x"}`, CodeInvalidRequest, "null"},
		{"duplicate id", `{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}`, CodeInvalidRequest, "null"},
		{"case variant", `{"jsonrpc":"2.0","id":1,"Method":"x","method":"y"}`, CodeInvalidRequest, "null"},
		{"response both", `{"jsonrpc":"2.0","id":6,"result":{},"error":{"code":1,"message":"m"}}`, CodeInvalidRequest, "null"},
		{"response no id", `{"jsonrpc":"2.0","result":{}}`, CodeInvalidRequest, "null"},
		{"response bad version", `{"jsonrpc":"1.0","id":6,"result":{}}`, CodeInvalidRequest, "null"},
		{"response bad id", `{"jsonrpc":"2.0","id":true,"result":{}}`, CodeInvalidRequest, "null"},
		{"error not object", `{"jsonrpc":"2.0","id":6,"error":"no"}`, CodeInvalidRequest, "null"},
		{"error code fraction", `{"jsonrpc":"2.0","id":6,"error":{"code":1.5,"message":"m"}}`, CodeInvalidRequest, "null"},
		{"error code string", `{"jsonrpc":"2.0","id":6,"error":{"code":"1","message":"m"}}`, CodeInvalidRequest, "null"},
		{"error no message", `{"jsonrpc":"2.0","id":6,"error":{"code":1}}`, CodeInvalidRequest, "null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, e := CheckMessage([]byte(tc.line))
			if tc.code == 0 {
				if e != nil {
					t.Fatalf("refused: %v", e)
				}
				if string(f.Data) != tc.line {
					t.Fatalf("frame data %q", f.Data)
				}
				return
			}
			if e == nil {
				t.Fatalf("accepted (%v)", f.Kind)
			}
			var resp struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
					Data    string `json:"data"`
				} `json:"error"`
			}
			line := e.Response()
			if err := json.Unmarshal(line, &resp); err != nil || strings.ContainsAny(string(line), "\r\n") {
				t.Fatalf("answer %q is not one JSON line: %v", line, err)
			}
			if resp.JSONRPC != "2.0" || resp.Error.Code != tc.code || string(resp.ID) != tc.id || resp.Error.Data == "" {
				t.Fatalf("answer %s, want code %d id %s", line, tc.code, tc.id)
			}
			if want := map[int]string{CodeParseError: "Parse error", CodeInvalidRequest: "Invalid Request"}[tc.code]; resp.Error.Message != want {
				t.Fatalf("message %q, want %q", resp.Error.Message, want)
			}
		})
	}
}

// TestCheckMessageAnswers pins the exact bytes of the two answers a client
// most often meets.
func TestCheckMessageAnswers(t *testing.T) {
	_, e := CheckMessage([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize"`))
	if got := string(e.Response()); got != `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error","data":"the line is not JSON"}}` {
		t.Errorf("parse error: %s", got)
	}
	_, e = CheckMessage([]byte(`{"jsonrpc":"2.0","id":"x"}`))
	if got := string(e.Response()); got != `{"jsonrpc":"2.0","id":"x","error":{"code":-32600,"message":"Invalid Request","data":"a request needs a \"method\""}}` {
		t.Errorf("invalid request: %s", got)
	}
}

func FuzzCheckMessage(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"x"}`, `[]`, `{"id":{"a":[1]},"error":{"code":1}}`, `{"jsonrpc":"2.0","id":"\u00e9","result":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, e := CheckMessage(b)
		if e == nil {
			if fr.Kind == FrameOther {
				t.Fatalf("accepted a frame that is no message: %q", b)
			}
			return
		}
		if !json.Valid(e.Response()) {
			t.Fatalf("answer not JSON: %q", e.Response())
		}
	})
}

func BenchmarkCheckMessage(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":42,"method":"session/prompt","params":{"sessionId":"mock-1","prompt":[{"type":"text","text":"hello there, how are you today?"}]}}`)
	b.Run("ParseFrame", func(b *testing.B) {
		for b.Loop() {
			_, _ = ParseFrame(line)
		}
	})
	b.Run("CheckMessage", func(b *testing.B) {
		for b.Loop() {
			_, _ = CheckMessage(line)
		}
	})
}
