package e2e

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// TestCompatSDKFilesAndConfig runs the official TypeScript SDK's filesystem
// and config calls against the daemon.
func TestCompatSDKFilesAndConfig(t *testing.T) {
	t.Parallel()
	t.Run("no token", func(t *testing.T) {
		d := harness.Start(t, harness.Options{})
		runNode(t, "sdk-fs.mjs", 60*time.Second, "BASE_URL="+d.URL, "HOME_DIR="+d.Home)
	})
	t.Run("token", func(t *testing.T) {
		d := harness.Start(t, harness.Options{Args: []string{"--token", "s3cret"}})
		runNode(t, "sdk-fs.mjs", 60*time.Second, "BASE_URL="+d.URL, "HOME_DIR="+d.Home, "TOKEN=s3cret")
	})
}

func q(p string) string { return url.QueryEscape(p) }

// tarball builds a tar archive; entries with a link are symlinks, names
// ending in "/" directories.
func tarball(t *testing.T, entries ...[3]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		name, body, link := e[0], e[1], e[2]
		hdr := &tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(body))}
		switch {
		case link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeSymlink, link, 0
		case strings.HasSuffix(name, "/"):
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			if _, err := tw.Write([]byte(body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestFSHostBackend checks the default backend against the real disk.
func TestFSHostBackend(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	st, _, body := d.Do("PUT", "/v1/fs/file?path=work/a.txt", []byte("0123456789"), "Content-Type", "application/octet-stream")
	if st != 200 || string(body) != `{"path":"`+d.Home+`/work/a.txt","bytesWritten":10}`+"\n" {
		t.Fatalf("put: %d %s", st, body)
	}
	if b, err := os.ReadFile(filepath.Join(d.Home, "work", "a.txt")); err != nil || string(b) != "0123456789" {
		t.Fatalf("on disk: %q, %v", b, err)
	}
	st, h, body := d.Do("GET", "/v1/fs/file?path="+q(d.Home+"/work/a.txt"), nil, "Range", "bytes=2-4")
	if st != 206 || string(body) != "234" || h.Get("Content-Range") != "bytes 2-4/10" {
		t.Fatalf("range: %d %q %v", st, body, h)
	}
	st, _, body = d.Do("GET", "/v1/fs/entries?path=work", nil)
	var entries []map[string]any
	if st != 200 || json.Unmarshal(body, &entries) != nil || len(entries) != 1 || entries[0]["path"] != d.Home+"/work/a.txt" {
		t.Fatalf("entries: %d %s", st, body)
	}
	// Listings do not follow links; stat does.
	if err := os.Symlink("a.txt", filepath.Join(d.Home, "work", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(d.Home, "work", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(d.Home, "work", "dirlink")); err != nil {
		t.Fatal(err)
	}
	_, _, body = d.Do("GET", "/v1/fs/entries?path=work", nil)
	entries = nil
	_ = json.Unmarshal(body, &entries)
	types := map[string]string{}
	for _, e := range entries {
		types[e["name"].(string)] = e["entryType"].(string)
	}
	if types["dirlink"] != "file" || types["sub"] != "directory" || types["link"] != "file" {
		t.Fatalf("lstat listing: %v", types)
	}
	st, _, body = d.Do("GET", "/v1/fs/stat?path=work/dirlink", nil)
	if st != 200 || !strings.Contains(string(body), `"entryType":"directory"`) {
		t.Fatalf("stat follows links: %d %s", st, body)
	}
	// Writing through a link replaces the file it names and keeps the link.
	if st, _, body = d.Do("PUT", "/v1/fs/file?path=work/link", []byte("via link")); st != 200 {
		t.Fatalf("put via link: %d %s", st, body)
	}
	if b, _ := os.ReadFile(filepath.Join(d.Home, "work", "a.txt")); string(b) != "via link" {
		t.Fatalf("link target: %q", b)
	}
	// Deleting a link leaves its target.
	if st, _, body = d.Do("DELETE", "/v1/fs/entry?path=work/dirlink", nil); st != 200 {
		t.Fatalf("delete link: %d %s", st, body)
	}
	if _, err := os.Stat(filepath.Join(d.Home, "work", "sub")); err != nil {
		t.Fatalf("link target removed: %v", err)
	}
	// Upload-batch extracts onto the disk; a link entry inside is kept.
	archive := tarball(t, [3]string{"proj/", "", ""}, [3]string{"proj/main.go", "package main", ""}, [3]string{"proj/alias.go", "", "main.go"})
	st, _, body = d.Do("POST", "/v1/fs/upload-batch?path=up", archive, "Content-Type", "application/x-tar")
	if st != 200 || !strings.Contains(string(body), `"truncated":false`) {
		t.Fatalf("upload: %d %s", st, body)
	}
	if b, _ := os.ReadFile(filepath.Join(d.Home, "up", "proj", "alias.go")); string(b) != "package main" {
		t.Fatalf("extracted link: %q", b)
	}
	// Absolute paths are used as given.
	abs := filepath.Join(t.TempDir(), "abs.txt")
	if st, _, body = d.Do("PUT", "/v1/fs/file?path="+q(abs), []byte("abs")); st != 200 {
		t.Fatalf("absolute put: %d %s", st, body)
	}
	if b, _ := os.ReadFile(abs); string(b) != "abs" {
		t.Fatalf("absolute file: %q", b)
	}
	// No temporary files are left behind.
	filepath.Walk(d.Home, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.Contains(fi.Name(), ".sandbox-agent-upload") {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
}

// TestFSMemoryBackend checks that --fs memory serves files that never
// reach the disk.
func TestFSMemoryBackend(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: []string{"--fs", "memory"}})
	if st, _, body := d.Do("PUT", "/v1/fs/file?path=mem.txt", []byte("in memory")); st != 200 {
		t.Fatalf("put: %d %s", st, body)
	}
	if st, _, body := d.Do("GET", "/v1/fs/file?path=mem.txt", nil); st != 200 || string(body) != "in memory" {
		t.Fatalf("get: %d %s", st, body)
	}
	if _, err := os.Stat(filepath.Join(d.Home, "mem.txt")); !os.IsNotExist(err) {
		t.Fatalf("memory backend wrote to disk: %v", err)
	}
	st, _, body := d.Do("POST", "/v1/fs/upload-batch", tarball(t, [3]string{"l", "", "x"}), "Content-Type", "application/x-tar")
	if st != 400 || !strings.Contains(string(body), "not supported") {
		t.Fatalf("symlink entry on memory: %d %s", st, body)
	}
	if st, _, _ := d.Do("PUT", "/v1/config/mcp?directory=proj&mcpName=m", []byte(`{"type":"local","command":"c"}`), "Content-Type", "application/json"); st != 204 {
		t.Fatalf("config put: %d", st)
	}
	if st, _, body := d.Do("GET", "/v1/config/mcp?directory=proj&mcpName=m", nil); st != 200 {
		t.Fatalf("config get: %d %s", st, body)
	}
	if _, err := os.Stat(filepath.Join(d.Home, "proj")); !os.IsNotExist(err) {
		t.Fatalf("memory backend wrote config to disk: %v", err)
	}
}

// rootRig is a --fs-root daemon and the neighbourhood of its root: a
// sibling whose name extends the root's, files outside, and links inside
// the root that point out.
type rootRig struct {
	d              *harness.Daemon
	parent, root   string
	outsideSnippet string // text found only in files outside the root
}

func newRootRig(t *testing.T) *rootRig {
	t.Helper()
	parent := t.TempDir()
	root := filepath.Join(parent, "root")
	mk := func(p, content string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk(filepath.Join(root, "inside", "ok.txt"), "ok")
	mk(filepath.Join(parent, "root-secret", "s.txt"), "SECRET-OUTSIDE")
	mk(filepath.Join(parent, "outside.txt"), "SECRET-OUTSIDE")
	mk(filepath.Join(parent, "outdir", "keep.txt"), "SECRET-OUTSIDE")
	for link, target := range map[string]string{
		"rel-link": "../outside.txt",
		"abs-link": filepath.Join(parent, "outside.txt"),
		"dir-link": "../outdir",
		"hop1":     "hop2",
		"hop2":     "inside/../..",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	d := harness.Start(t, harness.Options{Args: []string{"--fs-root", root}})
	return &rootRig{d: d, parent: parent, root: root, outsideSnippet: "SECRET-OUTSIDE"}
}

// untouched checks that the neighbourhood is as it was.
func (r *rootRig) untouched(t *testing.T) {
	t.Helper()
	var names []string
	filepath.Walk(r.parent, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(r.parent, p)
		if strings.HasPrefix(rel, "root") && !strings.HasPrefix(rel, "root-secret") {
			return nil
		}
		names = append(names, rel)
		if fi.Mode().IsRegular() {
			if b, _ := os.ReadFile(p); string(b) != r.outsideSnippet {
				t.Errorf("%s changed: %q", rel, b)
			}
		}
		return nil
	})
	want := ". outdir outdir/keep.txt outside.txt root-secret root-secret/s.txt"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("outside the root: %s\nwant %s", got, want)
	}
}

func TestFSRootConfinement(t *testing.T) {
	t.Parallel()
	r := newRootRig(t)
	d := r.d
	out := func(p string) string { return filepath.Join(r.parent, p) }
	in := func(p string) string { return filepath.Join(r.root, p) }

	// Inside works, and relative paths resolve against the root.
	if st, _, body := d.Do("PUT", "/v1/fs/file?path=new/x.txt", []byte("x")); st != 200 || !strings.Contains(string(body), in("new/x.txt")) {
		t.Fatalf("put inside: %d %s", st, body)
	}
	if st, _, body := d.Do("GET", "/v1/fs/file?path="+q(in("inside/ok.txt")), nil); st != 200 || string(body) != "ok" {
		t.Fatalf("get inside: %d %s", st, body)
	}
	if st, _, body := d.Do("GET", "/v1/fs/entries", nil); st != 200 || !strings.Contains(string(body), in("inside")) {
		t.Fatalf("entries of root: %d %s", st, body)
	}

	escapes := []struct{ name, path string }{
		{"dot-dot relative", "../outside.txt"},
		{"dot-dot absolute", r.root + "/../outside.txt"},
		{"dot-dot deep", in("inside") + "/../../outside.txt"},
		{"sibling prefix", out("root-secret/s.txt")},
		{"sibling prefix dir", out("root-secret")},
		{"absolute outside", out("outside.txt")},
		{"etc", "/etc/passwd"},
		{"relative link", "rel-link"},
		{"absolute link", "abs-link"},
		{"dir link", "dir-link/keep.txt"},
		{"link chain", "hop1/outside.txt"},
		{"link chain to sibling", "hop1/root-secret/s.txt"},
		{"NUL", "inside/ok.txt\x00/../../../outside.txt"},
	}
	for _, e := range escapes {
		t.Run(e.name, func(t *testing.T) {
			calls := []struct {
				method, target string
				body           []byte
				headers        []string
			}{
				{"GET", "/v1/fs/file?path=" + q(e.path), nil, nil},
				{"GET", "/v1/fs/entries?path=" + q(e.path), nil, nil},
				{"GET", "/v1/fs/stat?path=" + q(e.path), nil, nil},
				{"PUT", "/v1/fs/file?path=" + q(e.path), []byte("pwned"), nil},
				{"PUT", "/v1/fs/file?path=" + q(e.path+"/new.txt"), []byte("pwned"), nil},
				{"POST", "/v1/fs/mkdir?path=" + q(e.path+"/newdir"), nil, nil},
				{"DELETE", "/v1/fs/entry?path=" + q(e.path+"/keep.txt") + "&recursive=true", nil, nil},
				{"POST", "/v1/fs/move", []byte(`{"from":"inside/ok.txt","to":` + jsonString(e.path+"/moved") + `}`), []string{"Content-Type", "application/json"}},
				{"POST", "/v1/fs/upload-batch?path=" + q(e.path), tarball(t, [3]string{"evil.txt", "pwned", ""}), []string{"Content-Type", "application/x-tar"}},
				{"PUT", "/v1/config/mcp?directory=" + q(e.path) + "&mcpName=x", []byte(`{"type":"local","command":"c"}`), []string{"Content-Type", "application/json"}},
			}
			for _, c := range calls {
				st, _, body := d.Do(c.method, c.target, c.body, c.headers...)
				if st < 400 || st >= 500 {
					t.Errorf("%s %s: %d %s", c.method, c.target, st, body)
				}
				if strings.Contains(string(body), r.outsideSnippet) {
					t.Errorf("%s %s leaked outside content: %s", c.method, c.target, body)
				}
				// Links are not resolved in messages: the client sees only
				// the path it sent (or the root it configured).
				for _, secret := range []string{"outside.txt", "outdir", "root-secret"} {
					if strings.Contains(string(body), secret) && !strings.Contains(e.path, secret) {
						t.Errorf("%s %s revealed %q: %s", c.method, c.target, secret, body)
					}
				}
			}
			r.untouched(t)
		})
	}

	t.Run("delete outside", func(t *testing.T) {
		for _, p := range []string{out("outside.txt"), out("root-secret"), "dir-link/keep.txt"} {
			if st, _, body := d.Do("DELETE", "/v1/fs/entry?path="+q(p)+"&recursive=true", nil); st != 400 {
				t.Errorf("delete %s: %d %s", p, st, body)
			}
		}
		// Deleting the outward links themselves removes only the links.
		for _, p := range []string{"rel-link", "dir-link"} {
			if st, _, body := d.Do("DELETE", "/v1/fs/entry?path="+p+"&recursive=true", nil); st != 200 {
				t.Errorf("delete link %s: %d %s", p, st, body)
			}
		}
		r.untouched(t)
	})

	t.Run("tar entries", func(t *testing.T) {
		for _, tt := range []struct {
			name, dest string
			archive    []byte
		}{
			{"dot-dot", "up", tarball(t, [3]string{"../evil.txt", "pwned", ""})},
			{"dot-dot deep", "up", tarball(t, [3]string{"a/../../evil.txt", "pwned", ""})},
			{"absolute", "up", tarball(t, [3]string{out("evil.txt"), "pwned", ""})},
			{"link out", "up", tarball(t, [3]string{"l", "", "../../outside.txt"})},
			{"absolute link", "up", tarball(t, [3]string{"l", "", out("outside.txt")})},
			{"through a link on disk", ".", tarball(t, [3]string{"abs-link/evil.txt", "pwned", ""})},
			{"through a dir link on disk", ".", tarball(t, [3]string{"hop1/evil.txt", "pwned", ""})},
			{"link to a link on disk", ".", tarball(t, [3]string{"l3", "", "abs-link"})},
			{"dot link then climb", "up", tarball(t, [3]string{"a", "", "."}, [3]string{"b", "", "a/.."}, [3]string{"b/evil.txt", "pwned", ""})},
			{"link then write", "up", tarball(t, [3]string{"dir/", "", ""}, [3]string{"l2", "", "dir"}, [3]string{"l2/evil.txt", "pwned", ""})},
		} {
			st, _, body := d.Do("POST", "/v1/fs/upload-batch?path="+q(tt.dest), tt.archive, "Content-Type", "application/x-tar")
			if st != 400 {
				t.Errorf("%s: %d %s", tt.name, st, body)
			}
			if strings.Contains(string(body), r.outsideSnippet) {
				t.Errorf("%s leaked: %s", tt.name, body)
			}
		}
		r.untouched(t)
	})
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
