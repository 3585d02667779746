package files

import (
	"bytes"
	"context"
	"path"
	"testing"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// secretFiles is memFiles with a token file in home and a "/proc/7" the
// secrets protect.
func secretFiles(t *testing.T) *Files {
	t.Helper()
	f := memFiles(t)
	for p, body := range map[string]string{"/home/u/tokens": "admin-tok\n", "/proc/7/environ": "TOKEN=x", "/proc/cpuinfo": "cpu"} {
		if err := f.Fs.MkdirAll(path.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := afero.WriteFile(f.Fs, p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f.Secrets = &porttest.FakeSecrets{Paths: map[string]string{"/home/u/tokens": "its token file", "/proc/7": "its /proc entries"}}
	return f
}

// TestFilesRefuseSecrets: every operation refuses a secret with 403 and
// says why; nothing is read, written, moved or removed.
func TestFilesRefuseSecrets(t *testing.T) {
	ctx := context.Background()
	f := secretFiles(t)
	const tokens = "/home/u/tokens"
	deny := func(what string, err error, shown string) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: allowed", what)
			return
		}
		wantErr(t, err, domain.KindPermissionDenied, shown+" is one of the daemon's own secrets (")
	}
	_, _, err := f.Open(ctx, "tokens")
	deny("open", err, tokens)
	_, _, err = f.Open(ctx, "/proc/7/environ")
	deny("open /proc", err, "/proc/7/environ")
	_, err = f.Stat(ctx, tokens)
	deny("stat", err, tokens)
	_, err = f.Entries(ctx, "/proc/7", nil)
	deny("list /proc/7", err, "/proc/7")
	_, err = f.Write(ctx, tokens, bytes.NewReader([]byte("mallory\n")), 8)
	deny("write", err, tokens)
	_, err = f.Write(ctx, "/proc/7/new", bytes.NewReader([]byte("x")), 1)
	deny("write in /proc/7", err, "/proc/7/new")
	_, err = f.Delete(ctx, tokens, false)
	deny("delete", err, tokens)
	_, err = f.Delete(ctx, testHome, true)
	deny("delete the directory holding it", err, testHome)
	_, err = f.Mkdir(ctx, "/proc/7/d")
	deny("mkdir", err, "/proc/7/d")
	_, _, err = f.Move(ctx, tokens, "/home/u/stolen", false)
	deny("move from", err, tokens)
	_, _, err = f.Move(ctx, "a.txt", tokens, true)
	deny("move onto", err, tokens)
	_, err = f.Upload(ctx, "/proc/7", bytes.NewReader(makeTar(t, tarEntry{name: "x", body: "x"})))
	deny("upload into /proc/7", err, "/proc/7")
	_, err = f.Upload(ctx, testHome, bytes.NewReader(makeTar(t, tarEntry{name: "ok.txt", body: "ok"}, tarEntry{name: "tokens", body: "mallory\n"})))
	deny("upload over it", err, tokens)

	if got := readAll(t, f.Fs, tokens); got != "admin-tok\n" {
		t.Errorf("the token file holds %q", got)
	}
	for _, p := range []string{"/home/u/stolen", "/home/u/ok.txt", "/proc/7/new", "/proc/7/d"} {
		if _, err := f.Fs.Stat(p); err == nil {
			t.Errorf("%s was created", p)
		}
	}
	if got := readAll(t, f.Fs, "/home/u/a.txt"); got != "a" {
		t.Errorf("a.txt holds %q", got)
	}

	// What is not a secret still works.
	if _, _, err := f.Open(ctx, "/proc/cpuinfo"); err != nil {
		t.Errorf("open /proc/cpuinfo: %v", err)
	}
	if _, err := f.Delete(ctx, "/home/u/dir", true); err != nil {
		t.Errorf("delete a directory without secrets: %v", err)
	}
}

// TestFilesListingOmitsSecrets: a listing leaves the secret out instead
// of failing.
func TestFilesListingOmitsSecrets(t *testing.T) {
	f := secretFiles(t)
	got, err := f.Entries(context.Background(), ".", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range got {
		if e.Name == "tokens" {
			t.Errorf("listed %+v", e)
		}
	}
	if len(got) != 4 { // a.txt, b.txt, dir, empty
		t.Errorf("listing = %+v", got)
	}
	procs, err := f.Entries(context.Background(), "/proc", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range procs {
		if e.Name == "7" {
			t.Errorf("/proc lists the daemon: %+v", e)
		}
	}
}

// TestConfigRefusesSecrets: a config directory inside a protected place,
// or a config file that is a secret, is 403.
func TestConfigRefusesSecrets(t *testing.T) {
	ctx := context.Background()
	s := newConfigStore(t)
	const secret = "/work/proj/.sandbox-agent/config/mcp.json"
	if err := s.Fs.MkdirAll("/work/proj/.sandbox-agent/config", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := afero.WriteFile(s.Fs, secret, []byte(`{"m":{"type":"local","command":"c"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Secrets = &porttest.FakeSecrets{Paths: map[string]string{"/proc/7": "its /proc entries", secret: "its token file"}}
	_, err := s.MCP(ctx, "/proc/7", "m")
	wantErr(t, err, domain.KindPermissionDenied, "/proc/7 is one of the daemon's own secrets (its /proc entries)")
	err = s.SetSkills(ctx, "/proc/7/x", "k", domain.SkillsConfig{})
	wantErr(t, err, domain.KindPermissionDenied, "/proc/7/x is one of the daemon's own secrets")
	_, err = s.MCP(ctx, "proj", "m")
	wantErr(t, err, domain.KindPermissionDenied, secret+" is one of the daemon's own secrets (its token file)")
	err = s.DeleteMCP(ctx, "proj", "m")
	wantErr(t, err, domain.KindPermissionDenied, secret)
	if _, err := s.Skills(ctx, "proj", "k"); !domain.IsKind(err, domain.KindSessionNotFound) {
		t.Errorf("another config file of the directory: %v", err)
	}
}

// TestConfigDirectoryNotADirectory: a directory query naming a file (or a
// FIFO, on a host filesystem) is the client's mistake: 400, before any
// config file is opened.
func TestConfigDirectoryNotADirectory(t *testing.T) {
	ctx := context.Background()
	s := newConfigStore(t)
	if err := afero.WriteFile(s.Fs, "/work/file", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"/work/file", "file", "/work/file/sub"} {
		_, err := s.MCP(ctx, dir, "m")
		wantErr(t, err, domain.KindInvalidRequest, "/work/file is not a directory")
		err = s.SetMCP(ctx, dir, "m", domain.MCPServerConfig{})
		wantErr(t, err, domain.KindInvalidRequest, "/work/file is not a directory")
	}
	if err := afero.WriteFile(s.Fs, "/work/proj/.sandbox-agent", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := s.Skills(ctx, "proj", "k")
	wantErr(t, err, domain.KindInvalidRequest, "/work/proj/.sandbox-agent is not a directory")
}
