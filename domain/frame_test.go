package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseFrame(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		kind   FrameKind
		id     string // raw id; "" when absent
		noID   bool
		method string
		data   string // expected Data; "" means the input unchanged
	}{
		{name: "request", in: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, kind: FrameRequest, id: `1`, method: "initialize"},
		{name: "method before id", in: `{"method":"session/new","id":"abc"}`, kind: FrameRequest, id: `"abc"`, method: "session/new"},
		{name: "notification", in: `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`, kind: FrameNotification, noID: true, method: "session/cancel"},
		{name: "response with result", in: `{"jsonrpc":"2.0","id":3,"result":{"ok":true}}`, kind: FrameResponse, id: `3`},
		{name: "response with error", in: `{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"x"}}`, kind: FrameResponse, id: `3`},
		{name: "empty object", in: `{}`, kind: FrameOther, noID: true},
		{name: "neither key", in: `{"jsonrpc":"2.0","result":1}`, kind: FrameOther, noID: true},
		{name: "id null is present", in: `{"id":null,"method":"m"}`, kind: FrameRequest, id: `null`, method: "m"},
		{name: "id zero is present", in: `{"id":0,"method":"m"}`, kind: FrameRequest, id: `0`, method: "m"},
		{name: "id string 7", in: `{"id":"7","method":"m"}`, kind: FrameRequest, id: `"7"`, method: "m"},
		{name: "id number 7", in: `{"id":7,"method":"m"}`, kind: FrameRequest, id: `7`, method: "m"},
		{name: "id negative float", in: `{"id":-1.5e3,"result":null}`, kind: FrameResponse, id: `-1.5e3`},
		{name: "id object", in: `{"id":{"a":[1,{"id":2}],"b":"}"},"method":"m"}`, kind: FrameRequest, id: `{"a":[1,{"id":2}],"b":"}"}`, method: "m"},
		{name: "id array", in: `{"id":[1,"]"],"result":0}`, kind: FrameResponse, id: `[1,"]"]`},
		{name: "id true", in: `{"id":true}`, kind: FrameResponse, id: `true`},
		{name: "id string with escapes", in: `{"id":"a\"b\\","method":"m"}`, kind: FrameRequest, id: `"a\"b\\"`, method: "m"},
		{name: "escaped id key", in: `{"\u0069d":5,"method":"m"}`, kind: FrameRequest, id: `5`, method: "m"},
		{name: "escaped method key", in: `{"m\u0065thod":"x"}`, kind: FrameNotification, noID: true, method: "x"},
		{name: "escaped method value", in: `{"method":"session\/prompt","id":1}`, kind: FrameRequest, id: `1`, method: "session/prompt"},
		{name: "unicode method value", in: `{"method":"\u00e9t\u00e9"}`, kind: FrameNotification, noID: true, method: "été"},
		{name: "method non-string", in: `{"method":5,"id":1}`, kind: FrameRequest, id: `1`, method: ""},
		{name: "method null", in: `{"method":null}`, kind: FrameNotification, noID: true, method: ""},
		{name: "method object", in: `{"method":{"id":1}}`, kind: FrameNotification, noID: true, method: ""},
		{name: "nested id in params not counted", in: `{"method":"n","params":{"id":1,"method":"inner"}}`, kind: FrameNotification, noID: true, method: "n"},
		{name: "nested id in array not counted", in: `{"params":[{"id":1},{"method":"x"}]}`, kind: FrameOther, noID: true},
		{name: "id text inside a string not counted", in: `{"method":"n","params":"\"id\":1"}`, kind: FrameNotification, noID: true, method: "n"},
		{name: "key with escaped quote", in: `{"a\"id":1,"x\\":2}`, kind: FrameOther, noID: true},
		{name: "key that is a prefix", in: `{"ids":1,"methods":"x"}`, kind: FrameOther, noID: true},
		{name: "other members may repeat", in: `{"id":1,"x":1,"x":2,"X":3,"params":{"id":1,"ID":2,"id":3}}`, kind: FrameResponse, id: `1`},
		{name: "params members the daemon does not read may repeat", in: `{"method":"p","params":{"sessionId":"s","prompt":1,"Prompt":2,"x":{"sessionId":1,"SESSIONID":2}}}`, kind: FrameNotification, noID: true, method: "p"},
		{name: "params session id in an array is not read", in: `{"method":"p","params":[{"sessionId":"a","SessionId":"b"}]}`, kind: FrameNotification, noID: true, method: "p"},
		{name: "params after a session id spelt exactly", in: `{"id":2,"method":"p","params":{"sessionId":"s","sessionIds":["t"]},"jsonrpc":"2.0"}`, kind: FrameRequest, id: `2`, method: "p"},
		{name: "near names are not variants", in: `{"ids":1,"Methods":"x","jsonrpc2":0}`, kind: FrameOther, noID: true},
		{name: "spaces and tabs kept", in: " \t{ \"id\" : 1 ,\t\"method\" : \"m\" } ", kind: FrameRequest, id: `1`, method: "m"},
		{name: "LF compacted", in: "{\n  \"id\": 1,\n  \"method\": \"m\",\n  \"params\": {\"text\": \"a b\"}\n}\n", kind: FrameRequest, id: `1`, method: "m",
			data: `{"id":1,"method":"m","params":{"text":"a b"}}`},
		{name: "CRLF compacted", in: "{\"method\":\"n\",\r\n\"params\":[1, 2]}", kind: FrameNotification, noID: true, method: "n",
			data: `{"method":"n","params":[1,2]}`},
		{name: "lone CR compacted", in: "{\"id\":\r7}", kind: FrameResponse, id: `7`, data: `{"id":7}`},
		{name: "escaped newline in a string is not raw", in: `{"method":"n","params":"a\nb"}`, kind: FrameNotification, noID: true, method: "n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			f, err := ParseFrame(in)
			if err != nil {
				t.Fatalf("ParseFrame: %v", err)
			}
			if f.Kind != tt.kind {
				t.Errorf("kind = %v, want %v", f.Kind, tt.kind)
			}
			if tt.noID {
				if f.ID != nil {
					t.Errorf("id = %q, want absent", f.ID)
				}
				if f.IDKey() != "" {
					t.Errorf("IDKey = %q, want empty", f.IDKey())
				}
			} else if string(f.ID) != tt.id {
				t.Errorf("id = %q, want %q", f.ID, tt.id)
			}
			if f.Method != tt.method {
				t.Errorf("method = %q, want %q", f.Method, tt.method)
			}
			want := tt.data
			if want == "" {
				want = tt.in
				if len(in) > 0 && &f.Data[0] != &in[0] {
					t.Errorf("Data does not alias the input")
				}
			}
			if string(f.Data) != want {
				t.Errorf("data = %q, want %q", f.Data, want)
			}
		})
	}
}

