package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// referenceCLI is the reference 0.4.2 binary, from the npm packages the
// compatibility tests install (the sandbox-agent package's platform
// dependency).
func referenceCLI(t *testing.T) string {
	t.Helper()
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	if runtime.GOOS != "linux" || arch == "" {
		t.Skipf("the reference binary is published for linux x64 and arm64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	requireNodeModules(t)
	p, err := filepath.Abs(filepath.Join("node_modules", "@sandbox-agent", "cli-linux-"+arch, "bin", "sandbox-agent"))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("the reference binary is missing (%v): cd e2e && rm -rf node_modules && npm ci", err)
	}
	return p
}

// sharedDir is a fresh directory every user may enter (t.TempDir is
// private to its owner), for runs as another user.
func sharedDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for p := d; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

type cliResult struct {
	code           int
	stdout, stderr string
}

// runCLI runs bin with args in exactly env (nothing inherited), as uid
// when it is not -1, for at most 20 s.
func runCLI(t *testing.T, bin string, env []string, uid int, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Dir = "/"
	if uid >= 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %q: %v", bin, args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("%s %q did not finish in 20 s", bin, args)
	}
	return cliResult{code, out.String(), errb.String()}
}

type credHome struct {
	name  string
	files map[string]string // relative to the home directory
	env   []string
	// hostile: values with other than letters, digits and _@%+=:,./-;
	// extract-env quotes them (the reference prints them bare, which a
	// shell may run), so its lines are checked by eval instead.
	hostile bool
	// unreadable files (relative), made so by mode 000 (and by running
	// both binaries as nobody when the tests run as root).
	unreadable []string
	// dirs are directories where a file is looked for (unreadable to
	// anyone).
	dirs []string
}

const (
	pastTime   = `"2000-01-01T00:00:00Z"`
	futureTime = `"2999-01-01T00:00:00Z"`
	ocFile     = ".local/share/opencode/auth.json"
)

