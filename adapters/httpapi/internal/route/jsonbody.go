package route

import (
	"bytes"
	"cmp"
	"context"
	"encoding"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// The JSON bodies huma decodes (fs move, processes, agent install, ...) are
// read here first, before huma sees them, for two rules every byte and
// every field the daemon acts on follow:
//
//   - the body is charged to --inflight-bytes as it arrives, bounded by the
//     operation's limit (a declared Content-Length past it is refused at
//     once), and stays charged, with what decoding it costs, until the
//     request is answered;
//   - a member given twice, or spelt in another case, where encoding/json
//     would match it to the same field of the body's Go type (it matches
//     names case-insensitively and keeps the last) is refused with 400
//     "ambiguous": a policy, a log line or a JavaScript client reads one
//     of them, the daemon would act on the other. Maps decode names
//     exactly and are left alone (environment variables differ by case).
//
// Raw bodies (ACP messages, file uploads, config documents) are read by
// their own routes, as streams or charged the same way.

// metaJSONBody marks an operation whose Body huma decodes; its value is the
// body's Go type. MetaBodyLimit, when set, is a func() int64 giving the
// operation's body limit now (the process input's follows the runtime
// configuration), instead of its MaxBodyBytes. MetaPeekBody marks an
// operation whose describe function reads the body (the move's paths), so
// the body is read before the auth chain runs.
const (
	metaJSONBody  = "sandbox-agent.jsonBody"
	MetaBodyLimit = "sandbox-agent.bodyLimit"
	MetaPeekBody  = "sandbox-agent.peekBody"
)

// DecodeCost is how many times its size a JSON body is held while huma
// decodes it, on top of the buffer it was read into: huma's copy, the
// generic value it validates, and the typed value.
const DecodeCost = 3

// markJSONBody records the Go type of an operation's decoded body, for the
// middleware (route calls it for every operation).
func markJSONBody[I any](op *huma.Operation) {
	if f, ok := reflect.TypeFor[I]().FieldByName("Body"); ok {
		op.Metadata[metaJSONBody] = f.Type
	}
}

type peekedBodyKey struct{}

// PeekedBody is the body read before the chain ran, for a describe
// function of a MetaPeekBody operation; nil when there was none.
func PeekedBody(hctx huma.Context) []byte {
	b, _ := hctx.Context().Value(peekedBodyKey{}).([]byte)
	return b
}

// readJSONBody reads the body of a metaJSONBody operation, charged, checks
// its members against the body's type, and puts it back for huma. It
// returns the body and what it charged (to be given back when the request
// is answered, also on error).
func readJSONBody(r *http.Request, op *huma.Operation, budget *Inflight) ([]byte, int64, error) {
	t, ok := op.Metadata[metaJSONBody].(reflect.Type)
	if !ok || r.Body == nil || r.Body == http.NoBody {
		return nil, 0, nil
	}
	limit := op.MaxBodyBytes
	if f, ok := op.Metadata[MetaBodyLimit].(func() int64); ok {
		limit = f()
	}
	limit = cmp.Or(max(limit, 0), 1<<20)
	b, charged, err := ReadCharged(r, limit, budget)
	if err != nil {
		return nil, charged, err
	}
	// Read whole already; what huma makes of it is charged now too.
	if extra := DecodeCost * int64(len(b)); budget != nil {
		if !budget.Take(extra) {
			return nil, charged, budget.Overloaded()
		}
		charged += extra
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	if err := CheckJSONMembers(b, t); err != nil {
		return nil, charged, err
	}
	if err := checkJSONTypes(b, t); err != nil {
		return nil, charged, err
	}
	return b, charged, nil
}

// checkJSONTypes refuses (422, as huma would) a body a member of which has
// the wrong JSON type for t, naming the first one. huma's validator makes
// an error of about 200 bytes for every element that fails (and
// encoding/json one for each as it goes on), so 1 MiB of [1,1,…] where
// strings belong cost 120 MB per request against the 4 MiB charged for
// it. This walk allocates nothing per element. A body that is not valid
// JSON is left to huma (one error); so are values a type decodes itself
// (json.Unmarshaler, encoding.TextUnmarshaler) and the finer rules of the schema.
func checkJSONTypes(b []byte, t reflect.Type) error {
	if !json.Valid(b) {
		return nil
	}
	te := checkTypes(bytes.TrimSpace(b), t)
	if te == nil {
		return nil
	}
	where := "body"
	for i := len(te.path) - 1; i >= 0; i-- {
		where += te.path[i]
	}
	return WithStatus(http.StatusUnprocessableEntity,
		domain.InvalidRequest("validation failed: expected %s, got a JSON %s (%s)", te.want, te.got, where))
}

// typeErr is a value of the wrong JSON type; path holds the steps to it
// (".name", "[3]") innermost first, added on the way out so that a body
// of the right types costs no path strings.
type typeErr struct {
	want, got string
	path      []string
}

func (e *typeErr) at(step string) *typeErr {
	if e != nil {
		e.path = append(e.path, step)
	}
	return e
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func checkTypes(v []byte, t reflect.Type) *typeErr {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if len(v) == 0 || string(v) == "null" || reflect.PointerTo(t).Implements(unmarshalerType) ||
		reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return nil
	}
	wrong := func() *typeErr {
		got := "number"
		switch v[0] {
		case '"':
			got = "string"
		case '{':
			got = "object"
		case '[':
			got = "array"
		case 't', 'f':
			got = "boolean"
		}
		return &typeErr{want: jsonKind(t), got: got}
	}
	switch t.Kind() {
	case reflect.Interface:
		return nil
	case reflect.String:
		if v[0] != '"' {
			return wrong()
		}
	case reflect.Bool:
		if v[0] != 't' && v[0] != 'f' {
			return wrong()
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if v[0] != '-' && (v[0] < '0' || v[0] > '9') || bytes.ContainsAny(v, ".eE") {
			return wrong()
		}
	case reflect.Float32, reflect.Float64:
		if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
			return wrong()
		}
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			if v[0] != '"' { // base64
				return wrong()
			}
			return nil
		}
		if v[0] != '[' {
			return wrong()
		}
		i := 0
		var te *typeErr
		_ = domain.EachElement(v, func(el []byte) error {
			if te = checkTypes(el, t.Elem()).at("[" + strconv.Itoa(i) + "]"); te != nil {
				return errStop
			}
			i++
			return nil
		})
		return te
	case reflect.Map:
		if v[0] != '{' {
			return wrong()
		}
		var te *typeErr
		_ = domain.EachMember(v, func(key, val []byte) error {
			if te = checkTypes(val, t.Elem()); te != nil {
				te.at("[" + strconv.Quote(string(key)) + "]")
				return errStop
			}
			return nil
		})
		return te
	case reflect.Struct:
		if v[0] != '{' {
			return wrong()
		}
		fields := fieldsOf(t)
		var te *typeErr
		_ = domain.EachMember(v, func(key, val []byte) error {
			if i := matchField(fields, key); i >= 0 {
				if te = checkTypes(val, fields[i].typ).at("." + fields[i].name); te != nil {
					return errStop
				}
			}
			return nil
		})
		return te
	}
	return nil
}

// errStop ends a walk early.
var errStop = errors.New("stop")

// jsonKind is the JSON type encoding/json decodes into t.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	default:
		return "object"
	}
}