func TestParseFrameErrors(t *testing.T) {
	tests := []struct {
		in   string
		want error
	}{
		{``, ErrNotJSON},
		{` `, ErrNotJSON},
		{`{`, ErrNotJSON},
		{`{"id":}`, ErrNotJSON},
		{`{"id":1,}`, ErrNotJSON},
		{`{}{}`, ErrNotJSON},
		{`{"a":1}x`, ErrNotJSON},
		{`{'id':1}`, ErrNotJSON},
		{"{\"method\":\"a\nb\"}", ErrNotJSON}, // raw newline inside a string
		{`{"id":01}`, ErrNotJSON},
		{`[]`, ErrNotObject},
		{`[{"jsonrpc":"2.0","id":1,"method":"m"}]`, ErrNotObject},
		{"[\n{}\n]", ErrNotObject},
		{`1`, ErrNotObject},
		{`"{}"`, ErrNotObject},
		{`null`, ErrNotObject},
		{`true`, ErrNotObject},
		{` 7 `, ErrNotObject},
		{`{"id":1,"method":"m","id":2}`, ErrAmbiguousKey},
		{`{"method":"initialize","method":"session/new"}`, ErrAmbiguousKey},
		{`{"method":"a","m\u0065thod":"b"}`, ErrAmbiguousKey},
		{`{"jsonrpc":"2.0","jsonrpc":"2.0"}`, ErrAmbiguousKey},
		{`{"id":1,"result":1,"error":{},"result":2}`, ErrAmbiguousKey},
		{`{"method":"initialize","Method":"session/new"}`, ErrAmbiguousKey},
		{`{"METHOD":"session/new"}`, ErrAmbiguousKey},
		{`{"ID":1,"Method":"x"}`, ErrAmbiguousKey},
		{`{"Params":{}}`, ErrAmbiguousKey},
		{`{"Error":{}}`, ErrAmbiguousKey},
		{`{"jsonRPC":"2.0"}`, ErrAmbiguousKey},
		{`{"m\u0045thod":"x"}`, ErrAmbiguousKey},
		{"{\"param\u017f\":1}", ErrAmbiguousKey},    // U+017F long s folds to s
		{"{\"j\xc5\xbfonrpc\":1}", ErrAmbiguousKey}, // the same, raw UTF-8
		// Inside params, the session id the daemon routes on.
		{`{"method":"session/prompt","params":{"sessionId":"A","SESSIONID":"B"}}`, ErrAmbiguousKey},
		{`{"method":"session/prompt","params":{"sessionid":"B","sessionId":"A"}}`, ErrAmbiguousKey},
		{"{\"method\":\"p\",\"params\":{\"sessionId\":\"A\",\"\u017fessionId\":\"B\"}}", ErrAmbiguousKey},
		{`{"method":"p","params":{"sessionId":"A","sessionId":"B"}}`, ErrAmbiguousKey},
		{`{"method":"p","params":{"sessionId":"A","s\u0045ssionId":"B"}}`, ErrAmbiguousKey},
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.in), func(t *testing.T) {
			f, err := ParseFrame([]byte(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if f.Data != nil || f.ID != nil || f.Kind != FrameOther || f.Method != "" {
				t.Errorf("frame not zero on error: %+v", f)
			}
		})
	}
}

