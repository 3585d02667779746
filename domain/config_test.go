package domain

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseMCPServerConfig(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"local minimal", `{"type":"local","command":"npx"}`,
			`{"type":"local","command":"npx","args":[]}`},
		{"stdio alias, field order, aliases", `{"cwd":"/w","timeout":5,"environment":{"B":"2","A":"1"},"enabled":true,"args":["-y","x"],"command":"npx","type":"stdio"}`,
			`{"type":"local","command":"npx","args":["-y","x"],"env":{"A":"1","B":"2"},"enabled":true,"timeoutMs":5,"cwd":"/w"}`},
		{"command array", `{"type":"local","command":["node","server.js"]}`,
			`{"type":"local","command":["node","server.js"],"args":[]}`},
		{"unknown fields dropped", `{"type":"local","command":"x","url":"http://a","extra":{"deep":1}}`,
			`{"type":"local","command":"x","args":[]}`},
		{"null optional is absent", `{"type":"local","command":"x","env":null,"cwd":null}`,
			`{"type":"local","command":"x","args":[]}`},
		{"remote full", `{"transport":"sse","timeoutMs":10,"enabled":false,"oauth":{"scope":"s","clientId":"c","junk":1},"env_http_headers":{"X":"ENV"},"bearer_token_env_var":"TOK","headers":{"h":"v"},"url":"https://m","type":"remote"}`,
			`{"type":"remote","url":"https://m","headers":{"h":"v"},"bearerTokenEnvVar":"TOK","envHeaders":{"X":"ENV"},"oauth":{"clientId":"c","scope":"s"},"enabled":false,"timeoutMs":10,"transport":"sse"}`},
		{"http alias, oauth bool, envHttpHeaders", `{"type":"http","url":"u","oauth":false,"envHttpHeaders":{"a":"b"}}`,
			`{"type":"remote","url":"u","envHeaders":{"a":"b"},"oauth":false}`},
		{"no html escaping", `{"type":"local","command":"a<b>&c"}`,
			`{"type":"local","command":"a<b>&c","args":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseMCPServerConfig([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			// json.Marshal compacts and HTML-escapes; compare the raw form.
			raw, _ := c.MarshalJSON()
			if string(raw) != tt.want {
				t.Fatalf("got  %s\nwant %s", raw, tt.want)
			}
			if !json.Valid(got) {
				t.Fatalf("invalid JSON %s", got)
			}
			// Normalised output parses back to itself.
			again, err := ParseMCPServerConfig(raw)
			if err != nil {
				t.Fatal(err)
			}
			if raw2, _ := again.MarshalJSON(); string(raw2) != string(raw) {
				t.Fatalf("not idempotent: %s vs %s", raw2, raw)
			}
		})
	}
}

func TestParseMCPServerConfigErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
		syntax         bool
	}{
		{"not json", `{"type":`, "", true},
		{"empty", ``, "", true},
		{"not an object", `[1]`, "expected an object", false},
		{"missing type", `{"command":"x"}`, "missing field `type`", false},
		{"unknown type", `{"type":"grpc","url":"x"}`, "unknown variant `grpc`", false},
		{"type not string", `{"type":1}`, "type: invalid type: number", false},
		{"local without command", `{"type":"local"}`, "missing field `command`", false},
		{"command number", `{"type":"local","command":3}`, "command: invalid type", false},
		{"command array of numbers", `{"type":"local","command":[1]}`, "command[0]", false},
		{"args not array", `{"type":"local","command":"x","args":"a"}`, "args: invalid type: string", false},
		{"env not strings", `{"type":"local","command":"x","env":{"a":1}}`, "env.a", false},
		{"env and alias", `{"type":"local","command":"x","env":{},"environment":{}}`, "duplicate field `env`", false},
		{"duplicate key", `{"type":"local","type":"local","command":"x"}`, "duplicate field `type`", false},
		{"negative timeout", `{"type":"local","command":"x","timeoutMs":-1}`, "timeoutMs", false},
		{"fraction timeout", `{"type":"local","command":"x","timeout":1.5}`, "timeoutMs", false},
		{"enabled string", `{"type":"local","command":"x","enabled":"yes"}`, "enabled: invalid type", false},
		{"remote without url", `{"type":"remote"}`, "missing field `url`", false},
		{"bad transport", `{"type":"remote","url":"u","transport":"ws"}`, "transport", false},
		{"oauth string", `{"type":"remote","url":"u","oauth":"x"}`, "oauth", false},
		{"oauth clientId number", `{"type":"remote","url":"u","oauth":{"clientId":1}}`, "oauth", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseMCPServerConfig([]byte(tt.in))
			if err == nil {
				t.Fatal("want an error")
			}
			if got := errors.Is(err, ErrConfigSyntax); got != tt.syntax {
				t.Fatalf("syntax error = %v, want %v (%v)", got, tt.syntax, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

func TestParseSkillsConfig(t *testing.T) {
	in := `{"extra":1,"sources":[{"subpath":"s","ref":"main","skills":["a","b"],"source":"owner/repo","type":"github","junk":true},{"type":"local","source":"/p","skills":null}]}`
	want := `{"sources":[{"type":"github","source":"owner/repo","skills":["a","b"],"ref":"main","subpath":"s"},{"type":"local","source":"/p"}]}`
	c, err := ParseSkillsConfig([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := c.MarshalJSON()
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	empty, err := ParseSkillsConfig([]byte(`{"sources":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := empty.MarshalJSON(); string(got) != `{"sources":[]}` {
		t.Fatalf("empty sources: %s", got)
	}

	for _, bad := range []struct{ in, want string }{
		{`{}`, "missing field `sources`"},
		{`{"sources":null}`, "missing field `sources`"},
		{`{"sources":{}}`, "sources: invalid type"},
		{`{"sources":[{"type":"git"}]}`, "sources[0]: missing field `source`"},
		{`{"sources":[{"source":"x"}]}`, "missing field `type`"},
		{`{"sources":[{"type":"git","source":"x","skills":[1]}]}`, "skills[0]"},
		{`{"sources":[{"type":"git","source":"x","ref":false}]}`, "ref"},
		{`{"sources":[1]}`, "expected an object"},
	} {
		if _, err := ParseSkillsConfig([]byte(bad.in)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseSkillsConfig(%s) = %v, want error containing %q", bad.in, err, bad.want)
		}
	}
}

func TestConfigFile(t *testing.T) {
	entries := map[string]MCPServerConfig{}
	for name, doc := range map[string]string{
		"zeta":  `{"type":"remote","url":"https://z"}`,
		"alpha": `{"type":"local","command":"a","env":{}}`,
	} {
		c, err := ParseMCPServerConfig([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		entries[name] = c
	}
	got := string(EncodeConfigFile(entries))
	want := `{
  "alpha": {
    "type": "local",
    "command": "a",
    "args": [],
    "env": {}
  },
  "zeta": {
    "type": "remote",
    "url": "https://z"
  }
}`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	back, err := ParseConfigFile([]byte(got), ParseMCPServerConfig)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || back["zeta"].URL != "https://z" {
		t.Fatalf("read back %+v", back)
	}
	if got := string(EncodeConfigFile(map[string]MCPServerConfig{})); got != "{}" {
		t.Fatalf("empty file = %q", got)
	}
	if m, err := ParseConfigFile([]byte(" \n"), ParseSkillsConfig); err != nil || len(m) != 0 {
		t.Fatalf("blank file = %v, %v", m, err)
	}
	if _, err := ParseConfigFile([]byte(`{"x":{"type":"nope"}}`), ParseMCPServerConfig); err == nil || !strings.Contains(err.Error(), `entry "x"`) {
		t.Fatalf("corrupt entry: %v", err)
	}
	if _, err := ParseConfigFile([]byte(`{"x":`), ParseMCPServerConfig); !errors.Is(err, ErrConfigSyntax) {
		t.Fatalf("corrupt file: %v", err)
	}
}

// FuzzParseMCPServerConfig checks that whatever parses normalises to a
// document that parses to the same normal form.
func FuzzParseMCPServerConfig(f *testing.F) {
	for _, s := range []string{
		`{"type":"local","command":"npx","args":["a"],"env":{"A":"1"}}`,
		`{"type":"http","url":"u","oauth":{"clientId":"c"},"headers":{"a":"b"}}`,
		`{"type":"stdio","command":["a","b"],"timeout":3}`,
		`{"type":"remote","url":"u","oauth":true,"transport":"sse"}`,
		`{"type":"x"}`, `[]`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseMCPServerConfig(b)
		if err != nil {
			return
		}
		out, err := c.MarshalJSON()
		if err != nil {
			t.Fatalf("marshal %+v: %v", c, err)
		}
		c2, err := ParseMCPServerConfig(out)
		if err != nil {
			t.Fatalf("normal form %s does not parse: %v", out, err)
		}
		out2, _ := c2.MarshalJSON()
		if string(out) != string(out2) {
			t.Fatalf("not stable: %s vs %s", out, out2)
		}
	})
}

func FuzzParseSkillsConfig(f *testing.F) {
	f.Add([]byte(`{"sources":[{"type":"github","source":"o/r","skills":["a"],"ref":"m","subpath":"p"}]}`))
	f.Add([]byte(`{"sources":[]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseSkillsConfig(b)
		if err != nil {
			return
		}
		out, _ := c.MarshalJSON()
		c2, err := ParseSkillsConfig(out)
		if err != nil {
			t.Fatalf("normal form %s does not parse: %v", out, err)
		}
		if out2, _ := c2.MarshalJSON(); string(out) != string(out2) {
			t.Fatalf("not stable: %s vs %s", out, out2)
		}
	})
}

// decodeStrings slices plain strings out as they are and leaves escapes
// and invalid UTF-8 to encoding/json: both ways give what encoding/json
// gives, and a wrong element is named.
func TestDecodeStringsAsEncodingJSON(t *testing.T) {
	raw := []byte(`["plain", "esc\"aped\n", "\u00e9t\u00e9", "bad` + "\xff" + `utf8", "", "unicode é"]`)
	got, err := decodeStrings("args", raw)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for raw, msg := range map[string]string{
		`["a", null]`:   "args[1]: invalid type: null, expected a string",
		`["a", "b", 3]`: "args[2]: invalid type: number, expected a string",
		`"a"`:           "args: invalid type: string, expected an array of strings",
	} {
		if _, err := decodeStrings("args", []byte(raw)); err == nil || err.Error() != msg {
			t.Errorf("%s: %v, want %s", raw, err, msg)
		}
	}
	if got, err := decodeStrings("args", []byte(`[]`)); err != nil || got == nil || len(got) != 0 {
		t.Errorf("[]: %#v %v", got, err)
	}
}

// BenchmarkParseConfigFileManyArgs reads a 4 MiB config file of one-letter
// args, the worst a config file holds per byte.
func BenchmarkParseConfigFileManyArgs(b *testing.B) {
	doc := `{"e":{"type":"local","command":"x","args":[` + strings.Repeat(`"a",`, 1<<20) + `"a"]}}`
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseConfigFile([]byte(doc), ParseMCPServerConfig); err != nil {
			b.Fatal(err)
		}
	}
}