func credHomes() []credHome {
	deep := strings.Repeat("[", 127) + strings.Repeat("]", 127)
	return []credHome{
		{name: "empty"},
		// The environment alone, and its order.
		{name: "ANTHROPIC_API_KEY", env: []string{"ANTHROPIC_API_KEY=sk-ant-xyz"}},
		{name: "CLAUDE_API_KEY", env: []string{"CLAUDE_API_KEY=abc"}},
		{name: "CLAUDE_CODE_OAUTH_TOKEN", env: []string{"CLAUDE_CODE_OAUTH_TOKEN=tok1-abcdefgh", "ANTHROPIC_AUTH_TOKEN=tok2"}},
		{name: "ANTHROPIC_AUTH_TOKEN", env: []string{"ANTHROPIC_AUTH_TOKEN=tok2abcdefgh"}},
		{name: "OPENAI_API_KEY over CODEX_API_KEY", env: []string{"CODEX_API_KEY=c1234567890", "OPENAI_API_KEY=o1234567890"}},
		{name: "CODEX_API_KEY", env: []string{"CODEX_API_KEY=c1234567890"}},
		{name: "anthropic variables in order", env: []string{"CLAUDE_CODE_OAUTH_TOKEN=o", "CLAUDE_API_KEY=c", "ANTHROPIC_API_KEY=a"}},
		{name: "set but empty", env: []string{"ANTHROPIC_API_KEY=", "OPENAI_API_KEY="}},
		{name: "not UTF-8", env: []string{"OPENAI_API_KEY=\xff\xfeabcdefghij", "CODEX_API_KEY=codexkey123"}},
		{name: "white space around", hostile: true, env: []string{"OPENAI_API_KEY=\t abcdefghijkl\n"}},
		{name: "8 and 9 bytes", env: []string{"ANTHROPIC_API_KEY=12345678", "OPENAI_API_KEY=123456789"}},
		{name: "multi-byte", hostile: true, env: []string{"OPENAI_API_KEY=ééééééé", "ANTHROPIC_API_KEY=abcdéxyzw"}},
		// Each file alone.
		{name: "amp", files: map[string]string{".amp/config.json": `{"anthropicApiKey":"","anthropic_api_key":"amp-key-123456"}`}},
		{name: "amp nested", files: map[string]string{".amp/config.json": `{"auth":{"token":"t"},"anthropic":{"apiKey":"y"}}`}},
		{name: ".claude.json.api", files: map[string]string{".claude.json.api": `{"apiKey":"sk-ant-fromapi"}`, ".claude.json": `{"customApiKey":"sk-ant-custom"}`}},
		{name: ".claude.json", files: map[string]string{".claude.json": `{"primaryApiKey":"notant","apiKey":"sk-ant-apikey-1234"}`}},
		{name: ".claude.json.nathan", files: map[string]string{".claude.json": `{"primaryApiKey":1}`, ".claude.json.nathan": `{"anthropicApiKey":"sk-ant-nathan"}`}},
		{name: "claude oauth", files: map[string]string{".claude/.credentials.json": `{"claudeAiOauth":{"accessToken":"oat-1234567890","expiresAt":` + futureTime + `}}`}},
		{name: "claude oauth expired", files: map[string]string{
			".claude/.credentials.json":      `{"claudeAiOauth":{"accessToken":"oat-1","expiresAt":` + pastTime + `}}`,
			".claude-oauth-credentials.json": `{"claudeAiOauth":{"accessToken":"oat-2"}}`}},
		{name: "claude oauth numeric expiry", files: map[string]string{".claude/.credentials.json": `{"claudeAiOauth":{"accessToken":"oat-1","expiresAt":1}}`}},
		{name: "claude oauth empty token", files: map[string]string{
			".claude/.credentials.json":      `{"claudeAiOauth":{"accessToken":""}}`,
			".claude-oauth-credentials.json": `{"claudeAiOauth":{"accessToken":"oat-2"}}`}},
		{name: "claude oauth leap second", files: map[string]string{".claude/.credentials.json": `{"claudeAiOauth":{"accessToken":"oat-1","expiresAt":"2000-01-01T00:59:60+01:00"}}`}},
		{name: "codex", files: map[string]string{".codex/auth.json": `{"OPENAI_API_KEY":"sk-test-123"}`}},
		{name: "codex oauth", files: map[string]string{".codex/auth.json": `{"OPENAI_API_KEY":"","tokens":{"access_token":"cx-oauth-123456"}}`}},
		{name: "opencode", files: map[string]string{ocFile: `{"anthropic":{"type":"api","key":"oc-ant-123456"},"openai":{"type":"oauth","access":"oa-oauth-123456"},"my-prov":{"type":"api","key":"mp-key-123456"}}`}},
		{name: "opencode expiries", files: map[string]string{ocFile: `{"anthropic":{"type":"oauth","access":"acc1","expires":1},"openai":{"type":"oauth","access":"acc2","expires":-0},"zz":{"type":"oauth","access":"acc3","expires":99999999999999}}`}},
		{name: "opencode several others", files: map[string]string{ocFile: `{"zeta":{"type":"api","key":"zeta-key-123456"},"alpha":{"type":"api","key":"alpha-key-123456"},"my-prov":{"type":"api","key":"mp-key-123456"}}`}},
		{name: "opencode odd entries", files: map[string]string{ocFile: `{"anthropic":{"type":"api"},"openai":{"type":"API","key":"x"},"x":{"type":"wellknown","key":"k"},"y":"str","":{"type":"api","key":"empty-name"}}`}},
		// Several sources at once.
		{name: "environment over files", env: []string{"ANTHROPIC_API_KEY=env-key-123456"},
			files: map[string]string{".amp/config.json": `{"apiKey":"amp1"}`, ".claude.json": `{"apiKey":"sk-ant-c"}`, ".codex/auth.json": `{"OPENAI_API_KEY":"cx-key-123456"}`}},
		{name: "amp over claude", files: map[string]string{".amp/config.json": `{"apiKey":"amp1"}`, ".claude.json": `{"apiKey":"sk-ant-c"}`}},
		{name: "claude key over oauth", files: map[string]string{".claude/.credentials.json": `{"claudeAiOauth":{"accessToken":"oat-1"}}`, ".claude.json": `{"apiKey":"sk-ant-k"}`}},
		{name: "everything", env: []string{"CODEX_API_KEY=codex-env-123456"}, files: map[string]string{
			".claude/.credentials.json": `{"claudeAiOauth":{"accessToken":"oat-123456789"}}`,
			".codex/auth.json":          `{"tokens":{"access_token":"cx"}}`,
			ocFile:                      `{"anthropic":{"type":"api","key":"oc-an"},"openai":{"type":"api","key":"oc-oa"},"zeta":{"type":"api","key":"zeta-key-123456"}}`}},
		// Malformed files are skipped, to the reference and to us alike.
		{name: "malformed", files: map[string]string{
			".amp/config.json":          `{bad`,
			".claude.json.api":          "\xef\xbb\xbf{\"apiKey\":\"sk-ant-bom\"}",
			".claude.json":              `{"apiKey":"sk-ant-\udc00"}`,
			".claude.json.nathan":       "{\"apiKey\":\"sk-ant-\xff\"}",
			".claude/.credentials.json": `{"claudeAiOauth":{"accessToken":"big"},"n":1e400}`,
			".codex/auth.json":          `{"OPENAI_API_KEY":"deep","j":` + deep + `}`,
			ocFile:                      `[{"anthropic":{"type":"api","key":"arr"}}]`,
		}},
		{name: "nearly malformed", files: map[string]string{
			".claude/.credentials.json": `{"claudeAiOauth":{"accessToken":"small"},"n":1e-400}`,
			".codex/auth.json":          `{"OPENAI_API_KEY":"deep","j":` + deep[1:len(deep)-1] + `}`,
		}},
		// Hostile values: JSON escapes, and extract-env lines a shell must
		// read back exactly.
		{name: "hostile values", hostile: true, files: map[string]string{
			".codex/auth.json": `{"OPENAI_API_KEY":"ab\ncd$(id)` + "`x`" + `'\"\u2028<>&\u001f"}`,
			ocFile:             `{"anthropic":{"type":"api","key":"it's a key; rm -rf ~"},"my-prov":{"type":"api","key":"~/x y"}}`,
		}},
		// Unreadable files: skipped (we name them on stderr).
		{name: "unreadable", unreadable: []string{".amp/config.json", ".codex/auth.json"}, files: map[string]string{
			".amp/config.json": `{"apiKey":"amp1"}`, ".claude.json": `{"apiKey":"sk-ant-readable"}`,
			".codex/auth.json": `{"OPENAI_API_KEY":"hidden-123456"}`}},
		{name: "directory for a file", dirs: []string{".claude.json", ".codex/auth.json"}, files: map[string]string{".claude.json.nathan": `{"apiKey":"sk-ant-n"}`}},
	}
}

