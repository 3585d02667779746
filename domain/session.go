package domain

import (
	"bytes"
	"encoding/json"
)

// SessionID peeks params.sessionId, the ACP session a request or
// notification belongs to, from b, which must be valid JSON (a Frame's
// Data). It reports false when b has no params object or the object has no
// string sessionId. A repeated key counts by its last occurrence, as the
// agent's JSON decoder would read it. Nothing is decoded but the one string.
//
// ACP's standard HTTP transport routes agent messages to per-session streams
// by this value, and checks it against the client's Acp-Session-Id header.
func SessionID(b []byte) (string, bool) {
	params, ok := member(b, "params")
	if !ok || len(params) == 0 || params[0] != '{' {
		return "", false
	}
	v, ok := member(params, "sessionId")
	if !ok || len(v) < 2 || v[0] != '"' {
		return "", false
	}
	raw := v[1 : len(v)-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw), true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// member returns the raw value of the last top-level key name of the JSON
// object b (valid JSON), or false when b is not an object or lacks the key.
func member(b []byte, name string) ([]byte, bool) {
	var found []byte
	ok := false
	if eachMember(b, func(key, val []byte) error {
		if string(key) == name {
			found, ok = val, true
		}
		return nil
	}) != nil {
		return nil, false
	}
	return found, ok
}
