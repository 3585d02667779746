package files

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

func newConfigStore(t *testing.T) *ConfigStore {
	t.Helper()
	fsys := afero.NewMemMapFs()
	if err := fsys.MkdirAll("/work/proj", 0o755); err != nil {
		t.Fatal(err)
	}
	return &ConfigStore{Fs: fsys, Base: "/work"}
}

func mustMCP(t *testing.T, doc string) domain.MCPServerConfig {
	t.Helper()
	c, err := domain.ParseMCPServerConfig([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConfigMCP(t *testing.T) {
	ctx := context.Background()
	s := newConfigStore(t)

	_, err := s.MCP(ctx, "/work/proj", "github")
	wantErr(t, err, domain.KindSessionNotFound, "mcp:github")
	if e, _ := domain.AsError(err); e.SessionID != "mcp:github" {
		t.Fatalf("sessionId = %q", e.SessionID)
	}

	if err := s.SetMCP(ctx, "/work/proj", "github", mustMCP(t, `{"type":"http","url":"https://gh","bearer_token_env_var":"T"}`)); err != nil {
		t.Fatal(err)
	}
	// A relative directory resolves against Base: the same file.
	if err := s.SetMCP(ctx, "proj", "local", mustMCP(t, `{"type":"stdio","command":"npx","environment":{"K":"V"}}`)); err != nil {
		t.Fatal(err)
	}
	got, err := s.MCP(ctx, "proj/", "github")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := got.MarshalJSON(); string(b) != `{"type":"remote","url":"https://gh","bearerTokenEnvVar":"T"}` {
		t.Fatalf("get = %s", b)
	}

	file := readAll(t, s.Fs, "/work/proj/.sandbox-agent/config/mcp.json")
	want := `{
  "github": {
    "type": "remote",
    "url": "https://gh",
    "bearerTokenEnvVar": "T"
  },
  "local": {
    "type": "local",
    "command": "npx",
    "args": [],
    "env": {
      "K": "V"
    }
  }
}`
	if file != want {
		t.Fatalf("file:\n%s\nwant:\n%s", file, want)
	}
	entries, _ := afero.ReadDir(s.Fs, "/work/proj/.sandbox-agent/config")
	if len(entries) != 1 {
		t.Fatalf("config dir holds %d files (temporary files left?)", len(entries))
	}

	if err := s.DeleteMCP(ctx, "/work/proj", "github"); err != nil {
		t.Fatal(err)
	}
	_, err = s.MCP(ctx, "/work/proj", "github")
	wantErr(t, err, domain.KindSessionNotFound, "mcp:github")
	if _, err := s.MCP(ctx, "/work/proj", "local"); err != nil {
		t.Fatal(err)
	}
	// Deleting what is not there succeeds and creates nothing.
	if err := s.DeleteMCP(ctx, "/work/none", "x"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := afero.Exists(s.Fs, "/work/none"); ok {
		t.Fatal("delete of a missing entry created files")
	}
}

func TestConfigSkills(t *testing.T) {
	ctx := context.Background()
	s := newConfigStore(t)
	c, err := domain.ParseSkillsConfig([]byte(`{"sources":[{"type":"github","source":"o/r","ref":"main"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetSkills(ctx, "/work/proj", "mine", c); err != nil {
		t.Fatal(err)
	}
	got, err := s.Skills(ctx, "/work/proj", "mine")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := got.MarshalJSON(); string(b) != `{"sources":[{"type":"github","source":"o/r","ref":"main"}]}` {
		t.Fatalf("get = %s", b)
	}
	_, err = s.Skills(ctx, "/work/proj", "other")
	wantErr(t, err, domain.KindSessionNotFound, "skills:other")
	if err := s.DeleteSkills(ctx, "/work/proj", "mine"); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s.Fs, "/work/proj/.sandbox-agent/config/skills.json"); got != "{}" {
		t.Fatalf("after delete: %q", got)
	}
}

func TestConfigErrors(t *testing.T) {
	ctx := context.Background()
	s := newConfigStore(t)
	for _, tt := range []struct{ dir, name, msg string }{
		{"", "x", "missing required 'directory' query parameter"},
		{"  ", "x", "missing required 'directory' query parameter"},
		{"/work", "", "missing required 'mcpName' query parameter"},
		{"/work", " \t", "missing required 'mcpName' query parameter"},
		{"/wo\x00rk", "x", "NUL"},
	} {
		_, err := s.MCP(ctx, tt.dir, tt.name)
		wantErr(t, err, domain.KindInvalidRequest, tt.msg)
	}
	_, err := s.Skills(ctx, "/work", "")
	wantErr(t, err, domain.KindInvalidRequest, "missing required 'skillName' query parameter")

	if err := afero.WriteFile(s.Fs, "/work/proj/.sandbox-agent/config/mcp.json", []byte(`{"x":`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = s.MCP(ctx, "/work/proj", "x")
	wantErr(t, err, domain.KindInvalidRequest, "invalid config file /work/proj/.sandbox-agent/config/mcp.json")
	err = s.SetMCP(ctx, "/work/proj", "y", mustMCP(t, `{"type":"local","command":"c"}`))
	wantErr(t, err, domain.KindInvalidRequest, "invalid config file")

	// A blank file is an empty map.
	if err := afero.WriteFile(s.Fs, "/work/proj/.sandbox-agent/config/mcp.json", []byte("\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = s.MCP(ctx, "/work/proj", "x")
	wantErr(t, err, domain.KindSessionNotFound, "mcp:x")
}

// A PUT that would make the file larger than the daemon reads is refused
// (413) and writes nothing. It was written, and from then on every GET,
// PUT and DELETE of that directory answered 400 "config file is larger
// than …": the API could not even delete an entry to shrink it.
func TestConfigWriteStaysReadable(t *testing.T) {
	ctx := context.Background()
	s := newConfigStore(t)
	big := mustMCP(t, `{"type":"local","command":"c","args":["`+strings.Repeat("a", 4<<20)+`"]}`)
	var err error
	n := 0
	for ; n < 20 && err == nil; n++ {
		err = s.SetMCP(ctx, "/work/proj", fmt.Sprint("n", n), big)
	}
	wantErr(t, err, domain.KindPayloadTooLarge, "")
	if e, _ := domain.AsError(err); e.LimitBytes != maxConfigBytes {
		t.Errorf("limit %d, want %d", e.LimitBytes, maxConfigBytes)
	}
	if _, err := s.MCP(ctx, "/work/proj", "n0"); err != nil {
		t.Fatalf("after the refused PUT: %v", err)
	}
	if _, err := s.MCP(ctx, "/work/proj", fmt.Sprint("n", n-1)); !domain.IsKind(err, domain.KindSessionNotFound) {
		t.Fatalf("the refused entry: %v", err)
	}
	if err := s.DeleteMCP(ctx, "/work/proj", "n0"); err != nil {
		t.Fatal(err)
	}
}

// TestConfigConcurrentWrites checks that read-modify-write cycles do not
// lose each other's entries.
func TestConfigConcurrentWrites(t *testing.T) {
	ctx := context.Background()
	s := newConfigStore(t)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			c := mustMCP(t, fmt.Sprintf(`{"type":"local","command":"c%d"}`, i))
			if err := s.SetMCP(ctx, "/work/proj", fmt.Sprintf("n%02d", i), c); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	file := readAll(t, s.Fs, "/work/proj/.sandbox-agent/config/mcp.json")
	if n := strings.Count(file, `"type": "local"`); n != 16 {
		t.Fatalf("%d entries survived:\n%s", n, file)
	}
}

// TestConfigLocksPerDirectory: a directory whose config is held (a slow
// disk, a stuck read) does not hold up another directory.
func TestConfigLocksPerDirectory(t *testing.T) {
	s := newConfigStore(t)
	ctx := context.Background()
	if err := s.SetMCP(ctx, "/b", "m", mustMCP(t, `{"type":"remote","url":"https://x"}`)); err != nil {
		t.Fatal(err)
	}
	p, err := s.path("/a", "m", "mcpName", "mcp.json")
	if err != nil {
		t.Fatal(err)
	}
	release := s.lock(p) // /a is busy
	if _, err := s.MCP(ctx, "/b", "m"); err != nil {
		t.Fatalf("/b while /a is busy: %v", err)
	}
	got := make(chan error, 1)
	go func() { _, err := s.MCP(ctx, "/a", "m"); got <- err }()
	release()
	if err := <-got; !domain.IsKind(err, domain.KindSessionNotFound) {
		t.Fatalf("/a after release: %v", err)
	}
	s.mu.Lock()
	n := len(s.locks)
	s.mu.Unlock()
	if n != 0 {
		t.Errorf("%d locks kept after use", n)
	}
}

// A name that is not UTF-8 is refused (400), as the reference's query
// parsing refuses it. It was stored under its JSON encoding ("a\xff"
// became "a\ufffd"), so it could not be read or deleted by the name it was
// stored with, and a second such name ("a\xfe") wrote the same key twice:
// from then on every route of the directory answered 400 "duplicate
// field", DELETE included.
func TestConfigNameNotUTF8(t *testing.T) {
	ctx := context.Background()
	s := newConfigStore(t)
	for _, name := range []string{"a\xff", "a\xfe", "\xc3"} {
		err := s.SetMCP(ctx, "/work/proj", name, mustMCP(t, `{"type":"local","command":"c"}`))
		wantErr(t, err, domain.KindInvalidRequest, "mcpName is not valid UTF-8")
		wantErr(t, s.CheckSkills("/work/proj", name), domain.KindInvalidRequest, "skillName is not valid UTF-8")
	}
	if err := s.SetMCP(ctx, "/work/proj", "ok", mustMCP(t, `{"type":"local","command":"c"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MCP(ctx, "/work/proj", "ok"); err != nil {
		t.Fatalf("directory unreadable after refused names: %v", err)
	}
}

// A directory whose path is longer than the filesystem takes is the
// client's mistake: 400 "name too long", as on /v1/fs, not the 502 the
// host's ENAMETOOLONG mapped to.
func TestConfigDirectoryTooLong(t *testing.T) {
	ctx := context.Background()
	s := newConfigStore(t)
	for _, dir := range []string{
		"/work/" + strings.Repeat("a", domain.MaxNameBytes+1),
		"/work/" + strings.Repeat(strings.Repeat("b", 200)+"/", 21),
		strings.Repeat("c", domain.MaxNameBytes+1), // relative
	} {
		_, err := s.MCP(ctx, dir, "x")
		wantErr(t, err, domain.KindInvalidRequest, "name too long")
		err = s.SetSkills(ctx, dir, "x", domain.SkillsConfig{})
		wantErr(t, err, domain.KindInvalidRequest, "name too long")
	}
}

// Two spellings of one directory (through a symbolic link to it, or to a
// directory on the way) share one lock: each was locked by its own
// spelling, and concurrent PUTs through both lost entries (933 of 1000
// survived against the daemon).
func TestConfigLockFollowsLinks(t *testing.T) {
	tmp := t.TempDir()
	for _, d := range []string{"real/proj", "other"} {
		if err := os.MkdirAll(filepath.Join(tmp, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"alias":       "real",                     // relative
		"abs":         filepath.Join(tmp, "real"), // absolute
		"other/up":    "../real/proj/..",          // ".." after a link
		"real/proj2":  "proj",                     // the last element
		"other/chain": "../alias",                 // a link to a link
	} {
		if err := os.Symlink(target, filepath.Join(tmp, link)); err != nil {
			t.Fatal(err)
		}
	}
	s := &ConfigStore{Fs: afero.NewOsFs(), Base: tmp}
	ctx := context.Background()
	for _, dir := range []string{"alias/proj", "abs/proj", "other/up/proj", "real/proj2", "other/chain/proj/"} {
		held, err := s.path(tmp+"/real/proj", "m", "mcpName", "mcp.json")
		if err != nil {
			t.Fatal(err)
		}
		release := s.lock(held)
		acquired := make(chan struct{})
		go func() {
			if err := s.SetMCP(ctx, dir, "m", mustMCP(t, `{"type":"local","command":"c"}`)); err != nil {
				t.Error(err)
			}
			close(acquired)
		}()
		// Wait until the writer queues on the held lock, or took another.
		for waiting := false; !waiting; {
			select {
			case <-acquired:
				t.Fatalf("%s: written while %s/real/proj was locked", dir, tmp)
			default:
			}
			s.mu.Lock()
			for _, l := range s.locks {
				waiting = waiting || l.users == 2
			}
			s.mu.Unlock()
			runtime.Gosched()
		}
		release()
		<-acquired
	}
	if _, err := s.MCP(ctx, "real/proj", "m"); err != nil {
		t.Fatal(err)
	}
}
