package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// DefaultMaxACPMessage is the largest ACP message (one JSON-RPC line: the
// body of one POST, or one WebSocket frame) the daemon takes by default
// (--max-acp-body) and the Go client sends by default
// (httpclient.ACPOptions.MaxMessage): a client sending more than its
// daemon takes would only learn it from a 413 after sending it all.
const DefaultMaxACPMessage = 32 << 20

// EventIDHeader is the header of a 200 answer to POST /v1/acp/{server_id}
// that gives the id of the response's own event on the instance's stream
// (docs/api.md section 4). A client that delivers agent messages in stream
// order may take the response from the POST as soon as it has read every
// event before that id, instead of waiting for the stream's copy.
const EventIDHeader = "Sandbox-Agent-Event-Id"

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
	// ErrAmbiguousKey is a frame whose JSON-RPC keys different decoders
	// read differently: a top-level member among jsonrpc, id, method,
	// params, result and error given twice, or spelt in another case.
	// Go's encoding/json (and so every acp-go-sdk agent) matches member
	// names case-insensitively and keeps the last duplicate, JSON.parse
	// keeps the last exact match: refusing both keeps the method and id the
	// daemon (and every policy) sees equal to what the agent acts on.
	//
	// The same holds inside params for the members the daemon reads there
	// (paramKeys: the session id it routes on).
	ErrAmbiguousKey = errors.New("ambiguous JSON-RPC member")
	// ErrRequestID is a request whose id is an object, an array or a
	// boolean. JSON-RPC allows only a string, a number or null, so an agent
	// answers such a request with id null: nothing could ever match it to
	// the request (a synchronous POST would wait for its timeout), and the
	// id-null answer could be taken for another request's. Client-facing
	// routes refuse it (CheckRequestID); the agent never sees it.
	ErrRequestID = errors.New("a JSON-RPC request id must be a string, a number or null")
)

// CheckRequestID returns ErrRequestID for a request whose id is not a
// string, a number or null; nil for every other frame.
func CheckRequestID(f Frame) error {
	if f.Kind != FrameRequest || len(f.ID) == 0 || validID(f.ID) {
		return nil
	}
	return ErrRequestID
}

// rpcKeys are the top-level members whose reading must be unambiguous, in
// the order of the bits of peekValid's seen mask.
var rpcKeys = [...]string{"jsonrpc", "id", "method", "params", "result", "error"}

// paramKeys are the members of a params object the daemon reads, whose
// reading must be as unambiguous as the top-level ones: the session id
// ACP's standard transport routes on (SessionID).
var paramKeys = [...]string{"sessionId"}

// AmbiguousKeyError says which member made a frame ambiguous. It matches
// ErrAmbiguousKey with errors.Is.
type AmbiguousKeyError struct {
	Key       string // as written in the frame (after unescaping)
	Duplicate bool   // the exact member appears twice; else a case variant
	In        string // "params" for a member of params; "" at the top level
}

func (e *AmbiguousKeyError) Error() string {
	where, what := "member ", "a JSON-RPC member"
	if e.In != "" {
		where, what = e.In+" member ", "a member the daemon reads"
	}
	if e.Duplicate {
		return where + strconv.Quote(e.Key) + " appears more than once"
	}
	return where + strconv.Quote(e.Key) + " differs only in case from " + what
}

func (e *AmbiguousKeyError) Is(target error) bool { return target == ErrAmbiguousKey }

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

