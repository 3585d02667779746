package domain

import (
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxCredentialJSONDepth is the deepest nesting the reference's JSON
// parser (serde_json, recursion limit 128) accepts: a file nested deeper is
// malformed to it, so it is to us.
const maxCredentialJSONDepth = 127

// StrictJSON reports whether b is a JSON document the reference's parser
// reads: valid JSON in valid UTF-8, no escaped lone surrogate ("\udc00"),
// no number too large for a float64 ("1e400"), nested at most 127 deep.
// Go's decoder is more lenient on each of these; a credentials file is
// skipped by both or by neither.
func StrictJSON(b []byte) bool {
	return json.Valid(b) && serdeReadable(b)
}

// serdeReadable checks what the reference's parser refuses beyond JSON's
// grammar (invalid UTF-8, lone surrogates, float overflow, depth). It
// assumes nothing of b's syntax (the caller checks that, with json.Valid
// or while decoding), so parsing checks the grammar once.
func serdeReadable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	depth := 0
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '{' || c == '[':
			if depth++; depth > maxCredentialJSONDepth {
				return false
			}
		case c == '}' || c == ']':
			depth--
		case c == '"':
			end, ok := scanJSONString(b, i)
			if !ok {
				return false
			}
			i = end
		case c == '-' || (c >= '0' && c <= '9'):
			j := i
			for j < len(b) && strings.IndexByte("+-.eE0123456789", b[j]) >= 0 {
				j++
			}
			if f, err := strconv.ParseFloat(string(b[i:j]), 64); err != nil && math.IsInf(f, 0) {
				return false
			}
			i = j - 1
		}
	}
	return true
}

// scanJSONString checks the string starting at b[i] (a quote) for lone
// surrogate escapes and returns the index of its closing quote; false for
// one (or a string cut short) the reference would refuse.
func scanJSONString(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '"':
			return j, true
		case '\\':
			if j+1 >= len(b) {
				return 0, false
			}
			if b[j+1] != 'u' {
				j++
				continue
			}
			if j+6 > len(b) {
				return 0, false
			}
			r := hex4(b[j+2 : j+6])
			j += 5
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return 0, false // a low surrogate first
			case r >= 0xD800 && r <= 0xDBFF:
				if j+7 > len(b) || b[j+1] != '\\' || b[j+2] != 'u' {
					return 0, false
				}
				if lo := hex4(b[j+3 : j+7]); lo < 0xDC00 || lo > 0xDFFF {
					return 0, false
				}
				j += 6
			}
		}
	}
	return 0, false
}

func hex4(b []byte) rune {
	n, _ := strconv.ParseUint(string(b), 16, 32)
	return rune(n)
}

// CredentialsJSON renders what `credentials extract` prints: the reference's
// document, byte for byte (its pretty printer's layout and string escapes),
// with keys redacted unless reveal. Other providers are sorted by name (the
// reference prints them in a random order).
func CredentialsJSON(c Credentials, reveal bool) []byte {
	var b strings.Builder
	b.WriteString("{\n")
	writeCredential(&b, "  ", "anthropic", c.Anthropic, reveal)
	b.WriteString(",\n")
	writeCredential(&b, "  ", "openai", c.OpenAI, reveal)
	b.WriteString(",\n  \"other\": ")
	names := make([]string, 0, len(c.Other))
	for n := range c.Other {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		b.WriteString("{}")
	} else {
		b.WriteString("{\n")
		for i, n := range names {
			o := c.Other[n]
			writeCredential(&b, "    ", n, &o, reveal)
			if i < len(names)-1 {
				b.WriteString(",")
			}
			b.WriteString("\n")
		}
		b.WriteString("  }")
	}
	b.WriteString("\n}\n")
	return []byte(b.String())
}

func writeCredential(b *strings.Builder, indent, name string, c *Credential, reveal bool) {
	b.WriteString(indent)
	writeJSONString(b, name)
	b.WriteString(": ")
	if c == nil {
		b.WriteString("null")
		return
	}
	key := c.Key
	if !reveal {
		key = RedactKey(key)
	}
	in := indent + "  "
	b.WriteString("{\n")
	for _, f := range [][2]string{{"provider", c.Provider}, {"source", c.Source}, {"auth_type", c.AuthType}, {"api_key", key}} {
		b.WriteString(in)
		writeJSONString(b, f[0])
		b.WriteString(": ")
		writeJSONString(b, f[1])
		b.WriteString(",\n")
	}
	b.WriteString(in + `"redacted": ` + strconv.FormatBool(!reveal) + "\n" + indent + "}")
}

// writeJSONString escapes as the reference does: quote, backslash and
// control characters only (\b \f \n \r \t, else \u00XX); everything else,
// U+2028 and <>& included, as it is.
func writeJSONString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xF])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}