// The commands run on every home; selections run too (-a, -p).
var credCommands = [][]string{
	{"extract"},
	{"extract", "--reveal"},
	{"extract", "--no-oauth", "-r"},
	{"extract-env"},
	{"extract-env", "-e"},
	{"extract-env", "--no-oauth"},
	{"extract", "-a", "claude"},
	{"extract", "-a", "codex"},
	{"extract", "-a", "opencode"},
	{"extract", "--agent", "amp", "--no-oauth"},
	{"extract", "-a", "opencode", "-p", "zeta"},
	{"extract", "-a", "claude", "-p", "openai"},
	{"extract", "-p", "anthropic"},
	{"extract", "-p", "my-prov"},
}

// TestCompatCredentials runs our binary and the reference on the same
// homes and environments and compares what they print: extract's JSON
// byte for byte (OpenCode's other providers, which the reference prints in
// a random order, compared as a set), extract-env line for line (the
// other providers' lines as a set), the selected keys and the exit
// statuses. Where we differ on purpose (a value a shell would interpret
// is quoted), the line must eval to the reference's value.
func TestCompatCredentials(t *testing.T) {
	asNobody := os.Geteuid() == 0
	bins := sharedDir(t)
	ours := copyBinary(t, bins)
	// Both binaries in a directory another user may enter (the checkout
	// may be in a private home).
	ref := filepath.Join(bins, "reference")
	b, err := os.ReadFile(referenceCLI(t))
	must(t, err)
	must(t, os.WriteFile(ref, b, 0o755))
	for _, h := range credHomes() {
		t.Run(h.name, func(t *testing.T) {
			home := sharedDir(t)
			emptyHome := sharedDir(t)
			for rel, body := range h.files {
				p := filepath.Join(home, rel)
				must(t, os.MkdirAll(filepath.Dir(p), 0o755))
				must(t, os.WriteFile(p, []byte(body), 0o644))
			}
			for _, rel := range h.dirs {
				must(t, os.MkdirAll(filepath.Join(home, rel), 0o755))
			}
			for _, rel := range h.unreadable {
				must(t, os.Chmod(filepath.Join(home, rel), 0))
			}
			uid := -1
			if len(h.unreadable) > 0 && asNobody {
				uid = 65534 // root reads a file of mode 000
			}
			for _, args := range credCommands {
				full := append([]string{"credentials"}, args...)
				// -d names the home; HOME is an empty one. One run per home
				// uses HOME alone, as a user would.
				env := append([]string{"PATH=/usr/bin:/bin", "HOME=" + emptyHome}, h.env...)
				homeArgs := []string{"-d", home}
				if slices.Equal(args, []string{"extract-env"}) {
					env[1], homeArgs = "HOME="+home, nil
				}
				full = append(full, homeArgs...)
				want := runCLI(t, ref, env, uid, full...)
				got := runCLI(t, ours, env, uid, full...)
				revealed := ""
				if h.hostile && args[0] == "extract-env" {
					// What each variable must hold, from the reference.
					reveal := []string{"credentials", "extract", "--reveal"}
					if slices.Contains(args, "--no-oauth") {
						reveal = append(reveal, "--no-oauth")
					}
					revealed = runCLI(t, ref, env, uid, append(reveal, homeArgs...)...).stdout
				}
				compareCredentialRun(t, h, args, got, want, revealed)
				if len(h.unreadable)+len(h.dirs) > 0 && !strings.Contains(got.stderr, "cannot be read") {
					t.Errorf("%q: the unreadable files are not named on stderr:\n%s", args, got.stderr)
				}
			}
		})
	}
}