func TestFrameKindString(t *testing.T) {
	for k, want := range map[FrameKind]string{FrameRequest: "request", FrameNotification: "notification", FrameResponse: "response", FrameOther: "other", 99: "other"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", k, got, want)
		}
	}
}

func TestCanonicalID(t *testing.T) {
	same := [][]string{
		{`7`, `7.0`, `7e0`, `7E0`, `70e-1`, `0.7e1`, ` 7 `, "\t7\n", `7.000`},
		{`0`, `-0`, `0.0`, `0e5`, `-0.0`},
		{`-3`, `-3.0`, `-30e-1`},
		{`1.5`, `15e-1`, `1.50`},
		{`"7"`, `"\u0037"`, ` "7"`},
		{`"a/b"`, `"a\/b"`, `"\u0061/b"`},
		{`"é"`, `"\u00e9"`, `"\u00E9"`},
		{`"a\"b"`, `"a\u0022b"`},
		{`{"a":[1,2]}`, `{ "a" : [ 1 , 2 ] }`, "{\n\"a\":[1,2]}"},
		{`null`, ` null `},
	}
	for _, group := range same {
		want := CanonicalID([]byte(group[0]))
		for _, raw := range group[1:] {
			if got := CanonicalID([]byte(raw)); got != want {
				t.Errorf("CanonicalID(%s) = %q, want %q (same as %s)", raw, got, want, group[0])
			}
		}
	}

	distinct := []string{
		`7`, `"7"`, `8`, `7.5`, `"7.0"`, `"07"`, `null`, `"null"`, `true`, `"true"`, `false`,
		`[7]`, `{"7":7}`, `""`, `" 7"`, `9007199254740993`, `9007199254740992`, `{}`, `[]`, `"{}"`,
	}
	seen := map[string]string{}
	for _, raw := range distinct {
		k := CanonicalID([]byte(raw))
		if prev, dup := seen[k]; dup {
			t.Errorf("CanonicalID(%s) = CanonicalID(%s) = %q, want them distinct", raw, prev, k)
		}
		seen[k] = raw
	}

	exact := map[string]string{
		``:         "",
		`  `:       "",
		`7`:        "n:7",
		`7.0`:      "n:7",
		`-12e1`:    "n:-120",
		`1.25`:     "n:1.25",
		`"7"`:      "s:7",
		`"a\nb"`:   "s:a\nb",
		`null`:     "j:null",
		`[1, 2]`:   "j:[1,2]",
		`1e400`:    "j:1e400", // out of float range: kept as written
		`"\ud800"`: "s:\ufffd",
	}
	for raw, want := range exact {
		if got := CanonicalID([]byte(raw)); got != want {
			t.Errorf("CanonicalID(%q) = %q, want %q", raw, got, want)
		}
	}
}

