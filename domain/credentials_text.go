package domain

import (
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// RedactKey is how a key is shown when not revealed, as the reference
// shows it: "****" for a key of at most 8 bytes (after trimming white
// space), else its first and last 4 bytes around "..." ("sk-t...-123" for
// "sk-test-123"). Where the 4th byte from either end falls inside a
// multi-byte character (the reference panics there), less is shown: the
// whole characters within those 4 bytes.
func RedactKey(key string) string {
	k := strings.TrimSpace(key)
	if len(k) <= 8 {
		return "****"
	}
	head := 4
	for head > 0 && !utf8.RuneStart(k[head]) {
		head--
	}
	tail := len(k) - 4
	for tail < len(k) && !utf8.RuneStart(k[tail]) {
		tail++
	}
	return k[:head] + "..." + k[tail:]
}

// ParseRFC3339 reads a timestamp as the reference's time library does for
// an OAuth token's expiresAt: YYYY-MM-DD, any one byte, hh:mm:ss, an
// optional fraction of at least one digit (digits past the 9th ignored),
// then Z, z or ±hh:mm (hours below 24). Seconds may be 60 only on the last
// second of a month in UTC, read as 23:59:59.999999999. Anything else,
// trailing bytes included, is not a time.
func ParseRFC3339(s string) (time.Time, bool) {
	num := func(i, n int) (int, bool) {
		if i+n > len(s) {
			return 0, false
		}
		v := 0
		for _, c := range []byte(s[i : i+n]) {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 2)
	day, ok3 := num(8, 2)
	hour, ok4 := num(11, 2)
	minute, ok5 := num(14, 2)
	sec, ok6 := num(17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || s[4] != '-' || s[7] != '-' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	i := 19
	nanos := 0
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			if i-start < 9 {
				nanos = nanos*10 + int(s[i]-'0')
			}
			i++
		}
		if i == start {
			return time.Time{}, false
		}
		for n := i - start; n < 9; n++ {
			nanos *= 10
		}
	}
	if i >= len(s) {
		return time.Time{}, false
	}
	offset := 0
	switch s[i] {
	case 'Z', 'z':
		i++
	case '+', '-':
		oh, ok1 := num(i+1, 2)
		om, ok2 := num(i+4, 2)
		if !ok1 || !ok2 || s[i+3] != ':' || oh > 23 || om > 59 {
			return time.Time{}, false
		}
		offset = oh*3600 + om*60
		if s[i] == '-' {
			offset = -offset
		}
		i += 6
	default:
		return time.Time{}, false
	}
	if i != len(s) || month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 23 || minute > 59 || sec > 60 {
		return time.Time{}, false
	}
	leap := sec == 60
	if leap {
		sec = 59
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nanos, time.UTC).Add(-time.Duration(offset) * time.Second)
	if leap {
		// Only the last second of a month (in UTC) may be a leap second.
		if t.Hour() != 23 || t.Minute() != 59 || t.Day() != daysIn(t.Year(), int(t.Month())) {
			return time.Time{}, false
		}
		t = t.Add(time.Duration(999_999_999 - t.Nanosecond()))
	}
	return t, true
}

func daysIn(year, month int) int {
	return time.Date(year, time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// EnvLine is one line of `credentials extract-env`: NAME=VALUE, with
// "export " before it when export is set and the value quoted for a POSIX
// shell when it holds anything but letters, digits and _ @ % + = : , . / -
// or starts with '=' or holds ":=" (see ShellQuote) (so eval "$(sandbox-agent credentials extract-env --export)" sets
// exactly the value, whatever it holds). The reference prints values bare;
// for the values that need no quoting, the lines are the same. A value
// holding a NUL byte cannot be an environment variable: ok is false.
func EnvLine(name, value string, export bool) (line string, ok bool) {
	if strings.IndexByte(value, 0) >= 0 || !ValidEnvName(name) {
		return "", false
	}
	prefix := ""
	if export {
		prefix = "export "
	}
	return prefix + name + "=" + ShellQuote(value), true
}

// ShellQuote returns s as one word of a POSIX shell: s itself when it is
// made only of characters no shell treats specially (letters, digits and
// _ @ % + = : , . / -), and neither starts with '=' nor holds ":=" (which
// zsh expands), else s in single quotes, each ' written as '\”.
// Newlines, $, backquotes, backslashes and quotes inside single quotes are
// plain characters to sh, dash, bash and zsh. The empty string stays
// empty: NAME= assigns it. It cannot carry a NUL byte (EnvLine refuses
// those).
func ShellQuote(s string) string {
	safe := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_@%+=:,./-", c) >= 0) {
			safe = false
			break
		}
	}
	// zsh expands a word that starts with '=' (=ls is /usr/bin/ls; an
	// unknown command ends the whole eval) and, in an assignment, an '='
	// after a ':' too.
	if safe && !strings.HasPrefix(s, "=") && !strings.Contains(s, ":=") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ValidEnvName reports whether name can be assigned by a POSIX shell: a
// letter or underscore, then letters, digits and underscores (ASCII).
func ValidEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// ProviderEnvName is the variable extract-env sets for one of OpenCode's
// other providers, as the reference names it: the provider upper-cased,
// '-' as '_', then "_API_KEY" ("my-prov" → MY_PROV_API_KEY). Names that a
// shell cannot assign (ValidEnvName) are for the caller to skip.
func ProviderEnvName(provider string) string {
	return strings.ReplaceAll(strings.ToUpper(provider), "-", "_") + "_API_KEY"
}

// CredentialEnv lists the variables extract-env sets for c, in the
// reference's order: ANTHROPIC_API_KEY and CLAUDE_API_KEY, OPENAI_API_KEY
// and CODEX_API_KEY, then the other providers' variables by provider name.
func CredentialEnv(c Credentials) []EnvVar {
	var out []EnvVar
	if c.Anthropic != nil {
		out = append(out, EnvVar{"ANTHROPIC_API_KEY", c.Anthropic.Key, ProviderAnthropic}, EnvVar{"CLAUDE_API_KEY", c.Anthropic.Key, ProviderAnthropic})
	}
	if c.OpenAI != nil {
		out = append(out, EnvVar{"OPENAI_API_KEY", c.OpenAI.Key, ProviderOpenAI}, EnvVar{"CODEX_API_KEY", c.OpenAI.Key, ProviderOpenAI})
	}
	names := make([]string, 0, len(c.Other))
	for n := range c.Other {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out = append(out, EnvVar{ProviderEnvName(n), c.Other[n].Key, n})
	}
	return out
}

// EnvVar is one variable of extract-env and the provider it comes from.
type EnvVar struct {
	Name, Value, Provider string
}
