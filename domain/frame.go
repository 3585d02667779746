package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// FrameKind is what a JSON-RPC message is, decided by which top-level keys it
// has and nothing else: the daemon is a byte pipe, not a JSON-RPC validator.
type FrameKind uint8

const (
	// FrameOther has neither "method" nor "id" (for example `{}`).
	FrameOther FrameKind = iota
	// FrameRequest has "method" and "id" (any JSON value, null included).
	FrameRequest
	// FrameNotification has "method" and no "id".
	FrameNotification
	// FrameResponse has "id" and no "method".
	FrameResponse
)

func (k FrameKind) String() string {
	switch k {
	case FrameRequest:
		return "request"
	case FrameNotification:
		return "notification"
	case FrameResponse:
		return "response"
	default:
		return "other"
	}
}

// Frame is one JSON-RPC message as bytes plus what was peeked from it.
// Data is exactly what goes on the wire (a single line, no trailing newline);
// nothing in the daemon re-encodes it.
type Frame struct {
	Data   []byte
	Kind   FrameKind
	ID     []byte // the raw "id" value; nil when absent
	Method string // the "method" value when it is a JSON string
}

// IDKey is the canonical form of the frame's id, used as the pending-request
// key. It is empty when the frame has no id.
func (f Frame) IDKey() string {
	if f.ID == nil {
		return ""
	}
	return CanonicalID(f.ID)
}

// Errors returned by ParseFrame. They are plain sentinel errors so callers can
// decide which client-facing message to attach.
var (
	ErrNotJSON   = errors.New("invalid JSON")
	ErrNotObject = errors.New("not a JSON object")
)

// ParseFrame validates that b is a single JSON object and peeks its kind, id
// and method. When b contains a raw CR or LF (only possible as insignificant
// whitespace in valid JSON) it is compacted so the frame fits on one line;
// otherwise Data aliases b unchanged.
func ParseFrame(b []byte) (Frame, error) {
	if !json.Valid(b) {
		return Frame{}, ErrNotJSON
	}
	if bytes.IndexByte(b, '\n') >= 0 || bytes.IndexByte(b, '\r') >= 0 {
		var buf bytes.Buffer
		buf.Grow(len(b))
		if err := json.Compact(&buf, b); err != nil {
			return Frame{}, ErrNotJSON
		}
		b = buf.Bytes()
	}
	return peekValid(b)
}

// peekValid classifies b, which must already be valid JSON.
func peekValid(b []byte) (Frame, error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return Frame{}, ErrNotObject
	}
	f := Frame{Data: b}
	hasMethod := false
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] != '}' {
		if b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		keyEnd := skipString(b, i)
		key := b[i+1 : keyEnd-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			if json.Unmarshal(b[i:keyEnd], &s) == nil {
				key = []byte(s)
			}
		}
		i = skipSpace(b, keyEnd)
		i = skipSpace(b, i+1) // the colon
		valEnd := skipValue(b, i)
		switch string(key) {
		case "id":
			f.ID = b[i:valEnd]
		case "method":
			hasMethod = true
			f.Method = ""
			if b[i] == '"' {
				raw := b[i+1 : valEnd-1]
				if bytes.IndexByte(raw, '\\') < 0 {
					f.Method = string(raw)
				} else {
					_ = json.Unmarshal(b[i:valEnd], &f.Method)
				}
			}
		}
		i = skipSpace(b, valEnd)
	}
	switch {
	case hasMethod && f.ID != nil:
		f.Kind = FrameRequest
	case hasMethod:
		f.Kind = FrameNotification
	case f.ID != nil:
		f.Kind = FrameResponse
	default:
		f.Kind = FrameOther
	}
	return f, nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// skipValue returns the index just past the value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipString(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	default:
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j
			}
			j++
		}
		return j
	}
}

// CanonicalID turns a raw JSON id into the key under which a request waits
// for its response. The key keeps the JSON type, so `7` and `"7"` differ, but
// forgets spelling the peer may not preserve: string escapes, number format
// (`7`, `7.0`, `7e0` are one id, as they are to a JavaScript agent) and
// whitespace inside structured ids.
func CanonicalID(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch c := raw[0]; {
	case c == '"':
		// raw comes from a parsed frame and is valid JSON; the length check
		// keeps a malformed argument (a lone quote) from panicking.
		if len(raw) >= 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw, '\\') < 0 {
			return "s:" + string(raw[1:len(raw)-1])
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return "s:" + s
		}
	case c == '-' || (c >= '0' && c <= '9'):
		if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return "n:" + strconv.FormatInt(n, 10)
		}
		if f, err := strconv.ParseFloat(string(raw), 64); err == nil {
			if f == float64(int64(f)) && f > -1<<63 && f < 1<<63 {
				return "n:" + strconv.FormatInt(int64(f), 10)
			}
			return "n:" + strconv.FormatFloat(f, 'g', -1, 64)
		}
	case c == '{' || c == '[':
		var buf bytes.Buffer
		if json.Compact(&buf, raw) == nil {
			return "j:" + buf.String()
		}
	}
	return "j:" + string(raw)
}
