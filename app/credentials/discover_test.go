package credentials

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

const home = "/home/u"

var (
	now    = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	past   = `"2000-01-01T00:00:00Z"`
	future = `"2999-01-01T00:00:00Z"`
)

// deniedFs refuses to open the files named in deny, as a file without read
// permission would (tests run as root, which chmod cannot stop).
type deniedFs struct {
	afero.Fs
	deny map[string]bool
}

func (d deniedFs) Open(name string) (afero.File, error) {
	if d.deny[name] {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
	}
	return d.Fs.Open(name)
}

type rig struct {
	files map[string]string // relative to home
	env   map[string]string
	deny  []string // relative to home
	dirs  []string // relative to home: a directory where a file is looked for
	max   int64
}

func (g rig) discover(t *testing.T, o Options) Result {
	t.Helper()
	mem := afero.NewMemMapFs()
	for rel, body := range g.files {
		if err := afero.WriteFile(mem, filepath.Join(home, rel), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, rel := range g.dirs {
		if err := mem.MkdirAll(filepath.Join(home, rel), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	deny := map[string]bool{}
	for _, rel := range g.deny {
		deny[filepath.Join(home, rel)] = true
	}
	d := &Discovery{
		Fs:   deniedFs{mem, deny},
		Home: home,
		LookupEnv: func(k string) (string, bool) {
			v, ok := g.env[k]
			return v, ok
		},
		Now:          func() time.Time { return now },
		MaxFileBytes: g.max,
	}
	return d.Discover(o)
}

// summary writes a result as "anthropic=source/auth/key openai=... other:name=..."
// ("-" for none), plus the problems' paths.
func summary(r Result) string {
	one := func(c *domain.Credential) string {
		if c == nil {
			return "-"
		}
		return c.Source + "/" + c.AuthType + "/" + c.Key
	}
	s := "anthropic=" + one(r.Credentials.Anthropic) + " openai=" + one(r.Credentials.OpenAI)
	for _, v := range domain.CredentialEnv(domain.Credentials{Other: r.Credentials.Other}) {
		c := r.Credentials.Other[v.Provider]
		s += " " + v.Provider + "=" + one(&c)
	}
	for _, p := range r.Problems {
		s += " problem:" + strings.TrimPrefix(p.Path, home+"/")
	}
	return s
}

func TestDiscover(t *testing.T) {
	all := Options{OAuth: true}
	noOAuth := Options{}
	usable := Options{OAuth: true, Usable: true}
	oc := ".local/share/opencode/auth.json"
	for _, c := range []struct {
		name string
		rig  rig
		o    Options
		want string
	}{
		{"nothing", rig{}, all, "anthropic=- openai=-"},

		// The environment, in order.
		{"ANTHROPIC_API_KEY", rig{env: map[string]string{"ANTHROPIC_API_KEY": "a1", "CLAUDE_API_KEY": "a2", "CLAUDE_CODE_OAUTH_TOKEN": "o1"}}, all, "anthropic=environment/api_key/a1 openai=-"},
		{"CLAUDE_API_KEY", rig{env: map[string]string{"CLAUDE_API_KEY": "a2", "CLAUDE_CODE_OAUTH_TOKEN": "o1"}}, all, "anthropic=environment/api_key/a2 openai=-"},
		{"CLAUDE_CODE_OAUTH_TOKEN", rig{env: map[string]string{"CLAUDE_CODE_OAUTH_TOKEN": "o1", "ANTHROPIC_AUTH_TOKEN": "o2"}}, all, "anthropic=environment/oauth/o1 openai=-"},
		{"ANTHROPIC_AUTH_TOKEN", rig{env: map[string]string{"ANTHROPIC_AUTH_TOKEN": "o2"}}, all, "anthropic=environment/oauth/o2 openai=-"},
		{"OAuth variables need OAuth", rig{env: map[string]string{"CLAUDE_CODE_OAUTH_TOKEN": "o1", "ANTHROPIC_AUTH_TOKEN": "o2"}}, noOAuth, "anthropic=- openai=-"},
		{"OPENAI_API_KEY", rig{env: map[string]string{"OPENAI_API_KEY": "k1", "CODEX_API_KEY": "k2"}}, all, "anthropic=- openai=environment/api_key/k1"},
		{"CODEX_API_KEY", rig{env: map[string]string{"CODEX_API_KEY": "k2"}}, noOAuth, "anthropic=- openai=environment/api_key/k2"},
		{"set but empty counts", rig{env: map[string]string{"ANTHROPIC_API_KEY": "", "CLAUDE_API_KEY": "a2"}}, all, "anthropic=environment/api_key/ openai=-"},
		{"set but empty is skipped when usable", rig{env: map[string]string{"ANTHROPIC_API_KEY": " ", "CLAUDE_API_KEY": "a2"}}, usable, "anthropic=environment/api_key/a2 openai=-"},
		{"not UTF-8 is skipped", rig{env: map[string]string{"OPENAI_API_KEY": "\xff\xfe", "CODEX_API_KEY": "k2"}}, all, "anthropic=- openai=environment/api_key/k2"},
		{"AMP_API_KEY is not a source", rig{env: map[string]string{"AMP_API_KEY": "x"}}, all, "anthropic=- openai=-"},

		// Each file alone.
		{"amp", rig{files: map[string]string{".amp/config.json": `{"apiKey":"amp1"}`}}, noOAuth, "anthropic=amp/api_key/amp1 openai=-"},
		{".claude.json.api", rig{files: map[string]string{".claude.json.api": `{"apiKey":"sk-ant-api"}`}}, all, "anthropic=claude-code/api_key/sk-ant-api openai=-"},
		{".claude.json", rig{files: map[string]string{".claude.json": `{"primaryApiKey":"sk-ant-c"}`}}, all, "anthropic=claude-code/api_key/sk-ant-c openai=-"},
		{".claude.json.nathan", rig{files: map[string]string{".claude.json.nathan": `{"customApiKey":"sk-ant-n"}`}}, all, "anthropic=claude-code/api_key/sk-ant-n openai=-"},
		{"claude oauth", rig{files: map[string]string{".claude/.credentials.json": `{"claudeAiOauth":{"accessToken":"oat","expiresAt":` + future + `}}`}}, all, "anthropic=claude-code/oauth/oat openai=-"},
		{"claude oauth needs OAuth", rig{files: map[string]string{".claude/.credentials.json": `{"claudeAiOauth":{"accessToken":"oat"}}`}}, noOAuth, "anthropic=- openai=-"},
		{"claude oauth second file", rig{files: map[string]string{".claude-oauth-credentials.json": `{"claudeAiOauth":{"accessToken":"oat2"}}`}}, all, "anthropic=claude-code/oauth/oat2 openai=-"},
		{"claude oauth expired: next file", rig{files: map[string]string{
			".claude/.credentials.json":      `{"claudeAiOauth":{"accessToken":"old","expiresAt":` + past + `}}`,
			".claude-oauth-credentials.json": `{"claudeAiOauth":{"accessToken":"new"}}`}}, all, "anthropic=claude-code/oauth/new openai=-"},
		{"claude oauth empty token counts", rig{files: map[string]string{
			".claude/.credentials.json":      `{"claudeAiOauth":{"accessToken":""}}`,
			".claude-oauth-credentials.json": `{"claudeAiOauth":{"accessToken":"new"}}`}}, all, "anthropic=claude-code/oauth/ openai=-"},
		{"claude oauth empty token skipped when usable", rig{files: map[string]string{
			".claude/.credentials.json":      `{"claudeAiOauth":{"accessToken":""}}`,
			".claude-oauth-credentials.json": `{"claudeAiOauth":{"accessToken":"new"}}`}}, usable, "anthropic=claude-code/oauth/new openai=-"},
		{"codex", rig{files: map[string]string{".codex/auth.json": `{"OPENAI_API_KEY":"sk-test-123"}`}}, all, "anthropic=- openai=codex/api_key/sk-test-123"},
		{"codex oauth", rig{files: map[string]string{".codex/auth.json": `{"tokens":{"access_token":"cx"}}`}}, all, "anthropic=- openai=codex/oauth/cx"},
		{"codex oauth needs OAuth", rig{files: map[string]string{".codex/auth.json": `{"tokens":{"access_token":"cx"}}`}}, noOAuth, "anthropic=- openai=-"},
		{"opencode", rig{files: map[string]string{oc: `{"anthropic":{"type":"api","key":"oa"},"openai":{"type":"oauth","access":"oo"},"zeta":{"type":"api","key":"z"}}`}}, all,
			"anthropic=opencode/api_key/oa openai=opencode/oauth/oo zeta=opencode/api_key/z"},
		{"opencode without OAuth", rig{files: map[string]string{oc: `{"openai":{"type":"oauth","access":"oo"},"zeta":{"type":"oauth","access":"z"},"y":{"type":"api","key":"y"}}`}}, noOAuth,
			"anthropic=- openai=- y=opencode/api_key/y"},
		{"opencode empty keys when usable", rig{files: map[string]string{oc: `{"openai":{"type":"api","key":""},"zeta":{"type":"api","key":" "},"y":{"type":"api","key":"y"}}`}}, usable,
			"anthropic=- openai=- y=opencode/api_key/y"},

		// The order between sources.
		{"environment before files", rig{env: map[string]string{"ANTHROPIC_API_KEY": "env"}, files: map[string]string{".amp/config.json": `{"apiKey":"amp1"}`, ".claude.json": `{"apiKey":"sk-ant-c"}`}}, all, "anthropic=environment/api_key/env openai=-"},
		{"amp before claude", rig{files: map[string]string{".amp/config.json": `{"apiKey":"amp1"}`, ".claude.json": `{"apiKey":"sk-ant-c"}`}}, all, "anthropic=amp/api_key/amp1 openai=-"},
		{"claude files in order", rig{files: map[string]string{".claude.json.api": `{"apiKey":"sk-ant-1"}`, ".claude.json": `{"apiKey":"sk-ant-2"}`, ".claude.json.nathan": `{"apiKey":"sk-ant-3"}`}}, all, "anthropic=claude-code/api_key/sk-ant-1 openai=-"},
		{"claude key before oauth", rig{files: map[string]string{".claude/.credentials.json": `{"claudeAiOauth":{"accessToken":"oat"}}`, ".claude.json": `{"apiKey":"sk-ant-k"}`}}, all, "anthropic=claude-code/api_key/sk-ant-k openai=-"},
		{"claude before opencode", rig{files: map[string]string{oc: `{"anthropic":{"type":"api","key":"oa"}}`, ".claude.json": `{"apiKey":"sk-ant-k"}`}}, all, "anthropic=claude-code/api_key/sk-ant-k openai=-"},
		{"codex before opencode", rig{files: map[string]string{oc: `{"openai":{"type":"api","key":"oo"}}`, ".codex/auth.json": `{"OPENAI_API_KEY":"cx"}`}}, all, "anthropic=- openai=codex/api_key/cx"},
		{"environment and opencode's others", rig{env: map[string]string{"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"}, files: map[string]string{oc: `{"anthropic":{"type":"api","key":"x"},"zeta":{"type":"api","key":"z"}}`}}, all,
			"anthropic=environment/api_key/a openai=environment/api_key/o zeta=opencode/api_key/z"},

		// Malformed, missing and unreadable files.
		{"malformed is skipped silently", rig{files: map[string]string{".amp/config.json": `{bad`, ".claude.json": `{"apiKey":"sk-ant-c"}`}}, all, "anthropic=claude-code/api_key/sk-ant-c openai=-"},
		{"the reference's malformed: lone surrogate", rig{files: map[string]string{".codex/auth.json": `{"OPENAI_API_KEY":"\udc00x"}`}}, all, "anthropic=- openai=-"},
		{"unreadable is a problem, then the next source", rig{files: map[string]string{".amp/config.json": `{"apiKey":"amp1"}`, ".claude.json": `{"apiKey":"sk-ant-c"}`}, deny: []string{".amp/config.json"}}, all,
			"anthropic=claude-code/api_key/sk-ant-c openai=- problem:.amp/config.json"},
		{"a file not consulted is no problem", rig{env: map[string]string{"ANTHROPIC_API_KEY": "a"}, files: map[string]string{".amp/config.json": `{}`}, deny: []string{".amp/config.json"}}, all,
			"anthropic=environment/api_key/a openai=-"},
		{"a directory is a problem", rig{dirs: []string{".codex/auth.json"}}, all, "anthropic=- openai=- problem:.codex/auth.json"},
		{"under a file is missing", rig{files: map[string]string{".codex": "x", ".claude": "y"}}, all, "anthropic=- openai=-"},
		{"too large is a problem", rig{files: map[string]string{".codex/auth.json": `{"OPENAI_API_KEY":"sk-test-123"}`}, max: 10}, all, "anthropic=- openai=- problem:.codex/auth.json"},
		{"at the limit is read", rig{files: map[string]string{".codex/auth.json": `{"OPENAI_API_KEY":"sk"}`}, max: int64(len(`{"OPENAI_API_KEY":"sk"}`))}, all, "anthropic=- openai=codex/api_key/sk"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := summary(c.rig.discover(t, c.o)); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// A problem names the file and why, never what it holds.
func TestDiscoverProblemsHoldNoSecret(t *testing.T) {
	secret := `{"OPENAI_API_KEY":"sk-secret-value-42"}`
	r := rig{files: map[string]string{".codex/auth.json": secret}, max: 5}.discover(t, Options{OAuth: true})
	r2 := rig{files: map[string]string{".codex/auth.json": secret}, deny: []string{".codex/auth.json"}}.discover(t, Options{OAuth: true})
	for _, p := range append(r.Problems, r2.Problems...) {
		msg := p.Err.Error()
		if !strings.Contains(msg, filepath.Join(home, ".codex/auth.json")) || strings.Contains(msg, "sk-secret") {
			t.Errorf("problem %q", msg)
		}
	}
	if len(r2.Problems) != 1 || !errors.Is(r2.Problems[0].Err, fs.ErrPermission) {
		t.Errorf("problems = %v", r2.Problems)
	}
}

// A Claude Code config parsed once is parsed again when its size or its
// modification time changes, and not otherwise (Discovery's cache).
func TestDiscoverRereadsChangedConfig(t *testing.T) {
	mem := afero.NewMemMapFs()
	path := filepath.Join(home, ".claude.json")
	write := func(body string, at time.Time) {
		t.Helper()
		if err := afero.WriteFile(mem, path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := mem.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	d := &Discovery{Fs: mem, Home: home}
	key := func() string {
		t.Helper()
		c := d.Discover(Options{Usable: true}).Credentials.Anthropic
		if c == nil {
			return ""
		}
		return c.Key
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	write(`{"primaryApiKey":"sk-ant-aaaa"}`, t0)
	if k := key(); k != "sk-ant-aaaa" {
		t.Fatalf("first: %q", k)
	}
	write(`{"primaryApiKey":"sk-ant-bbbb"}`, t0.Add(time.Nanosecond)) // same size, newer
	if k := key(); k != "sk-ant-bbbb" {
		t.Fatalf("after a rewrite of the same size: %q", k)
	}
	write(`{"primaryApiKey":"sk-ant-cc"}`, t0.Add(time.Nanosecond)) // same time, other size
	if k := key(); k != "sk-ant-cc" {
		t.Fatalf("after a rewrite of another size: %q", k)
	}
	// The cache answers while nothing changed: a file of the same size
	// and time is taken as the same file.
	write(`{"primaryApiKey":"sk-ant-dd"}`, t0.Add(time.Nanosecond))
	if k := key(); k != "sk-ant-cc" {
		t.Fatalf("same size and time: %q, want the remembered parse", k)
	}
	if err := mem.Remove(path); err != nil {
		t.Fatal(err)
	}
	if k := key(); k != "" {
		t.Fatalf("after removal: %q", k)
	}
}
