package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"unicode/utf8"
)

// ErrConfigSyntax marks a config document that is not JSON at all, as
// opposed to JSON of the wrong shape; the HTTP API answers the first 400 and
// the second 422, as the reference's JSON extractor does.
var ErrConfigSyntax = errors.New("invalid JSON")

// jsonField is one member of a JSON object, in document order.
type jsonField struct {
	key string
	raw json.RawMessage
}

// jsonObject is a decoded JSON object that remembers which keys were used,
// so aliases can be resolved and duplicates reported.
type jsonObject struct {
	fields []jsonField
}

// decodeObject reads b as exactly one JSON object. Duplicate keys are an
// error, as in serde.
func decodeObject(b []byte) (*jsonObject, error) {
	if !json.Valid(b) {
		var v any
		err := json.Unmarshal(b, &v)
		if err == nil {
			err = errors.New("unexpected end of input")
		}
		return nil, fmt.Errorf("%w: %v", ErrConfigSyntax, err)
	}
	return objectOf(json.RawMessage(b))
}

// objectOf decodes a valid JSON value that must be an object.
func objectOf(raw json.RawMessage) (*jsonObject, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("invalid type: %s, expected an object", kindOf(raw))
	}
	obj := &jsonObject{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if seen[key] {
			return nil, fmt.Errorf("duplicate field `%s`", key)
		}
		seen[key] = true
		obj.fields = append(obj.fields, jsonField{key, v})
	}
	if _, err := dec.Token(); err != nil && err != io.EOF {
		return nil, err
	}
	return obj, nil
}

// get returns the value of the first present key among names (a field and
// its aliases); two of them present is a duplicate. A JSON null counts as
// absent, as for serde's Option fields.
func (o *jsonObject) get(name string, aliases ...string) (json.RawMessage, bool, error) {
	var found json.RawMessage
	ok := false
	for _, n := range append([]string{name}, aliases...) {
		for _, f := range o.fields {
			if f.key != n {
				continue
			}
			if ok {
				return nil, false, fmt.Errorf("duplicate field `%s`", name)
			}
			found, ok = f.raw, true
		}
	}
	if ok && string(bytes.TrimSpace(found)) == "null" {
		return nil, false, nil
	}
	return found, ok, nil
}