// FuzzParseFrame holds ParseFrame to encoding/json: it never panics, accepts
// exactly the valid JSON objects, classifies them by the same top-level keys
// a map decode sees, and yields Data that is valid single-line JSON with the
// same meaning as the input.
func FuzzParseFrame(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		`{"method":"n","params":{"id":1}}`,
		`{"id":null}`, `{}`, `[]`, `7`, `"x"`, ``, `{`,
		`{"\u0069d":"7","m\u0065thod":5}`,
		"{\n\"id\" :\r\n 1}",
		`{"a\"id":1,"id":[{"}":"{"}],"method":"\u00e9"}`,
		`{"id":1,"id":2,"method":"a","method":null}`,
		"{\"method\":\"\xff\"}",
		`{"method":"initialize","Method":"session/new"}`, `{"METHOD":"x"}`,
		"{\"\u0130d\":1}", "{\"\u0131d\":1}", "{\"para\u212Ams\":1}", "{\"re\xc5\xbfult\":1}",
		`{"method":"session/prompt","params":{"sessionId":"A","SESSIONID":"B"}}`,
		`{"method":"session/prompt","params":{"sessionId":"A","sessionid":"B"}}`,
		"{\"method\":\"p\",\"params\":{\"\xc5\xbfessionId\":\"B\",\"sessionId\":\"A\"}}",
		`{"method":"p","params":{"sessionId":"A","sessionId":"B"}}`,
		`{"method":"p","params":{"s\u0065ssionId":"A","x":{"SESSIONID":1}}}`,
		`{"method":"p","params":[{"sessionId":"A","SessionId":"B"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		orig := bytes.Clone(b)
		fr, err := ParseFrame(b)
		if !bytes.Equal(b, orig) {
			t.Fatalf("ParseFrame modified its input")
		}
		if !json.Valid(b) {
			if !errors.Is(err, ErrNotJSON) {
				t.Fatalf("invalid JSON %q: err = %v, want ErrNotJSON", b, err)
			}
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(b, &m) != nil || m == nil {
			if !errors.Is(err, ErrNotObject) {
				t.Fatalf("non-object %q: err = %v, want ErrNotObject", b, err)
			}
			return
		}
		if errors.Is(err, ErrAmbiguousKey) {
			if !ambiguous(t, b) {
				t.Fatalf("%q refused as ambiguous: %v", b, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("object %q: %v", b, err)
		}
		if ambiguous(t, b) {
			t.Fatalf("%q accepted, but its JSON-RPC members are ambiguous", b)
		}
		agreeWithGo(t, b, fr)

		id, hasID := m["id"]
		method, hasMethod := m["method"]
		var want FrameKind
		switch {
		case hasMethod && hasID:
			want = FrameRequest
		case hasMethod:
			want = FrameNotification
		case hasID:
			want = FrameResponse
		default:
			want = FrameOther
		}
		if fr.Kind != want {
			t.Fatalf("%q: kind = %v, want %v", b, fr.Kind, want)
		}
		if hasID {
			if fr.ID == nil || compact(t, fr.ID) != compact(t, id) {
				t.Fatalf("%q: id = %q, want %q", b, fr.ID, id)
			}
			if fr.IDKey() != CanonicalID(id) {
				t.Fatalf("%q: IDKey = %q, want %q", b, fr.IDKey(), CanonicalID(id))
			}
		} else if fr.ID != nil {
			t.Fatalf("%q: id = %q, want absent", b, fr.ID)
		}
		var s string
		if hasMethod && json.Unmarshal(method, &s) == nil && utf8.Valid(method) && fr.Method != s {
			t.Fatalf("%q: method = %q, want %q", b, fr.Method, s)
		}
		if hasMethod && !bytes.HasPrefix(bytes.TrimSpace(method), []byte(`"`)) && fr.Method != "" {
			t.Fatalf("%q: non-string method peeked as %q", b, fr.Method)
		}

		if !json.Valid(fr.Data) || bytes.ContainsAny(fr.Data, "\r\n") {
			t.Fatalf("%q: Data %q is not single-line JSON", b, fr.Data)
		}
		if compact(t, fr.Data) != compact(t, b) {
			t.Fatalf("%q: Data %q changed the message", b, fr.Data)
		}
		if !bytes.ContainsAny(b, "\r\n") && !bytes.Equal(fr.Data, b) {
			t.Fatalf("%q: single-line input changed to %q", b, fr.Data)
		}
	})
}

