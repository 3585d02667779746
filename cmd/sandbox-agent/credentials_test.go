package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// shells are the POSIX shells on this machine that the quoting is proven
// against.
func shells(t testing.TB) []string {
	var out []string
	for _, sh := range []string{"sh", "dash", "bash", "zsh", "busybox"} {
		if p, err := exec.LookPath(sh); err == nil {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Skip("no POSIX shell on PATH")
	}
	return out
}

// evalInShell evals script in the shell and prints $name, as a user's
// eval "$(sandbox-agent credentials extract-env --export)" would.
func evalInShell(t testing.TB, sh, script, name string) string {
	t.Helper()
	args := []string{"-c", `eval "$(cat)"; printf %s "$` + name + `"`}
	if filepath.Base(sh) == "busybox" {
		args = append([]string{"sh"}, args...)
	}
	cmd := exec.Command(sh, args...)
	cmd.Stdin = strings.NewReader(script)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil || errb.Len() > 0 {
		t.Fatalf("%s: %v\nscript %q\nstderr %s", sh, err, script, errb.String())
	}
	return out.String()
}

// FuzzExtractEnvShell: whatever a value holds (but NUL, which EnvLine
// refuses), eval of its export line in a real shell sets exactly it.
func FuzzExtractEnvShell(f *testing.F) {
	for _, s := range []string{"", "sk-test-123", "it's", "'", "a'b'c", `"`, `\`, "\\'", "$(touch /tmp/pwned)", "`id`", "${HOME}", "a\nb", "\n", "x\n\n",
		"~", "~/x", "a b", "*", "!x", "#x", "a;b", "a|b", "a&b", "\t", "\r", "é😀", "\xff\xfe", "-n", "=", "%s",
		"=ls", "=nosuchcommand", "sk-a:=ls"} { // zsh: =cmd is the command's path, in an assignment after ':' too
		f.Add(s)
	}
	sh := shells(f)
	f.Fuzz(func(t *testing.T, s string) {
		line, ok := domain.EnvLine("SA_TEST_VAR", s, true)
		if strings.IndexByte(s, 0) >= 0 {
			if ok {
				t.Fatalf("a NUL byte was accepted: %q", line)
			}
			return
		}
		if !ok {
			t.Fatalf("EnvLine refused %q", s)
		}
		for _, shell := range sh {
			// Another line after it, as in the real output.
			if got := evalInShell(t, shell, line+"\nexport SA_OTHER=1\n", "SA_TEST_VAR"); got != s {
				t.Fatalf("%s: %q evals to %q via %q", shell, s, got, line)
			}
		}
	})
}

// extract-env end to end in process: hostile values from a file come out
// so that a shell's eval sets them exactly; a provider name a shell cannot
// assign and a NUL byte are left out and named on stderr.
func TestCredentialsExtractEnvIsSafeToEval(t *testing.T) {
	home := t.TempDir()
	hostile := "x'; touch " + filepath.Join(home, "pwned") + "; echo '$(id)`id`\n\"\\"
	auth := `{"anthropic":{"type":"api","key":` + jsonQuote(hostile) + `},
		"my-prov":{"type":"api","key":"plain-123"},
		"x; touch pwned2 #":{"type":"api","key":"k"},
		"nul":{"type":"api","key":"a\u0000b"}}`
	writeFile(t, filepath.Join(home, ".local/share/opencode/auth.json"), auth)
	clearCredentialEnv(t)
	r := runInProcess("credentials", "extract-env", "--export", "-d", home)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "pwned2") || strings.Contains(r.stdout, "NUL_API_KEY") {
		t.Errorf("unsafe lines printed:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, `skipped provider "x; touch pwned2 #"`) || !strings.Contains(r.stderr, "skipped NUL_API_KEY") {
		t.Errorf("stderr does not name what it left out:\n%s", r.stderr)
	}
	for _, sh := range shells(t) {
		if got := evalInShell(t, sh, r.stdout, "ANTHROPIC_API_KEY"); got != hostile {
			t.Errorf("%s: ANTHROPIC_API_KEY = %q, want %q", sh, got, hostile)
		}
		if got := evalInShell(t, sh, r.stdout, "MY_PROV_API_KEY"); got != "plain-123" {
			t.Errorf("%s: MY_PROV_API_KEY = %q", sh, got)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "pwned")); err == nil {
		t.Error("eval ran a command hidden in a key")
	}
}

// An unreadable file (here a directory where the file should be, which
// stops root too) is named on stderr; the other sources still count.
func TestCredentialsUnreadableFileIsNamed(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".codex", "auth.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(home, ".claude.json"), `{"primaryApiKey":"sk-ant-secret-1"}`)
	clearCredentialEnv(t)
	r := runInProcess("credentials", "extract", "-d", home)
	if r.code != 0 || !strings.Contains(r.stdout, `"api_key": "sk-a...et-1"`) {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, filepath.Join(home, ".codex", "auth.json")) || strings.Contains(r.stderr, "secret") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
}

func TestCredentialsExtractSelect(t *testing.T) {
	home := t.TempDir()
	writeFile(t, filepath.Join(home, ".local/share/opencode/auth.json"), `{"zeta":{"type":"api","key":"zk"},"alpha":{"type":"api","key":"ak"}}`)
	clearCredentialEnv(t)
	for _, c := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"-a", "opencode"}, 1, "", "multiple providers available for opencode: alpha, zeta (use --provider)"},
		{[]string{"-a", "opencode", "-p", "zeta"}, 0, "zk\n", ""},
		{[]string{"-p", "alpha"}, 0, "ak\n", ""},
		{[]string{"-p", ""}, 1, "", "no credentials found for provider \n"},
		{[]string{"-a", "claude"}, 1, "", "no credentials found for provider anthropic"},
		{[]string{"-a", "codex", "-p", "anthropic"}, 1, "", "agent codex only supports provider openai"},
		{[]string{"-a", "pi"}, 2, "", `invalid --agent "pi"`},
		{[]string{"-a", ""}, 2, "", `invalid --agent ""`},
	} {
		r := runInProcess(append([]string{"credentials", "extract", "-d", home}, c.args...)...)
		if r.code != c.code || r.stdout != c.stdout || !strings.Contains(r.stderr, c.stderr) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", c.args, r.code, r.stdout, r.stderr)
		}
	}
}

func clearCredentialEnv(t *testing.T) {
	for _, k := range append(append(append([]string{}, domain.AnthropicKeyEnv...), domain.AnthropicOAuthEnv...), domain.OpenAIKeyEnv...) {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func jsonQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