// kindOf names the JSON type of a valid value, for error messages.
func kindOf(raw json.RawMessage) string {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

func fieldErr(field string, err error) error { return fmt.Errorf("%s: %w", field, err) }

func wantType(raw json.RawMessage, want string) error {
	return fmt.Errorf("invalid type: %s, expected %s", kindOf(raw), want)
}

func decodeString(field string, raw json.RawMessage) (string, error) {
	s, err := stringValue(raw)
	if err != nil {
		return "", fieldErr(field, err)
	}
	return s, nil
}

// stringValue decodes the JSON string raw (valid JSON). One without
// escapes is sliced out as it is; encoding/json is needed only for
// escapes and for invalid UTF-8 (which it replaces).
func stringValue(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if kindOf(raw) != "string" {
		return "", wantType(raw, "a string")
	}
	if inner := raw[1 : len(raw)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", err
	}
	return s, nil
}

func decodeOptString(o *jsonObject, field string, aliases ...string) (*string, error) {
	raw, ok, err := o.get(field, aliases...)
	if err != nil || !ok {
		return nil, err
	}
	s, err := decodeString(field, raw)
	return &s, err
}

func decodeOptBool(o *jsonObject, field string) (*bool, error) {
	raw, ok, err := o.get(field)
	if err != nil || !ok {
		return nil, err
	}
	if kindOf(raw) != "boolean" {
		return nil, fieldErr(field, wantType(raw, "a boolean"))
	}
	b := string(bytes.TrimSpace(raw)) == "true"
	return &b, nil
}

func decodeOptUint(o *jsonObject, field string, aliases ...string) (*uint64, error) {
	raw, ok, err := o.get(field, aliases...)
	if err != nil || !ok {
		return nil, err
	}
	if kindOf(raw) != "number" {
		return nil, fieldErr(field, wantType(raw, "a non-negative integer"))
	}
	n, perr := strconv.ParseUint(string(bytes.TrimSpace(raw)), 10, 64)
	if perr != nil {
		return nil, fieldErr(field, fmt.Errorf("invalid value: %s, expected a non-negative integer", bytes.TrimSpace(raw)))
	}
	return &n, nil
}

// decodeStrings decodes an array of strings element by element, with no
// copy of each element and no name made for it unless it is wrong: a
// 16 MiB config file of one-letter args cost 275 MB and 4 s to read.
func decodeStrings(field string, raw json.RawMessage) ([]string, error) {
	if kindOf(raw) != "array" {
		return nil, fieldErr(field, wantType(raw, "an array of strings"))
	}
	n := 0
	_ = EachElement(raw, func([]byte) error { n++; return nil })
	out := make([]string, 0, n)
	err := EachElement(raw, func(el []byte) error {
		s, err := stringValue(el)
		if err != nil {
			return fieldErr(fmt.Sprintf("%s[%d]", field, len(out)), err)
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func decodeOptStringMap(o *jsonObject, field string, aliases ...string) (map[string]string, error) {
	raw, ok, err := o.get(field, aliases...)
	if err != nil || !ok {
		return nil, err
	}
	obj, err := objectOf(raw)
	if err != nil {
		return nil, fieldErr(field, wantType(raw, "a map of strings"))
	}
	m := make(map[string]string, len(obj.fields))
	for _, f := range obj.fields {
		s, err := decodeString(field+"."+f.key, f.raw)
		if err != nil {
			return nil, err
		}
		m[f.key] = s
	}
	return m, nil
}

// orderedJSON writes a JSON object member by member, in the order given,
// without HTML escaping (serde does not escape <, > and &).
type orderedJSON struct {
	buf bytes.Buffer
	n   int
}

func (w *orderedJSON) field(key string, v any) {
	if w.n == 0 {
		w.buf.WriteByte('{')
	} else {
		w.buf.WriteByte(',')
	}
	w.n++
	w.buf.Write(encodeJSON(key))
	w.buf.WriteByte(':')
	w.buf.Write(encodeJSON(v))
}

func (w *orderedJSON) bytes() []byte {
	if w.n == 0 {
		return []byte("{}")
	}
	w.buf.WriteByte('}')
	return w.buf.Bytes()
}

// encodeJSON encodes plain values (strings, bools, numbers, string maps and
// slices, json.Marshalers); maps come out with sorted keys.
func encodeJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only plain values reach here; a failure is a programming error.
		panic(fmt.Sprintf("encode %T: %v", v, err))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// EncodeConfigFile renders a per-directory config file: a JSON object of
// name → entry, keys sorted, two-space indent, no trailing newline (as
// serde_json's pretty printer writes it).
func EncodeConfigFile[T json.Marshaler](entries map[string]T) []byte {
	names := make([]string, 0, len(entries))
	for k := range entries {
		names = append(names, k)
	}
	sort.Strings(names)
	var w orderedJSON
	for _, k := range names {
		w.field(k, entries[k])
	}
	var out bytes.Buffer
	if err := json.Indent(&out, w.bytes(), "", "  "); err != nil {
		panic(fmt.Sprintf("indent config file: %v", err))
	}
	return out.Bytes()
}

// ParseConfigFile reads a per-directory config file with parse applied to
// every entry. An empty or blank file is an empty map.
func ParseConfigFile[T any](b []byte, parse func([]byte) (T, error)) (map[string]T, error) {
	out := map[string]T{}
	if len(bytes.TrimSpace(b)) == 0 {
		return out, nil
	}
	obj, err := decodeObject(b)
	if err != nil {
		return nil, err
	}
	for _, f := range obj.fields {
		v, err := parse(f.raw)
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", f.key, err)
		}
		out[f.key] = v
	}
	return out, nil
}
