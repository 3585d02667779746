package domain

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

var credNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func TestRedactKey(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"sk-test-123", "sk-t...-123"},
		{"", "****"},
		{"12345678", "****"},
		{"123456789", "1234...6789"},
		{"  abcdefghijk  ", "abcd...hijk"}, // trimmed first
		{"\t abcdefghijkl\n", "abcd...ijkl"},
		{"abc      ", "****"},
		{"ééééééé", "éé...éé"},                   // 14 bytes, boundaries fall between characters
		{"abcdéxyzw", "abcd...xyzw"},             // as the reference
		{"aééééééb", "aé...éb"},                  // the reference panics: whole characters within 4 bytes
		{"😀😀😀", "😀...😀"},                         // 12 bytes of 4-byte characters
		{"x😀😀😀x", "x...x"},                       // no whole character fits beside the ends
		{"\u00a0abcdefghi\u00a0", "abcd...fghi"}, // Unicode white space trimmed too
	} {
		if got := RedactKey(c.in); got != c.want {
			t.Errorf("RedactKey(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestParseRFC3339(t *testing.T) {
	// Each case as the reference's time library reads it (observed through
	// an expired or kept OAuth token): ok says it is a time.
	for _, c := range []struct {
		in   string
		ok   bool
		want string // UTC, when ok
	}{
		{"2000-01-01T00:00:00Z", true, "2000-01-01T00:00:00Z"},
		{"2000-01-01t00:00:00z", true, "2000-01-01T00:00:00Z"},
		{"2000-01-01 00:00:00Z", true, "2000-01-01T00:00:00Z"},
		{"2000-01-01_00:00:00Z", true, "2000-01-01T00:00:00Z"}, // any one byte
		{"2000-01-01é00:00:00Z", false, ""},                    // é is two bytes
		{"2000-01-01T00:00:00.1234567890Z", true, "2000-01-01T00:00:00.123456789Z"},
		{"2000-01-01T00:00:00.000000000000000000001Z", true, "2000-01-01T00:00:00Z"},
		{"2000-01-01T00:00:00.Z", false, ""},
		{"2000-01-01T00:00:00,5Z", false, ""},
		{"2000-01-01T00:00:00+23:59", true, "1999-12-31T00:01:00Z"},
		{"2000-01-01T00:00:00-00:00", true, "2000-01-01T00:00:00Z"},
		{"2000-01-01T00:00:00+24:00", false, ""},
		{"2000-01-01T00:00:00+05:60", false, ""},
		{"2000-01-01T00:00:00+0530", false, ""},
		{"2000-01-01T00:00:00+00:00:00", false, ""},
		{"2000-01-01T00:00:00", false, ""},
		{"2000-01-01T00:00:00.5", false, ""},
		{"2000-01-01T00:00Z", false, ""},
		{" 2000-01-01T00:00:00Z", false, ""},
		{"2000-01-01T00:00:00Z ", false, ""},
		{"2000-01-01T00:00:00Zz", false, ""},
		{"+2000-01-01T00:00:00Z", false, ""},
		{"2000-1-01T00:00:00Z", false, ""},
		{"2000-01-01T1:00:00Z", false, ""},
		{"2000-02-29T00:00:00Z", true, "2000-02-29T00:00:00Z"},
		{"1999-02-29T00:00:00Z", false, ""},
		{"1900-02-29T00:00:00Z", false, ""},
		{"2000-02-30T00:00:00Z", false, ""},
		{"2000-13-01T00:00:00Z", false, ""},
		{"2000-00-01T00:00:00Z", false, ""},
		{"2000-01-00T00:00:00Z", false, ""},
		{"2000-01-01T24:00:00Z", false, ""},
		{"2000-01-01T00:60:00Z", false, ""},
		{"0000-01-01T00:00:00Z", true, "0000-01-01T00:00:00Z"},
		// A leap second only on a month's last second, in UTC.
		{"2000-12-31T23:59:60Z", true, "2000-12-31T23:59:59.999999999Z"},
		{"2000-01-31T23:59:60Z", true, "2000-01-31T23:59:59.999999999Z"},
		{"2000-01-01T00:59:60+01:00", true, "1999-12-31T23:59:59.999999999Z"},
		{"2000-01-30T23:59:60Z", false, ""},
		{"2000-01-31T23:58:60Z", false, ""},
		{"2000-01-31T23:59:60+01:00", false, ""},
		{"2000-01-01T00:00:60Z", false, ""},
		{"２000-01-01T00:00:00Z", false, ""},
		{"", false, ""},
	} {
		got, ok := ParseRFC3339(c.in)
		if ok != c.ok || ok && got.UTC().Format(time.RFC3339Nano) != c.want {
			t.Errorf("ParseRFC3339(%q) = %v %v, want %v %s", c.in, got.UTC().Format(time.RFC3339Nano), ok, c.ok, c.want)
		}
	}
}

func TestStrictJSON(t *testing.T) {
	deep := func(n int) string {
		return `{"a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
	}
	for _, c := range []struct {
		in string
		ok bool
	}{
		{`{"a":"b"}`, true},
		{"  {\"a\":1}\n", true},
		{`{"a":"b"} x`, false},
		{`{bad`, false},
		{"\xef\xbb\xbf{}", false}, // a byte order mark
		{"{\"a\":\"\xff\"}", false},
		{`{"a":"\udc00"}`, false},
		{`{"a":"\ud800"}`, false},
		{`{"a":"\ud800x"}`, false},
		{`{"a":"\ud800\n"}`, false},
		{`{"a":"\ud800\u0041"}`, false},
		{`{"a":"\ud83d\ude00"}`, true},
		{`{"\udc00":1}`, false},
		{`{"a":"\\udc00"}`, true}, // an escaped backslash, then text
		{`{"a":1e400}`, false},
		{`{"a":-1e400}`, false},
		{`{"a":1.7976931348623157e309}`, false},
		{`{"a":1e308}`, true},
		{`{"a":1e-400}`, true},
		{`{"a":123456789012345678901234567890}`, true},
		{`{"a":"1e400"}`, true},
		{deep(126), true},
		{deep(127), false},
		{`[` + deep(125) + `]`, true},
	} {
		if got := StrictJSON([]byte(c.in)); got != c.ok {
			t.Errorf("StrictJSON(%.60q) = %v, want %v", c.in, got, c.ok)
		}
	}
}

func TestCredentialParsers(t *testing.T) {
	past, future := "2000-01-01T00:00:00Z", "2999-01-01T00:00:00Z"
	key := func(c Credential, ok bool) string {
		if !ok {
			return "-"
		}
		return c.Provider + "/" + c.Source + "/" + c.AuthType + "/" + c.Key
	}
	for _, c := range []struct {
		name, got, want string
	}{
		{"claude primary", key(ClaudeConfigKey([]byte(`{"primaryApiKey":"sk-ant-1"}`))), "anthropic/claude-code/api_key/sk-ant-1"},
		{"claude no prefix", key(ClaudeConfigKey([]byte(`{"primaryApiKey":"notant"}`))), "-"},
		{"claude next field", key(ClaudeConfigKey([]byte(`{"primaryApiKey":"x","apiKey":"sk-ant-2","customApiKey":"sk-ant-3"}`))), "anthropic/claude-code/api_key/sk-ant-2"},
		{"claude number", key(ClaudeConfigKey([]byte(`{"primaryApiKey":1,"customApiKey":"sk-ant-3"}`))), "anthropic/claude-code/api_key/sk-ant-3"},
		{"claude not object", key(ClaudeConfigKey([]byte(`["sk-ant-1"]`))), "-"},
		{"claude malformed", key(ClaudeConfigKey([]byte(`{"apiKey":"sk-ant-1"`))), "-"},
		{"claude duplicate keys: last wins", key(ClaudeConfigKey([]byte(`{"apiKey":"sk-ant-1","apiKey":"sk-ant-2"}`))), "anthropic/claude-code/api_key/sk-ant-2"},

		{"oauth", key(ClaudeOAuth([]byte(`{"claudeAiOauth":{"accessToken":"t"}}`), credNow)), "anthropic/claude-code/oauth/t"},
		{"oauth empty token", key(ClaudeOAuth([]byte(`{"claudeAiOauth":{"accessToken":""}}`), credNow)), "anthropic/claude-code/oauth/"},
		{"oauth expired", key(ClaudeOAuth([]byte(`{"claudeAiOauth":{"accessToken":"t","expiresAt":"`+past+`"}}`), credNow)), "-"},
		{"oauth not expired", key(ClaudeOAuth([]byte(`{"claudeAiOauth":{"accessToken":"t","expiresAt":"`+future+`"}}`), credNow)), "anthropic/claude-code/oauth/t"},
		{"oauth bad time", key(ClaudeOAuth([]byte(`{"claudeAiOauth":{"accessToken":"t","expiresAt":"garbage"}}`), credNow)), "anthropic/claude-code/oauth/t"},
		{"oauth numeric expiry unchecked", key(ClaudeOAuth([]byte(`{"claudeAiOauth":{"accessToken":"t","expiresAt":1}}`), credNow)), "anthropic/claude-code/oauth/t"},
		{"oauth token not a string", key(ClaudeOAuth([]byte(`{"claudeAiOauth":{"accessToken":5}}`), credNow)), "-"},
		{"oauth wrong root", key(ClaudeOAuth([]byte(`{"accessToken":"t"}`), credNow)), "-"},

		{"codex key", key(CodexAuth([]byte(`{"OPENAI_API_KEY":"sk-test-123"}`), true)), "openai/codex/api_key/sk-test-123"},
		{"codex empty key, token", key(CodexAuth([]byte(`{"OPENAI_API_KEY":"","tokens":{"access_token":"cx"}}`), true)), "openai/codex/oauth/cx"},
		{"codex null key, empty token", key(CodexAuth([]byte(`{"OPENAI_API_KEY":null,"tokens":{"access_token":""}}`), true)), "openai/codex/oauth/"},
		{"codex token without oauth", key(CodexAuth([]byte(`{"tokens":{"access_token":"cx"}}`), false)), "-"},
		{"codex junk", key(CodexAuth([]byte(`{"token":"x"}`), true)), "-"},

		{"amp first field", key(AmpConfig([]byte(`{"anthropicApiKey":"a1","apiKey":"a2"}`))), "anthropic/amp/api_key/a1"},
		{"amp skips empty", key(AmpConfig([]byte(`{"anthropicApiKey":"","anthropic_api_key":"a2"}`))), "anthropic/amp/api_key/a2"},
		{"amp top before nested", key(AmpConfig([]byte(`{"token":"tk","auth":{"anthropicApiKey":"x"}}`))), "anthropic/amp/api_key/tk"},
		{"amp nested", key(AmpConfig([]byte(`{"auth":{"token":"t"},"anthropic":{"apiKey":"y"}}`))), "anthropic/amp/api_key/t"},
		{"amp last", key(AmpConfig([]byte(`{"anthropic":{"token":"y"}}`))), "anthropic/amp/api_key/y"},
		{"amp dotted is no path", key(AmpConfig([]byte(`{"amp.apiKey":"z"}`))), "-"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.name, c.got, c.want)
		}
	}
}

func TestOpenCodeAuth(t *testing.T) {
	doc := `{"zeta":{"type":"api","key":"zk"},"anthropic":{"type":"oauth","access":"ant","expires":1},
		"openai":{"type":"oauth","access":"oa"},"bad":"str","nokey":{"type":"api"},"upper":{"type":"API","key":"x"},
		"neg0":{"type":"oauth","access":"n0","expires":-0},"float":{"type":"oauth","access":"f","expires":1.0},
		"big":{"type":"oauth","access":"b","expires":9223372036854775808},"min":{"type":"oauth","access":"m","expires":-9223372036854775808}}`
	got := OpenCodeAuth([]byte(doc), true, credNow)
	if got.Anthropic != nil {
		t.Errorf("expired anthropic kept: %+v", got.Anthropic)
	}
	if got.OpenAI == nil || got.OpenAI.Key != "oa" || got.OpenAI.AuthType != AuthOAuth || got.OpenAI.Source != SourceOpenCode {
		t.Errorf("openai = %+v", got.OpenAI)
	}
	var names []string
	for n, c := range got.Other {
		names = append(names, n+"="+c.Key)
	}
	sortStrings := func(s []string) []string {
		for i := range s {
			for j := i + 1; j < len(s); j++ {
				if s[j] < s[i] {
					s[i], s[j] = s[j], s[i]
				}
			}
		}
		return s
	}
	// -0, 1.0 and a number past int64 are no expiry to the reference.
	if g := strings.Join(sortStrings(names), " "); g != "big=b float=f neg0=n0 zeta=zk" {
		t.Errorf("other = %s", g)
	}
	noOAuth := OpenCodeAuth([]byte(doc), false, credNow)
	if noOAuth.OpenAI != nil || len(noOAuth.Other) != 1 {
		t.Errorf("without oauth: %+v", noOAuth)
	}
	if c := OpenCodeAuth([]byte(`[1]`), true, credNow); c.Anthropic != nil || c.OpenAI != nil || len(c.Other) != 0 {
		t.Errorf("array: %+v", c)
	}
}

func TestCredentialsAvailable(t *testing.T) {
	ant := &Credential{Provider: ProviderAnthropic, Key: "k"}
	oa := &Credential{Provider: ProviderOpenAI, Key: "k"}
	other := map[string]Credential{"zeta": {Provider: "zeta", Key: "k"}}
	for _, c := range []struct {
		creds Credentials
		want  string // agents with credentials, of claude codex opencode amp pi cursor mock x
	}{
		{Credentials{}, "pi cursor mock x"},
		{Credentials{Other: other}, "pi cursor mock x"},
		{Credentials{Anthropic: ant}, "claude opencode amp pi cursor mock x"},
		{Credentials{OpenAI: oa}, "codex opencode pi cursor mock x"},
		{Credentials{Anthropic: ant, OpenAI: oa}, "claude codex opencode amp pi cursor mock x"},
	} {
		var got []string
		for _, a := range []string{"claude", "codex", "opencode", "amp", "pi", "cursor", "mock", "x"} {
			if CredentialsAvailable(a, c.creds) {
				got = append(got, a)
			}
		}
		if g := strings.Join(got, " "); g != c.want {
			t.Errorf("%+v: %s, want %s", c.creds, g, c.want)
		}
	}
}

// The documents are the reference's output for the same credentials.
func TestCredentialsJSON(t *testing.T) {
	none := "{\n  \"anthropic\": null,\n  \"openai\": null,\n  \"other\": {}\n}\n"
	if got := string(CredentialsJSON(Credentials{}, false)); got != none {
		t.Errorf("none:\n%s", got)
	}
	codex := Credentials{OpenAI: &Credential{ProviderOpenAI, SourceCodex, AuthAPIKey, "sk-test-123"}}
	want := `{
  "anthropic": null,
  "openai": {
    "provider": "openai",
    "source": "codex",
    "auth_type": "api_key",
    "api_key": "sk-t...-123",
    "redacted": true
  },
  "other": {}
}
`
	if got := string(CredentialsJSON(codex, false)); got != want {
		t.Errorf("codex:\n%s\nwant:\n%s", got, want)
	}
	if got := string(CredentialsJSON(codex, true)); got != strings.Replace(strings.Replace(want, "sk-t...-123", "sk-test-123", 1), `"redacted": true`, `"redacted": false`, 1) {
		t.Errorf("revealed:\n%s", got)
	}
	several := Credentials{
		OpenAI: &Credential{ProviderOpenAI, SourceOpenCode, AuthOAuth, "oa-oauth-123456"},
		Other: map[string]Credential{
			"zeta":    {"zeta", SourceOpenCode, AuthAPIKey, "zeta-key-123456"},
			"alpha":   {"alpha", SourceOpenCode, AuthAPIKey, "alpha-key-123456"},
			"my-prov": {"my-prov", SourceOpenCode, AuthAPIKey, "mp-key-123456"},
		},
	}
	want = `{
  "anthropic": null,
  "openai": {
    "provider": "openai",
    "source": "opencode",
    "auth_type": "oauth",
    "api_key": "oa-o...3456",
    "redacted": true
  },
  "other": {
    "alpha": {
      "provider": "alpha",
      "source": "opencode",
      "auth_type": "api_key",
      "api_key": "alph...3456",
      "redacted": true
    },
    "my-prov": {
      "provider": "my-prov",
      "source": "opencode",
      "auth_type": "api_key",
      "api_key": "mp-k...3456",
      "redacted": true
    },
    "zeta": {
      "provider": "zeta",
      "source": "opencode",
      "auth_type": "api_key",
      "api_key": "zeta...3456",
      "redacted": true
    }
  }
}
`
	if got := string(CredentialsJSON(several, false)); got != want {
		t.Errorf("several:\n%s\nwant:\n%s", got, want)
	}
	// The reference's string escapes: control characters only.
	odd := Credentials{OpenAI: &Credential{ProviderOpenAI, SourceCodex, AuthAPIKey, "😀x\x00y\u2028<>&\x7f\x1f\b\f\"\\\n\r\t"}}
	if got := string(CredentialsJSON(odd, true)); !strings.Contains(got, `"api_key": "😀x\u0000y`+"\u2028"+`<>&`+"\x7f"+`\u001f\b\f\"\\\n\r\t",`) {
		t.Errorf("escapes:\n%s", got)
	}
}

func TestCredentialEnv(t *testing.T) {
	c := Credentials{
		Anthropic: &Credential{Key: "sk-ant-xyz"},
		OpenAI:    &Credential{Key: "sk-test-123"},
		Other:     map[string]Credential{"zeta": {Key: "z"}, "my-prov": {Key: "m"}, "": {Key: "e"}},
	}
	var got []string
	for _, v := range CredentialEnv(c) {
		got = append(got, v.Name+"="+v.Value)
	}
	want := "ANTHROPIC_API_KEY=sk-ant-xyz CLAUDE_API_KEY=sk-ant-xyz OPENAI_API_KEY=sk-test-123 CODEX_API_KEY=sk-test-123 _API_KEY=e MY_PROV_API_KEY=m ZETA_API_KEY=z"
	if g := strings.Join(got, " "); g != want {
		t.Errorf("got  %s\nwant %s", g, want)
	}
}

func TestEnvLine(t *testing.T) {
	for _, c := range []struct {
		name, value string
		export      bool
		want        string
		ok          bool
	}{
		{"OPENAI_API_KEY", "sk-test-123", true, "export OPENAI_API_KEY=sk-test-123", true},
		{"OPENAI_API_KEY", "sk-test-123", false, "OPENAI_API_KEY=sk-test-123", true},
		{"A", "", false, "A=", true},
		{"A", "a_b@c%d+e=f:g,h.i/j-k", false, "A=a_b@c%d+e=f:g,h.i/j-k", true},
		{"A", "it's", false, `A='it'\''s'`, true},
		{"A", "$(id)`id`", false, "A='$(id)`id`'", true},
		{"A", "a\nb", false, "A='a\nb'", true},
		{"A", "~/x", false, "A='~/x'", true},
		{"A", "x y", false, "A='x y'", true},
		{"A", "a\x00b", false, "", false},
		{"A B;C_API_KEY", "v", false, "", false},
		{"1X_API_KEY", "v", false, "", false},
		{"É_API_KEY", "v", false, "", false},
		{"_API_KEY", "v", false, "_API_KEY=v", true},
	} {
		got, ok := EnvLine(c.name, c.value, c.export)
		if got != c.want || ok != c.ok {
			t.Errorf("EnvLine(%q, %q) = %q %v, want %q %v", c.name, c.value, got, ok, c.want, c.ok)
		}
	}
}

// zsh expands a word that starts with '=' (=ls is /usr/bin/ls), and in an
// assignment also an '=' after a ':' (x:=ls); =nosuchcommand is an error
// that ends the whole eval. Such values are quoted, though made only of
// characters that are otherwise safe.
func TestShellQuoteZshEquals(t *testing.T) {
	for _, s := range []string{"=ls", "=nosuchcommand", "=", "sk-a:=ls", "a:=", ":="} {
		if q := ShellQuote(s); q != "'"+s+"'" {
			t.Errorf("ShellQuote(%q) = %q, want it single-quoted", s, q)
		}
	}
	for _, s := range []string{"a=b", "sk-a:b", "abc==", "a=:b"} {
		if q := ShellQuote(s); q != s {
			t.Errorf("ShellQuote(%q) = %q, want it bare (as the reference prints it)", s, q)
		}
	}
}

// FuzzShellQuote: a quoted value read back by the rules of a POSIX shell
// (outside quotes: a word of safe characters; inside single quotes:
// everything up to the next quote) is the value. The real shells' round
// trip is FuzzExtractEnvShell in cmd/sandbox-agent.
func FuzzShellQuote(f *testing.F) {
	for _, s := range []string{"", "sk-test-123", "it's", "''", "'\\''", "$(id)", "`x`", "a\nb\n", "\\", "\"", "!$*?[]{}~#&|;<> \t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := ShellQuote(s)
		var out strings.Builder
		for i := 0; i < len(q); {
			switch c := q[i]; {
			case c == '\'':
				end := strings.IndexByte(q[i+1:], '\'')
				if end < 0 {
					t.Fatalf("unterminated quote in %q", q)
				}
				out.WriteString(q[i+1 : i+1+end])
				i += end + 2
			case c == '\\' && i+1 < len(q):
				out.WriteByte(q[i+1])
				i += 2
			case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_@%+=:,./-", c) >= 0:
				out.WriteByte(c)
				i++
			default:
				t.Fatalf("unquoted special byte %q in %q", c, q)
			}
		}
		if out.String() != s {
			t.Fatalf("ShellQuote(%q) = %q reads back as %q", s, q, out.String())
		}
	})
}

// FuzzCredentialParsers: no input makes a parser panic, what StrictJSON
// accepts is JSON, and a time ParseRFC3339 reads has the date it was
// written with when it is in UTC (but for a leap second's stand-in).
func FuzzCredentialParsers(f *testing.F) {
	for _, s := range []string{
		`{"claudeAiOauth":{"accessToken":"t","expiresAt":"2000-01-01T00:00:00Z"}}`,
		`{"OPENAI_API_KEY":"k","tokens":{"access_token":"t"}}`,
		`{"a":{"type":"oauth","access":"x","expires":-0}}`,
		`{"a":"\ud800\udc00"}`, `[[[]]]`, `1e400`, `"2000-12-31T23:59:60+00:00"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if StrictJSON(b) && !json.Valid(b) {
			t.Fatalf("StrictJSON accepts invalid JSON %q", b)
		}
		ClaudeConfigKey(b)
		ClaudeOAuth(b, credNow)
		CodexAuth(b, true)
		AmpConfig(b)
		OpenCodeAuth(b, true, credNow)
		s := string(b)
		if tm, ok := ParseRFC3339(s); ok && strings.ContainsAny(s[len(s)-1:], "Zz") && s[17:19] != "60" {
			if got := tm.UTC().Format("2006-01-02"); got != s[:10] {
				t.Fatalf("ParseRFC3339(%q) = %v", s, tm)
			}
		}
	})
}

func TestSelectCredential(t *testing.T) {
	ant := &Credential{Provider: ProviderAnthropic, Key: "a"}
	oa := &Credential{Provider: ProviderOpenAI, Key: "o"}
	two := map[string]Credential{"zeta": {Key: "zk"}, "alpha": {Key: "ak"}}
	one := map[string]Credential{"zeta": {Key: "zk"}}
	for _, c := range []struct {
		creds           Credentials
		agent, provider string
		want            string // the key, or "error: ..."
	}{
		{Credentials{Other: two}, "claude", "", "error: no credentials found for provider anthropic"},
		{Credentials{Anthropic: ant}, "claude", "", "a"},
		{Credentials{Anthropic: ant}, "amp", "anthropic", "a"},
		{Credentials{Anthropic: ant}, "amp", "openai", "error: agent amp only supports provider anthropic"},
		{Credentials{OpenAI: oa}, "codex", "", "o"},
		{Credentials{OpenAI: oa}, "codex", "anthropic", "error: agent codex only supports provider openai"},
		{Credentials{Other: two}, "codex", "", "error: no credentials found for provider openai"},
		{Credentials{Anthropic: ant, OpenAI: oa}, "opencode", "", "o"},
		{Credentials{Anthropic: ant, Other: two}, "opencode", "", "a"},
		{Credentials{Other: one}, "opencode", "", "zk"},
		{Credentials{Other: two}, "opencode", "", "error: multiple providers available for opencode: alpha, zeta (use --provider)"},
		{Credentials{}, "opencode", "", "error: no credentials found for opencode"},
		{Credentials{Other: two}, "opencode", "zeta", "zk"},
		{Credentials{}, "opencode", "", "error: no credentials found for opencode"},
		{Credentials{Other: two}, "", "zeta", "zk"},
		{Credentials{Other: two}, "", "nope", "error: no credentials found for provider nope"},
		{Credentials{OpenAI: oa}, "", "", "error: no credentials found for provider "},
		{Credentials{}, "pi", "", `error: unknown agent "pi" (known: claude, codex, opencode, amp)`},
	} {
		got, err := SelectCredential(c.creds, c.agent, c.provider)
		g := got.Key
		if err != nil {
			g = "error: " + err.Error()
		}
		if g != c.want {
			t.Errorf("%s/%s: %s, want %s", c.agent, c.provider, g, c.want)
		}
	}
}