func compareCredentialRun(t *testing.T, h credHome, args []string, got, want cliResult, revealed string) {
	t.Helper()
	if got.code != want.code {
		t.Errorf("%q: exit %d, the reference %d\nours: %s%s\nreference: %s%s", args, got.code, want.code, got.stdout, got.stderr, want.stdout, want.stderr)
		return
	}
	if got.stdout == want.stdout {
		return
	}
	switch {
	case args[0] == "extract" && strings.HasPrefix(want.stdout, "{"):
		var g, w any
		if json.Unmarshal([]byte(got.stdout), &g) != nil || json.Unmarshal([]byte(want.stdout), &w) != nil || !reflect.DeepEqual(g, w) {
			t.Errorf("%q:\nours:\n%s\nreference:\n%s", args, got.stdout, want.stdout)
		} else if others, _ := w.(map[string]any)["other"].(map[string]any); len(others) < 2 {
			t.Errorf("%q: same document, other bytes:\nours:\n%s\nreference:\n%s", args, got.stdout, want.stdout)
		}
	case args[0] == "extract-env" && h.hostile:
		checkEvalsLikeReference(t, args, got.stdout, revealed)
	case args[0] == "extract-env":
		g, w := strings.SplitAfter(got.stdout, "\n"), strings.SplitAfter(want.stdout, "\n")
		// The reference prints the other providers' lines in a random order.
		fixed := 0
		for fixed < len(w) && fixed < 4 && isProviderSlot(w[fixed]) {
			fixed++
		}
		if len(g) != len(w) || !slices.Equal(g[:fixed], w[:fixed]) || !sameSet(g[fixed:], w[fixed:]) {
			t.Errorf("%q:\nours:\n%s\nreference:\n%s", args, got.stdout, want.stdout)
		}
	default:
		t.Errorf("%q:\nours: %q\nreference: %q", args, got.stdout, want.stdout)
	}
}

