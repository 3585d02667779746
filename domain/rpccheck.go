package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// JSON-RPC 2.0 error codes (§5.1) for a line that is not a message a peer
// can act on.
const (
	CodeParseError     = -32700 // not JSON
	CodeInvalidRequest = -32600 // JSON, but not a valid JSON-RPC message
)

// RPCError is what a JSON-RPC peer reading one message per line (an ACP
// agent on stdio) answers a line it cannot act on with. The daemon itself
// passes frames through unjudged; the stdio bridge and the mock agent answer
// with it, so a client waiting for an answer gets one.
type RPCError struct {
	Code   int    // CodeParseError or CodeInvalidRequest
	Reason string // what is wrong, sent as error.data
	// ID is the raw id to answer with: the message's own id when it is a
	// request whose id could be read, else nil (answered as null).
	ID []byte
}

func (e *RPCError) Error() string { return e.message() + ": " + e.Reason }

func (e *RPCError) message() string {
	if e.Code == CodeParseError {
		return "Parse error"
	}
	return "Invalid Request"
}

// Response is the JSON-RPC error response for e, one line without its line
// ending: {"jsonrpc":"2.0","id":…,"error":{"code":…,"message":…,"data":…}}.
func (e *RPCError) Response() []byte {
	id := e.ID
	if id == nil {
		id = []byte("null")
	}
	reason, _ := json.Marshal(e.Reason)
	b := make([]byte, 0, 80+len(id)+len(reason))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, int64(e.Code), 10)
	b = append(b, `,"message":"`...)
	b = append(b, e.message()...)
	b = append(b, `","data":`...)
	b = append(b, reason...)
	return append(b, "}}"...)
}

// CheckMessage parses b as ParseFrame does and checks that it is one
// JSON-RPC 2.0 message a peer can act on (§4, §5):
//
//   - "jsonrpc" is exactly "2.0";
//   - a request or notification has a string "method", an "id" (if any)
//     that is a string, a number or null, and "params" (if any) that is an
//     object or an array (null is taken as absent, as serde-based peers
//     write it);
//   - a response (no "method", and a "result" or an "error") has such an
//     id, exactly one of "result" and "error", and an error that is an
//     object with an integer "code" and a string "message".
//
// Otherwise it returns the error to answer with: CodeParseError (id null)
// for a line that is not JSON, CodeInvalidRequest for anything else. The
// answer carries the message's id only when the message is a request (it
// has no "result" or "error") whose id has a valid type; a malformed
// response is answered with id null, since its id is one the other side
// chose and echoing it could settle an unrelated request of ours. A JSON
// array (a batch, which ACP does not use) gets one CodeInvalidRequest with
// id null, as JSON-RPC prescribes for an empty one, and as the TypeScript
// SDK and the daemon's WebSocket transport answer any batch.
func CheckMessage(b []byte) (Frame, *RPCError) {
	f, err := ParseFrame(b)
	switch {
	case errors.Is(err, ErrNotJSON):
		return Frame{}, &RPCError{Code: CodeParseError, Reason: "the line is not JSON"}
	case errors.Is(err, ErrNotObject):
		reason := "a message is a JSON object"
		if t := bytes.TrimLeft(b, " \t\r\n"); len(t) > 0 && t[0] == '[' {
			reason = "JSON-RPC batches are not supported"
		}
		return Frame{}, &RPCError{Code: CodeInvalidRequest, Reason: reason}
	case err != nil:
		return Frame{}, &RPCError{Code: CodeInvalidRequest, Reason: err.Error()}
	}
	var version, id, method, params, result, rpcErr []byte
	_ = eachMember(f.Data, func(key, val []byte) error {
		switch string(key) {
		case "jsonrpc":
			version = val
		case "id":
			id = val
		case "method":
			method = val
		case "params":
			params = val
		case "result":
			result = val
		case "error":
			rpcErr = val
		}
		return nil
	})
	invalid := func(reason string, id []byte) (Frame, *RPCError) {
		return Frame{}, &RPCError{Code: CodeInvalidRequest, Reason: reason, ID: id}
	}
	idOK := id == nil || validID(id)
	if method == nil && (result != nil || rpcErr != nil) {
		// A response: never answered with its own id.
		switch {
		case !isVersion2(version):
			return invalid(`"jsonrpc" must be "2.0"`, nil)
		case id == nil:
			return invalid(`a response needs an "id"`, nil)
		case !idOK:
			return invalid(`"id" must be a string, a number or null`, nil)
		case result != nil && rpcErr != nil:
			return invalid(`a response has "result" or "error", not both`, nil)
		case rpcErr != nil && !validErrorObject(rpcErr):
			return invalid(`"error" must be an object with an integer "code" and a string "message"`, nil)
		}
		return f, nil
	}
	answerID := []byte(nil)
	if id != nil && idOK {
		answerID = id
	}
	switch {
	case method == nil && id == nil:
		return invalid(`not a JSON-RPC message: no "method", "id", "result" or "error"`, nil)
	case !idOK:
		return invalid(`"id" must be a string, a number or null`, nil)
	case !isVersion2(version):
		return invalid(`"jsonrpc" must be "2.0"`, answerID)
	case method == nil:
		return invalid(`a request needs a "method"`, answerID)
	case method[0] != '"':
		return invalid(`"method" must be a string`, answerID)
	case params != nil && params[0] != '{' && params[0] != '[' && string(params) != "null":
		return invalid(`"params" must be an object or an array`, answerID)
	}
	return f, nil
}

// isVersion2 reports whether the raw "jsonrpc" value is the string "2.0",
// however it is escaped.
func isVersion2(raw []byte) bool {
	if string(raw) == `"2.0"` {
		return true
	}
	var s string
	return len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil && s == "2.0"
}

// validID reports whether a raw id is a string, a number or null.
func validID(raw []byte) bool {
	switch c := raw[0]; {
	case c == '"', c == '-', c >= '0' && c <= '9':
		return true
	}
	return string(raw) == "null"
}

// validErrorObject reports whether a raw "error" value is an object with an
// integer "code" and a string "message".
func validErrorObject(raw []byte) bool {
	if raw[0] != '{' {
		return false
	}
	var code, msg []byte
	_ = eachMember(raw, func(key, val []byte) error {
		switch string(key) {
		case "code":
			code = val
		case "message":
			msg = val
		}
		return nil
	})
	if msg == nil || msg[0] != '"' || code == nil {
		return false
	}
	digits := bytes.TrimPrefix(code, []byte("-"))
	if len(digits) == 0 {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