// ambiguous is the slow reference for ErrAmbiguousKey: it walks the
// top-level members with a token decoder and reports a JSON-RPC member
// given twice or a member equal to one under case folding but not exactly.
func ambiguous(t *testing.T, b []byte) bool {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%q: not an object: %v %v", b, tok, err)
	}
	seen := map[string]bool{}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			t.Fatal(err)
		}
		key := tok.(string)
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			t.Fatal(err)
		}
		for _, k := range rpcKeys {
			switch {
			case key == k && seen[k]:
				return true
			case key == k:
				seen[k] = true
			case strings.EqualFold(key, k):
				return true
			}
		}
		if key == "params" && ambiguousParams(t, skip) {
			return true
		}
	}
	return false
}

// ambiguousParams is the reference for the params rule: a member of an
// object params among the ones the daemon reads (sessionId) given twice,
// or a member equal to one under case folding but not exactly.
func ambiguousParams(t *testing.T, b []byte) bool {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return false // not an object: nothing is read in it
	}
	seen := false
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			t.Fatal(err)
		}
		key := tok.(string)
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			t.Fatal(err)
		}
		switch {
		case key == "sessionId" && seen:
			return true
		case key == "sessionId":
			seen = true
		case strings.EqualFold(key, "sessionId"):
			return true
		}
	}
	return false
}

// agreeWithGo checks an accepted frame against what an acp-go-sdk agent
// would decode (encoding/json into a struct: case-insensitive, last wins)
// and what a JavaScript agent would (JSON.parse: exact names, last wins,
// which a map decode reproduces).
func agreeWithGo(t *testing.T, b []byte, fr Frame) {
	t.Helper()
	var goMsg struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(b, &goMsg); err != nil {
		t.Fatalf("%q: Go struct decode: %v", b, err)
	}
	var js map[string]json.RawMessage
	if err := json.Unmarshal(b, &js); err != nil {
		t.Fatal(err)
	}
	for _, dec := range []struct {
		name   string
		id     []byte
		hasID  bool
		method []byte
	}{
		{"Go struct", goMsg.ID, goMsg.ID != nil, goMsg.Method},
		{"JSON.parse", js["id"], js["id"] != nil, js["method"]},
	} {
		if dec.hasID != (fr.ID != nil) || (dec.hasID && CanonicalID(dec.id) != fr.IDKey()) {
			t.Fatalf("%q: daemon id %q, %s id %q", b, fr.ID, dec.name, dec.id)
		}
		var s string
		if dec.method != nil && json.Unmarshal(dec.method, &s) == nil && utf8.Valid(dec.method) && s != fr.Method {
			t.Fatalf("%q: daemon method %q, %s method %q", b, fr.Method, dec.name, s)
		}
		if (dec.method != nil) != (fr.Kind == FrameRequest || fr.Kind == FrameNotification) {
			t.Fatalf("%q: daemon kind %v, %s method %q", b, fr.Kind, dec.name, dec.method)
		}
	}
	// The session id the daemon routes on is the one both agents read.
	session, hasSession := SessionID(fr.Data)
	var goParams struct {
		SessionID *string `json:"sessionId"`
	}
	goOK := goMsg.Params != nil && json.Unmarshal(goMsg.Params, &goParams) == nil && goParams.SessionID != nil
	var jsParams map[string]json.RawMessage
	var jsSession string
	jsOK := js["params"] != nil && json.Unmarshal(js["params"], &jsParams) == nil && jsParams["sessionId"] != nil &&
		json.Unmarshal(jsParams["sessionId"], &jsSession) == nil
	if goOK && jsOK && utf8.Valid(goMsg.Params) {
		if !hasSession || session != *goParams.SessionID || session != jsSession {
			t.Fatalf("%q: daemon session %q (%v), Go agent %q, JavaScript agent %q", b, session, hasSession, *goParams.SessionID, jsSession)
		}
	}
}