func isProviderSlot(line string) bool {
	line = strings.TrimPrefix(line, "export ")
	for _, n := range []string{"ANTHROPIC_API_KEY=", "CLAUDE_API_KEY=", "OPENAI_API_KEY=", "CODEX_API_KEY="} {
		if strings.HasPrefix(line, n) {
			return true
		}
	}
	return false
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// checkEvalsLikeReference evals our extract-env output in sh and checks
// each variable holds the key the reference reveals for it (revealed: its
// extract --reveal document for the same home and options).
func checkEvalsLikeReference(t *testing.T, args []string, out, revealed string) {
	t.Helper()
	type cred struct {
		Key string `json:"api_key"`
	}
	var doc struct {
		Anthropic, OpenAI *cred
		Other             map[string]cred
	}
	must(t, json.Unmarshal([]byte(revealed), &doc))
	want := map[string]string{}
	if doc.Anthropic != nil {
		want["ANTHROPIC_API_KEY"], want["CLAUDE_API_KEY"] = doc.Anthropic.Key, doc.Anthropic.Key
	}
	if doc.OpenAI != nil {
		want["OPENAI_API_KEY"], want["CODEX_API_KEY"] = doc.OpenAI.Key, doc.OpenAI.Key
	}
	for name, c := range doc.Other {
		want[strings.ReplaceAll(strings.ToUpper(name), "-", "_")+"_API_KEY"] = c.Key
	}
	if len(want) == 0 {
		t.Fatalf("%q: the reference reveals no key", args)
	}
	for name, value := range want {
		cmd := exec.Command("sh", "-c", `eval "$(cat)"; printf %s "$`+name+`"`)
		cmd.Stdin = strings.NewReader(out)
		got, err := cmd.Output()
		if err != nil || string(got) != value {
			t.Errorf("%q: eval sets %s to %q (%v), want %q; output:\n%s", args, name, got, err, value, out)
		}
	}
}

// TestCredentialsFIFO: a FIFO where a credentials file is looked for (the
// reference blocks reading it forever) is skipped at once and named.
func TestCredentialsFIFO(t *testing.T) {
	home := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(home, ".codex"), 0o755))
	must(t, syscall.Mkfifo(filepath.Join(home, ".codex", "auth.json"), 0o644))
	must(t, os.WriteFile(filepath.Join(home, ".claude.json"), []byte(`{"apiKey":"sk-ant-fifo-test"}`), 0o644))
	r := runCLI(t, harness.Binary, []string{"PATH=/usr/bin:/bin", "HOME=" + home}, -1, "credentials", "extract-env")
	if r.code != 0 || r.stdout != "ANTHROPIC_API_KEY=sk-ant-fifo-test\nCLAUDE_API_KEY=sk-ant-fifo-test\n" ||
		!strings.Contains(r.stderr, filepath.Join(home, ".codex", "auth.json")) {
		t.Errorf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
}

// TestCredentialsNeverLogged: with keys in the environment and in files
// (one of them unreadable), listing the agents at debug level logs no key.
func TestCredentialsNeverLogged(t *testing.T) {
	home := t.TempDir()
	secrets := []string{"sk-ant-env-secret-1", "sk-ant-file-secret-2", "cx-file-secret-3", "oc-file-secret-4"}
	must(t, os.WriteFile(filepath.Join(home, ".claude.json"), []byte(`{"apiKey":"`+secrets[1]+`"}`), 0o600))
	must(t, os.MkdirAll(filepath.Join(home, ".codex", "auth.json"), 0o755)) // unreadable: a directory
	must(t, os.MkdirAll(filepath.Join(home, ".local", "share", "opencode"), 0o755))
	must(t, os.WriteFile(filepath.Join(home, ".local", "share", "opencode", "auth.json"),
		[]byte(`{"openai":{"type":"api","key":"`+secrets[3]+`"},"zeta":{"type":"api","key":"`+secrets[2]+`"}}`), 0o600))
	reg := newACPRegistry(t, `{"agents":[]}`)
	env := append(append(reg.env(), noCredentials...), "ANTHROPIC_API_KEY="+secrets[0])
	d := harness.Start(t, harness.Options{Home: home, Env: env}) // logs at debug level
	st, _, body := d.Do(http.MethodGet, "/v1/agents", nil)
	if st != 200 || !strings.Contains(string(body), `{"id":"codex","installed":false,"credentialsAvailable":true`) {
		t.Fatalf("GET /v1/agents: %d %s", st, body)
	}
	harness.Eventually(t, 5*time.Second, "the skipped file in the log", func() bool {
		return strings.Contains(d.Logs(), "credentials file skipped")
	})
	for _, s := range secrets {
		if strings.Contains(d.Logs(), s) || strings.Contains(d.Logs(), s[:12]) {
			t.Errorf("the daemon's log holds %s", s)
		}
	}
}