// withPeekedBody is hctx carrying the body read before the chain.
func withPeekedBody(hctx huma.Context, b []byte) huma.Context {
	if b == nil {
		return hctx
	}
	return huma.WithContext(hctx, context.WithValue(hctx.Context(), peekedBodyKey{}, b))
}

// CheckJSONMembers refuses b when two members of one object would decode
// into the same field of t (see the top of this file). A body that is not
// valid JSON passes: huma refuses it with its own message.
func CheckJSONMembers(b []byte, t reflect.Type) error {
	if !needsCheck(t) || !json.Valid(b) {
		return nil
	}
	return checkValue(bytes.TrimSpace(b), t, "body")
}

// ambiguousBody is the 400 of CheckJSONMembers.
func ambiguousBody(where, key, field string, dup bool) error {
	if dup {
		return Invalid("ambiguous JSON body: member %s of %s appears more than once", strconv.Quote(key), where)
	}
	return Invalid("ambiguous JSON body: members %s and %s of %s are the same field to encoding/json (names match case-insensitively)",
		strconv.Quote(field), strconv.Quote(key), where)
}

func checkValue(v []byte, t reflect.Type, where string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if !needsCheck(t) || len(v) == 0 {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if v[0] != '{' {
			return nil
		}
		fields := fieldsOf(t)
		seen := make([]string, len(fields)) // the key that set each field
		return domain.EachMember(v, func(key, val []byte) error {
			i := matchField(fields, key)
			if i < 0 {
				return nil
			}
			if seen[i] != "" {
				return ambiguousBody(where, string(key), seen[i], seen[i] == string(key))
			}
			seen[i] = string(key)
			return checkValue(val, fields[i].typ, where+"."+fields[i].name)
		})
	case reflect.Map:
		if v[0] != '{' {
			return nil
		}
		return domain.EachMember(v, func(key, val []byte) error {
			return checkValue(val, t.Elem(), where+"["+strconv.Quote(string(key))+"]")
		})
	case reflect.Slice, reflect.Array:
		if v[0] != '[' {
			return nil
		}
		var items []json.RawMessage
		if json.Unmarshal(v, &items) != nil {
			return nil
		}
		for i, it := range items {
			if err := checkValue(bytes.TrimSpace(it), t.Elem(), where+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonField is a field of a struct as encoding/json names it.
type jsonField struct {
	name string
	typ  reflect.Type
}

var fieldCache sync.Map // reflect.Type -> []jsonField

// fieldsOf lists the fields encoding/json decodes into for struct type t:
// exported, promoted from embedded structs, named by their json tag.
func fieldsOf(t reflect.Type) []jsonField {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]jsonField)
	}
	var out []jsonField
	for _, f := range reflect.VisibleFields(t) {
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			continue // flattened: its fields are listed themselves
		}
		name = cmp.Or(name, f.Name)
		out = append(out, jsonField{name: name, typ: f.Type})
	}
	fieldCache.Store(t, out)
	return out
}

// matchField is the field encoding/json decodes key into: the exact name
// first, else one equal under case folding; -1 for none.
func matchField(fields []jsonField, key []byte) int {
	fold := -1
	for i, f := range fields {
		if f.name == string(key) {
			return i
		}
		if fold < 0 && bytes.EqualFold([]byte(f.name), key) {
			fold = i
		}
	}
	return fold
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// needsCheck reports whether a value of type t can hold a struct that
// encoding/json fills by name (a type with its own UnmarshalJSON decodes
// as it likes, and is not looked into).
func needsCheck(t reflect.Type) bool {
	if v, ok := needCache.Load(t); ok {
		return v.(bool)
	}
	v := needs(t, map[reflect.Type]bool{})
	needCache.Store(t, v)
	return v
}

var needCache sync.Map // reflect.Type -> bool

func needs(t reflect.Type, visiting map[reflect.Type]bool) bool {
	if visiting[t] {
		return false
	}
	visiting[t] = true
	if t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler) {
		return false
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return needs(t.Elem(), visiting)
	case reflect.Struct:
		return true
	}
	return false
}