func compact(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("compact %q: %v", b, err)
	}
	return buf.String()
}

// FuzzCanonicalID checks that the canonical key keeps the JSON type and
// forgets only spelling: escapes in strings, number format, whitespace.
func FuzzCanonicalID(f *testing.F) {
	for _, s := range []string{`7`, `"7"`, `7.0`, `-0`, `1e400`, `"\u0037"`, `null`, `{"a": [1]}`, `0.1`, `""`, `"\ud800"`, `123456789012345678901234567890`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		k := CanonicalID(raw)
		if k != CanonicalID(raw) {
			t.Fatalf("not deterministic")
		}
		if !json.Valid(raw) {
			return
		}
		var v any
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			t.Fatal(err)
		}
		switch v := v.(type) {
		case string:
			if k[:2] != "s:" {
				t.Fatalf("%q: string id got key %q", raw, k)
			}
			if utf8.Valid(raw) {
				again, _ := json.Marshal(v)
				if k2 := CanonicalID(again); k2 != k {
					t.Fatalf("%q and %s: keys %q and %q differ", raw, again, k, k2)
				}
			}
		case json.Number:
			if k[:2] != "n:" && k[:2] != "j:" {
				t.Fatalf("%q: number id got key %q", raw, k)
			}
			fl, err := strconv.ParseFloat(string(v), 64)
			if err == nil && fl == float64(int64(fl)) && fl > -(1<<53) && fl < 1<<53 {
				if want := "n:" + strconv.FormatInt(int64(fl), 10); k != want {
					t.Fatalf("%q: key %q, want %q", raw, k, want)
				}
			}
		default:
			if k[:2] != "j:" {
				t.Fatalf("%q: %T id got key %q", raw, v, k)
			}
			var buf bytes.Buffer
			_ = json.Compact(&buf, raw)
			if k2 := CanonicalID(buf.Bytes()); k2 != k {
				t.Fatalf("%q: compacted key %q differs from %q", raw, k2, k)
			}
		}
	})
}

func TestEachElement(t *testing.T) {
	var got []string
	err := EachElement([]byte(` [ 1 , "a,]" ,{"x":[1,2]}, [ ] ,null,"\"]"]`), func(v []byte) error {
		got = append(got, string(v))
		return nil
	})
	want := []string{`1`, `"a,]"`, `{"x":[1,2]}`, `[ ]`, `null`, `"\"]"`}
	if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q %v, want %q", got, err, want)
	}
	stop := errors.New("stop")
	n := 0
	if err := EachElement([]byte(`[1,2,3]`), func([]byte) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("stop: %v after %d", err, n)
	}
	if err := EachElement([]byte(`[]`), func([]byte) error { t.Error("called"); return nil }); err != nil {
		t.Error(err)
	}
}

func TestCheckRequestID(t *testing.T) {
	for in, want := range map[string]error{
		`{"id":{"a":1},"method":"m"}`: ErrRequestID,
		`{"id":[1],"method":"m"}`:     ErrRequestID,
		`{"id":true,"method":"m"}`:    ErrRequestID,
		`{"id": false ,"method":"m"}`: ErrRequestID,
		`{"id":null,"method":"m"}`:    nil,
		`{"id":-0.5e3,"method":"m"}`:  nil,
		`{"id":"{","method":"m"}`:     nil,
		`{"id":{},"result":1}`:        nil, // a response: the agent's business
		`{"method":"m"}`:              nil,
	} {
		f, err := ParseFrame([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := CheckRequestID(f); got != want {
			t.Errorf("CheckRequestID(%s) = %v, want %v", in, got, want)
		}
	}
}