// peekValid classifies b, which must already be valid JSON. It walks the
// top-level members once, and the members of an object params in the same
// pass (instead of skipping over it), so the params rule costs no second
// scan of a large prompt.
func peekValid(b []byte) (Frame, error) {
	f := Frame{Data: b}
	hasMethod := false
	var seen uint8  // bit i: rpcKeys[i] was seen
	var pseen uint8 // bit i: paramKeys[i] was seen in params
	param := func(key []byte, vi int) (int, error) {
		if k := paramKeyIndex(key); k >= 0 {
			if pseen&(1<<k) != 0 {
				return 0, &AmbiguousKeyError{Key: string(key), Duplicate: true, In: "params"}
			}
			pseen |= 1 << k
		} else if len(key) <= 4*maxParamKey && foldsTo(key, paramKeys[:]) {
			return 0, &AmbiguousKeyError{Key: string(key), In: "params"}
		}
		return skipValue(b, vi), nil
	}
	_, err := walkObject(b, skipSpace(b, 0), func(key []byte, vi int) (int, error) {
		if k := rpcKeyIndex(key); k >= 0 {
			if seen&(1<<k) != 0 {
				return 0, &AmbiguousKeyError{Key: string(key), Duplicate: true}
			}
			seen |= 1 << k
		} else if len(key) <= 4*len("jsonrpc") && foldsTo(key, rpcKeys[:]) {
			return 0, &AmbiguousKeyError{Key: string(key)}
		}
		if b[vi] == '{' && string(key) == "params" {
			return walkObject(b, vi, param)
		}
		end := skipValue(b, vi)
		val := b[vi:end]
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
					f.Method = unquote(val)
				}
			}
		}
		return end, nil
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
	default:
		f.Kind = FrameOther
	}
	return f, nil
}

// eachMember calls fn with each top-level key (unescaped) and raw value of
// the JSON object b, which must be valid JSON, in order; it stops at fn's
// first error and returns it. It returns ErrNotObject when b is not an
// object. ParseFrame and the session-id lookup both walk objects with
// walkObject, so a key is read the same way everywhere.
func eachMember(b []byte, fn func(key, val []byte) error) error {
	_, err := walkObject(b, skipSpace(b, 0), func(key []byte, vi int) (int, error) {
		end := skipValue(b, vi)
		return end, fn(key, b[vi:end])
	})
	return err
}

// EachMember is eachMember for other packages: the HTTP adapter checks
// the JSON bodies it decodes with encoding/json by the same walk.
func EachMember(b []byte, fn func(key, val []byte) error) error { return eachMember(b, fn) }

// EachElement calls fn with each raw element of the JSON array b, which
// must be valid JSON and start with '[', in order; it stops at fn's first
// error and returns it. Like EachMember it allocates nothing per element.
func EachElement(b []byte, fn func(val []byte) error) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil
	}
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] != ']' {
		if b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		end := skipValue(b, i)
		if err := fn(b[i:end]); err != nil {
			return err
		}
		i = skipSpace(b, end)
	}
	return nil
}

// walkObject walks the members of the object starting at b[i] (b is valid
// JSON), calling fn with each key (unescaped) and the index of its value;
// fn returns the index just past the value (it may walk the value itself
// rather than skip it) or an error, which stops the walk. walkObject
// returns the index just past the object, or ErrNotObject when b[i] does
// not start one.
func walkObject(b []byte, i int, fn func(key []byte, vi int) (int, error)) (int, error) {
	if i >= len(b) || b[i] != '{' {
		return i, ErrNotObject
	}
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
		end, err := fn(key, i)
		if err != nil {
			return end, err
		}
		i = skipSpace(b, end)
	}
	return i + 1, nil
}

// rpcKeyIndex is the index of key in rpcKeys, or -1.
func rpcKeyIndex(key []byte) int {
	switch string(key) {
	case "jsonrpc":
		return 0
	case "id":
		return 1
	case "method":
		return 2
	case "params":
		return 3
	case "result":
		return 4
	case "error":
		return 5
	}
	return -1
}

// unquote decodes the JSON string v (rarely needed: an escaped method);
// apart from peekValid so its pointer does not move the frame to the heap.
func unquote(v []byte) string {
	var s string
	_ = json.Unmarshal(v, &s)
	return s
}

// paramKeyIndex is the index of key in paramKeys, or -1.
func paramKeyIndex(key []byte) int {
	if string(key) == "sessionId" {
		return 0
	}
	return -1
}

// maxParamKey is the length of the longest of paramKeys.
const maxParamKey = len("sessionId")

// foldsTo reports whether key, which is not exactly one of keys, equals
// one of them under Unicode case folding, the rule encoding/json uses to
// match members to fields (so "ſ", U+017F, matches "s"). The caller
// bounds len(key): a folded rune is at most 4 bytes.
func foldsTo(key []byte, keys []string) bool {
	for _, k := range keys {
		if bytes.EqualFold(key, []byte(k)) {
			return true
		}
	}
	return false
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
