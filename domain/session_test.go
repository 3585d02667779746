package domain

import (
	"encoding/json"
	"testing"
)

func TestSessionID(t *testing.T) {
	tests := []struct {
		name, in string
		want     string
		ok       bool
	}{
		{"notification", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{}}}`, "s1", true},
		{"request", `{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{"toolCall":{"sessionId":"inner"},"sessionId":"s2"}}`, "s2", true},
		{"nested only", `{"method":"x","params":{"toolCall":{"sessionId":"inner"}}}`, "", false},
		{"no params", `{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s3"}}`, "", false},
		{"params array", `{"method":"x","params":["sessionId","s"]}`, "", false},
		{"not a string", `{"method":"x","params":{"sessionId":7}}`, "", false},
		{"null", `{"method":"x","params":{"sessionId":null}}`, "", false},
		{"escaped value", `{"method":"x","params":{"sessionId":"a\"b\u00e9"}}`, "a\"bé", true},
		{"escaped key", `{"method":"x","params":{"session\u0049d":"s4"}}`, "s4", true},
		{"escaped params key", `{"method":"x","\u0070arams":{"sessionId":"s5"}}`, "s5", true},
		{"last wins", `{"params":{"sessionId":"a","sessionId":"b"}}`, "b", true},
		{"whitespace", " { \"params\" : { \"sessionId\" : \"s6\" } } ", "s6", true},
		{"string containing braces", `{"x":"}{\"params\":{\"sessionId\":\"no\"}}","params":{"y":"\"sessionId\":\"no\"","sessionId":"yes"}}`, "yes", true},
		{"empty", `{"params":{"sessionId":""}}`, "", true},
		{"not an object", `[{"params":{"sessionId":"s"}}]`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := SessionID([]byte(tt.in))
			if got != tt.want || ok != tt.ok {
				t.Fatalf("SessionID(%s) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// FuzzSessionID checks the peek against encoding/json on any valid object.
func FuzzSessionID(f *testing.F) {
	f.Add(`{"params":{"sessionId":"s"}}`)
	f.Add(`{"params":{"sessionId":"a\u0041","sessionId":"b"}}`)
	f.Add(`{"method":"m","params":{"x":[1,{"sessionId":"n"}],"sessionId":"s"}}`)
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return
		}
		got, ok := SessionID([]byte(in))
		// encoding/json matches keys case-insensitively; compare on inputs
		// where that cannot matter.
		var v struct {
			Params *struct {
				SessionID *string `json:"sessionId"`
			} `json:"params"`
		}
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(in), &m) != nil {
			if ok {
				t.Fatalf("SessionID(%s) found %q in a non-object", in, got)
			}
			return
		}
		var pm map[string]json.RawMessage
		if p, has := m["params"]; has && json.Unmarshal(p, &pm) == nil {
			for k := range pm {
				if k != "sessionId" && (len(k) == len("sessionId")) {
					return // a case variant: encoding/json would match it too
				}
			}
		}
		for k := range m {
			if k != "params" && len(k) == len("params") {
				return
			}
		}
		if json.Unmarshal([]byte(in), &v) != nil {
			return // params or sessionId of another type
		}
		want, wantOK := "", false
		if v.Params != nil && v.Params.SessionID != nil {
			want, wantOK = *v.Params.SessionID, true
		}
		if got != want || ok != wantOK {
			t.Fatalf("SessionID(%s) = %q, %v; want %q, %v", in, got, ok, want, wantOK)
		}
	})
}
