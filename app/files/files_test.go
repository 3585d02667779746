package files

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

const testHome = "/home/u"

// memFiles is Files on an in-memory filesystem with a few entries in home.
func memFiles(t *testing.T) *Files {
	t.Helper()
	fsys := afero.NewMemMapFs()
	for p, content := range map[string]string{
		"/home/u/b.txt":          "bee",
		"/home/u/a.txt":          "a",
		"/home/u/dir/inner.txt":  "inner",
		"/home/u/dir/sub/x.bin":  "x",
		"/outside/untouched.txt": "keep",
	} {
		if err := fsys.MkdirAll(path.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := afero.WriteFile(fsys, p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.MkdirAll("/home/u/empty", 0o755); err != nil {
		t.Fatal(err)
	}
	return &Files{Fs: fsys, Home: testHome}
}

// wantErr checks err's kind and that its client message holds msg.
func wantErr(t *testing.T, err error, kind domain.Kind, msg string) {
	t.Helper()
	e, ok := domain.AsError(err)
	if !ok {
		t.Fatalf("error %v (%T) is not a domain error", err, err)
	}
	// The message, or for errors about an id, that id.
	got := e.Msg + e.SessionID
	if e.Kind != kind || !strings.Contains(got, msg) {
		t.Fatalf("error = %s %q, want %s containing %q", e.Kind, got, kind, msg)
	}
}

func readAll(t *testing.T, fsys afero.Fs, p string) string {
	t.Helper()
	b, err := afero.ReadFile(fsys, p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFilesEntries(t *testing.T) {
	f := memFiles(t)
	ctx := context.Background()
	got, err := f.Entries(ctx, ".", nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range got {
		names = append(names, fmt.Sprintf("%s:%s:%s:%d", e.Name, e.Path, e.EntryType, e.Size))
		if !strings.HasSuffix(e.Modified, "+00:00") {
			t.Errorf("modified %q lacks a numeric offset", e.Modified)
		}
	}
	want := "a.txt:/home/u/a.txt:file:1 b.txt:/home/u/b.txt:file:3 dir:/home/u/dir:directory:"
	if s := strings.Join(names, " "); !strings.HasPrefix(s, want) || len(got) != 4 {
		t.Fatalf("entries = %s", s)
	}

	abs, err := f.Entries(ctx, "/home/u/dir", nil)
	if err != nil || len(abs) != 2 || abs[0].Name != "inner.txt" || abs[1].EntryType != domain.FSDirectory {
		t.Fatalf("absolute listing = %+v, %v", abs, err)
	}

	_, err = f.Entries(ctx, "nope", nil)
	wantErr(t, err, domain.KindNotFound, "path not found: /home/u/nope")
	for _, tt := range []struct{ p, msg string }{
		{"a.txt", "path is not a directory: /home/u/a.txt"},
		{"../etc", "invalid relative path: ../etc"},
		{"dir/../..", "invalid relative path"},
		{"a\x00", "NUL"},
	} {
		_, err := f.Entries(ctx, tt.p, nil)
		wantErr(t, err, domain.KindInvalidRequest, tt.msg)
	}
}

// TestFilesListingLarge: a directory of up to SortedUpTo entries comes
// in name order in one batch; a larger one comes in batches no larger
// than what OpenListing read plus listBatch, every entry once, the charge
// called only for what OpenListing read (what the listing holds at once).
func TestFilesListingLarge(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{SortedUpTo, SortedUpTo + 1, SortedUpTo + 2*listBatch + 7} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			fsys := afero.NewMemMapFs()
			want := map[string]bool{}
			for i := range n {
				name := fmt.Sprintf("f%06d", (i*7919)%n) // not created in name order
				want[name] = true
				if err := afero.WriteFile(fsys, "/home/u/big/"+name, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			f := &Files{Fs: fsys, Home: "/home/u"}
			charged := 0
			l, err := f.OpenListing(ctx, "big", func(k int) error { charged += k; return nil })
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if l.Sorted != (n <= SortedUpTo) {
				t.Errorf("Sorted = %v for %d entries", l.Sorted, n)
			}
			if charged > SortedUpTo+1 {
				t.Errorf("charged %d entries; a listing holds at most %d", charged, SortedUpTo+1)
			}
			var got []string
			for {
				batch, err := l.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(batch) > SortedUpTo+1 {
					t.Fatalf("a batch of %d entries", len(batch))
				}
				for _, e := range batch {
					got = append(got, e.Name)
				}
			}
			if len(got) != n {
				t.Fatalf("%d entries listed, want %d", len(got), n)
			}
			for _, name := range got {
				if !want[name] {
					t.Fatalf("%q listed twice or never created", name)
				}
				delete(want, name)
			}
			if l.Sorted && !slices.IsSorted(got) {
				t.Error("a directory within SortedUpTo is not in name order")
			}
		})
	}
}

func TestFilesStatAndOpen(t *testing.T) {
	f := memFiles(t)
	ctx := context.Background()
	st, err := f.Stat(ctx, "dir")
	if err != nil || st.EntryType != domain.FSDirectory || st.Path != "/home/u/dir" {
		t.Fatalf("stat dir = %+v, %v", st, err)
	}
	st, err = f.Stat(ctx, "/home/u/b.txt")
	if err != nil || st.EntryType != domain.FSFile || st.Size != 3 {
		t.Fatalf("stat file = %+v, %v", st, err)
	}
	_, err = f.Stat(ctx, "missing")
	wantErr(t, err, domain.KindNotFound, "path not found: /home/u/missing")

	file, fi, err := f.Open(ctx, "b.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(file)
	file.Close()
	if string(b) != "bee" || fi.Size() != 3 {
		t.Fatalf("open = %q, %v", b, fi)
	}
	_, _, err = f.Open(ctx, "dir")
	wantErr(t, err, domain.KindInvalidRequest, "path is not a file: /home/u/dir")
	_, _, err = f.Open(ctx, "nope")
	wantErr(t, err, domain.KindNotFound, "path not found")
}

// failingReader yields some bytes, then err.
type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestFilesWrite(t *testing.T) {
	f := memFiles(t)
	ctx := context.Background()

	res, err := f.Write(ctx, "new/deep/file.txt", strings.NewReader("hello"), -1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Path != "/home/u/new/deep/file.txt" || res.BytesWritten != 5 {
		t.Fatalf("write = %+v", res)
	}
	if got := readAll(t, f.Fs, res.Path); got != "hello" {
		t.Fatalf("content %q", got)
	}

	// Overwrite in place; nothing else is left in the directory.
	if _, err := f.Write(ctx, "a.txt", strings.NewReader("replaced"), -1); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, f.Fs, "/home/u/a.txt"); got != "replaced" {
		t.Fatalf("overwrite = %q", got)
	}

	// A failing upload leaves the old file and no temporary file.
	limit := &domain.Error{Kind: domain.KindPayloadTooLarge, Msg: "too big"}
	_, err = f.Write(ctx, "a.txt", &failingReader{data: []byte("partial"), err: limit}, -1)
	if !errors.Is(err, limit) {
		t.Fatalf("size-limit error not passed through: %v", err)
	}
	_, err = f.Write(ctx, "a.txt", &failingReader{data: []byte("partial"), err: io.ErrUnexpectedEOF}, -1)
	wantErr(t, err, domain.KindInvalidRequest, "reading upload")
	if got := readAll(t, f.Fs, "/home/u/a.txt"); got != "replaced" {
		t.Fatalf("failed upload changed the file: %q", got)
	}
	entries, _ := afero.ReadDir(f.Fs, testHome)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".sandbox-agent-upload") {
			t.Fatalf("temporary file left: %s", e.Name())
		}
	}

	_, err = f.Write(ctx, "dir", strings.NewReader("x"), -1)
	wantErr(t, err, domain.KindInvalidRequest, "path is not a file: /home/u/dir")
	_, err = f.Write(ctx, "../x", strings.NewReader("x"), -1)
	wantErr(t, err, domain.KindInvalidRequest, "invalid relative path")
	_, err = f.Write(ctx, "a.txt/child", strings.NewReader("x"), -1)
	if err == nil {
		t.Fatal("writing below a file succeeded")
	}
}

func TestFilesWriteFollowsLinks(t *testing.T) {
	dir := t.TempDir()
	f := &Files{Fs: afero.NewOsFs(), Home: dir}
	if err := os.WriteFile(path.Join(dir, "real.txt"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.txt", path.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	res, err := f.Write(context.Background(), "link.txt", strings.NewReader("new"), -1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Path != path.Join(dir, "link.txt") {
		t.Fatalf("path = %q", res.Path)
	}
	fi, err := os.Lstat(path.Join(dir, "link.txt"))
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("link replaced: %v, %v", fi, err)
	}
	b, _ := os.ReadFile(path.Join(dir, "real.txt"))
	fi, _ = os.Stat(path.Join(dir, "real.txt"))
	if string(b) != "new" || fi.Mode().Perm() != 0o600 {
		t.Fatalf("target = %q mode %v", b, fi.Mode())
	}
}

func TestFilesDeleteMkdirMove(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(f *Files) error
		kind domain.Kind
		msg  string
		gone []string
		kept []string
	}{
		{name: "delete file", run: func(f *Files) error { _, err := f.Delete(ctx, "a.txt", false); return err },
			gone: []string{"/home/u/a.txt"}},
		{name: "delete empty dir", run: func(f *Files) error { _, err := f.Delete(ctx, "empty", false); return err },
			gone: []string{"/home/u/empty"}},
		{name: "delete full dir needs recursive", run: func(f *Files) error { _, err := f.Delete(ctx, "dir", false); return err },
			kind: domain.KindInvalidRequest, msg: "directory is not empty: /home/u/dir", kept: []string{"/home/u/dir/inner.txt"}},
		{name: "delete recursive", run: func(f *Files) error { _, err := f.Delete(ctx, "/home/u/dir", true); return err },
			gone: []string{"/home/u/dir", "/home/u/dir/sub/x.bin"}},
		{name: "delete missing", run: func(f *Files) error { _, err := f.Delete(ctx, "nope", true); return err },
			kind: domain.KindNotFound, msg: "path not found: /home/u/nope"},
		{name: "delete root refused", run: func(f *Files) error { _, err := f.Delete(ctx, "/", true); return err },
			kind: domain.KindInvalidRequest, msg: "refusing", kept: []string{"/outside/untouched.txt"}},
		{name: "mkdir -p", run: func(f *Files) error {
			p, err := f.Mkdir(ctx, "m/n/o")
			if err == nil && p != "/home/u/m/n/o" {
				return fmt.Errorf("path %q", p)
			}
			return err
		}, kept: []string{"/home/u/m/n/o"}},
		{name: "mkdir existing dir", run: func(f *Files) error { _, err := f.Mkdir(ctx, "dir"); return err },
			kept: []string{"/home/u/dir/inner.txt"}},
		{name: "mkdir over file", run: func(f *Files) error { _, err := f.Mkdir(ctx, "a.txt"); return err },
			kind: domain.KindInvalidRequest, msg: "path is not a directory: /home/u/a.txt"},
		{name: "move file into new parents", run: func(f *Files) error {
			from, to, err := f.Move(ctx, "a.txt", "x/y/a2.txt", false)
			if err == nil && (from != "/home/u/a.txt" || to != "/home/u/x/y/a2.txt") {
				return fmt.Errorf("move = %q, %q", from, to)
			}
			return err
		}, gone: []string{"/home/u/a.txt"}, kept: []string{"/home/u/x/y/a2.txt"}},
		{name: "move dir", run: func(f *Files) error { _, _, err := f.Move(ctx, "dir", "/home/u/moved", false); return err },
			gone: []string{"/home/u/dir"}, kept: []string{"/home/u/moved/sub/x.bin"}},
		{name: "move onto existing", run: func(f *Files) error { _, _, err := f.Move(ctx, "a.txt", "b.txt", false); return err },
			kind: domain.KindInvalidRequest, msg: "destination already exists: /home/u/b.txt", kept: []string{"/home/u/a.txt", "/home/u/b.txt"}},
		{name: "move overwrite", run: func(f *Files) error { _, _, err := f.Move(ctx, "a.txt", "dir", true); return err },
			gone: []string{"/home/u/a.txt", "/home/u/dir/inner.txt"}, kept: []string{"/home/u/dir"}},
		{name: "move onto itself", run: func(f *Files) error { _, _, err := f.Move(ctx, "a.txt", "/home/u/a.txt", true); return err },
			kind: domain.KindInvalidRequest, msg: "same", kept: []string{"/home/u/a.txt"}},
		{name: "move into itself", run: func(f *Files) error { _, _, err := f.Move(ctx, "dir", "dir/sub/dir", true); return err },
			kind: domain.KindInvalidRequest, msg: "into itself", kept: []string{"/home/u/dir/inner.txt"}},
		{name: "move over own parent", run: func(f *Files) error { _, _, err := f.Move(ctx, "dir/sub", "dir", true); return err },
			kind: domain.KindInvalidRequest, msg: "contains the source", kept: []string{"/home/u/dir/sub/x.bin"}},
		{name: "move missing source", run: func(f *Files) error { _, _, err := f.Move(ctx, "nope", "x", false); return err },
			kind: domain.KindNotFound, msg: "path not found: /home/u/nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := memFiles(t)
			err := tt.run(f)
			if tt.kind != "" {
				wantErr(t, err, tt.kind, tt.msg)
			} else if err != nil {
				t.Fatal(err)
			}
			for _, p := range tt.gone {
				if _, err := f.Fs.Stat(p); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s still exists (%v)", p, err)
				}
			}
			for _, p := range tt.kept {
				if _, err := f.Fs.Stat(p); err != nil {
					t.Errorf("%s missing: %v", p, err)
				}
			}
		})
	}
}

func TestFSErrorHidesHostPaths(t *testing.T) {
	err := fsError("/home/u/x", &fs.PathError{Op: "open", Path: "/var/lib/secret/tmp123", Err: errors.New("permission denied")})
	e, ok := domain.AsError(err)
	if !ok || e.Kind != domain.KindStreamError || e.Msg != "permission denied" {
		t.Fatalf("fsError = %#v", err)
	}
	err = fsError("/r/link", &fs.PathError{Op: "open", Path: "/r/link", Err: domain.ErrOutsideRoot})
	wantErr(t, err, domain.KindInvalidRequest, "path escapes the filesystem root: /r/link")
}

// tarEntry describes one member of a test archive.
type tarEntry struct {
	name, body, link string
	typ              byte
}

func makeTar(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o644, Linkname: e.link, Size: int64(len(e.body))}
		if e.typ == 0 {
			hdr.Typeflag = tar.TypeReg
		}
		if hdr.Typeflag != tar.TypeReg {
			hdr.Size = 0
		}
		if hdr.Typeflag == tar.TypeDir {
			hdr.Mode = 0o755
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestFilesUploadMemory(t *testing.T) {
	ctx := context.Background()
	f := memFiles(t)
	archive := makeTar(t,
		tarEntry{name: "./", typ: tar.TypeDir},
		tarEntry{name: "proj/", typ: tar.TypeDir},
		tarEntry{name: "proj/main.go", body: "package main"},
		tarEntry{name: "./proj/lib/util.go", body: "package lib"},
		tarEntry{name: "proj/copy.go", link: "proj/main.go", typ: tar.TypeLink},
		tarEntry{name: "dev", typ: tar.TypeFifo},
	)
	res, err := f.Upload(ctx, "up", bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/home/u/up/proj", "/home/u/up/proj/main.go", "/home/u/up/proj/lib/util.go", "/home/u/up/proj/copy.go"}
	if strings.Join(res.Paths, ",") != strings.Join(want, ",") || res.Truncated {
		t.Fatalf("upload = %+v", res)
	}
	if got := readAll(t, f.Fs, "/home/u/up/proj/lib/util.go"); got != "package lib" {
		t.Fatalf("content %q", got)
	}
	if got := readAll(t, f.Fs, "/home/u/up/proj/copy.go"); got != "package main" {
		t.Fatalf("hard link copy %q", got)
	}

	// Default destination is home; an empty archive is fine.
	res, err = f.Upload(ctx, "", bytes.NewReader(makeTar(t)))
	if err != nil || len(res.Paths) != 0 || res.Paths == nil {
		t.Fatalf("empty archive = %+v, %v", res, err)
	}

	bad := []struct {
		name    string
		archive []byte
		msg     string
	}{
		{"dot-dot", makeTar(t, tarEntry{name: "../evil.txt", body: "x"}), `tar entry "../evil.txt"`},
		{"dot-dot inside", makeTar(t, tarEntry{name: "a/../../evil.txt", body: "x"}), `".." is not allowed`},
		{"absolute", makeTar(t, tarEntry{name: "/outside/evil.txt", body: "x"}), "absolute names are not allowed"},
		{"hard link out", makeTar(t, tarEntry{name: "h", link: "../../outside/untouched.txt", typ: tar.TypeLink}), "invalid hard link target"},
		{"hard link absolute", makeTar(t, tarEntry{name: "h", link: "/outside/untouched.txt", typ: tar.TypeLink}), "invalid hard link target"},
		{"symlink unsupported", makeTar(t, tarEntry{name: "l", link: "x", typ: tar.TypeSymlink}), "not supported"},
		{"symlink absolute", makeTar(t, tarEntry{name: "l", link: "/etc", typ: tar.TypeSymlink}), "link target is absolute"},
		{"gzip", []byte{0x1f, 0x8b, 8, 0, 0, 0}, "gzip"},
		{"garbage", bytes.Repeat([]byte("not a tar "), 100), "invalid tar archive"},
		{"truncated", makeTar(t, tarEntry{name: "big", body: strings.Repeat("x", 4096)})[:1024], "invalid tar archive"},
		{"dest is a file", makeTar(t, tarEntry{name: "x", body: "x"}), "path is not a directory"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			f := memFiles(t)
			dest := "up"
			if tt.name == "dest is a file" {
				dest = "a.txt"
			}
			_, err := f.Upload(ctx, dest, bytes.NewReader(tt.archive))
			wantErr(t, err, domain.KindInvalidRequest, tt.msg)
			if got := readAll(t, f.Fs, "/outside/untouched.txt"); got != "keep" {
				t.Fatalf("outside file changed: %q", got)
			}
			if _, err := f.Fs.Stat("/home/evil.txt"); err == nil {
				t.Fatal("wrote outside the destination")
			}
			if _, err := f.Fs.Stat("/outside/evil.txt"); err == nil {
				t.Fatal("wrote an absolute entry")
			}
		})
	}

	t.Run("upload error passes through", func(t *testing.T) {
		f := memFiles(t)
		limit := &domain.Error{Kind: domain.KindPayloadTooLarge, Msg: "too big"}
		archive := makeTar(t, tarEntry{name: "big", body: strings.Repeat("x", 8192)})
		_, err := f.Upload(ctx, "up", &failingReader{data: archive[:2048], err: limit})
		if !errors.Is(err, limit) {
			t.Fatalf("error = %v", err)
		}
	})
}

func TestFilesUploadTruncatesPathList(t *testing.T) {
	var entries []tarEntry
	for i := range domain.MaxUploadPaths + 5 {
		entries = append(entries, tarEntry{name: fmt.Sprintf("f%04d", i), body: "x"})
	}
	f := memFiles(t)
	res, err := f.Upload(context.Background(), "many", bytes.NewReader(makeTar(t, entries...)))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Paths) != domain.MaxUploadPaths || !res.Truncated {
		t.Fatalf("paths %d truncated %v", len(res.Paths), res.Truncated)
	}
	if _, err := f.Fs.Stat(fmt.Sprintf("/home/u/many/f%04d", domain.MaxUploadPaths+4)); err != nil {
		t.Fatalf("last file not written: %v", err)
	}
}

// osUploadRig is a host directory tree: dest (the extraction directory) and,
// beside it, an outside directory that must stay untouched.
type osUploadRig struct {
	f             *Files
	root, outside string
}

func newOSUploadRig(t *testing.T) *osUploadRig {
	t.Helper()
	root := t.TempDir()
	outside := path.Join(root, "outside")
	if err := os.MkdirAll(path.Join(root, "home", "dest"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path.Join(outside, "keep.txt"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &osUploadRig{f: &Files{Fs: afero.NewOsFs(), Home: path.Join(root, "home")}, root: root, outside: outside}
}

func (r *osUploadRig) untouched(t *testing.T) {
	t.Helper()
	entries, err := os.ReadDir(r.outside)
	if err != nil || len(entries) != 1 {
		t.Fatalf("outside directory changed: %v, %v", entries, err)
	}
	if b, _ := os.ReadFile(path.Join(r.outside, "keep.txt")); string(b) != "keep" {
		t.Fatalf("outside file changed: %q", b)
	}
	if entries, _ := os.ReadDir(r.root); len(entries) != 2 {
		t.Fatalf("root gained entries: %v", entries)
	}
}

func TestFilesUploadLinks(t *testing.T) {
	ctx := context.Background()
	t.Run("links inside are kept", func(t *testing.T) {
		r := newOSUploadRig(t)
		archive := makeTar(t,
			tarEntry{name: "pkg/bin/tool.js", body: "js"},
			tarEntry{name: "node_modules/.bin/tool", link: "../../pkg/bin/tool.js", typ: tar.TypeSymlink},
			tarEntry{name: "current", link: "pkg", typ: tar.TypeSymlink},
			tarEntry{name: "pkg/self", link: ".", typ: tar.TypeSymlink},
		)
		res, err := r.f.Upload(ctx, "dest", bytes.NewReader(archive))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Paths) != 4 {
			t.Fatalf("paths %v", res.Paths)
		}
		b, err := os.ReadFile(path.Join(r.f.Home, "dest", "node_modules", ".bin", "tool"))
		if err != nil || string(b) != "js" {
			t.Fatalf("through link: %q, %v", b, err)
		}
		r.untouched(t)
	})

	bad := []struct {
		name    string
		setup   func(r *osUploadRig)
		entries []tarEntry
		msg     string
	}{
		{name: "relative link out", entries: []tarEntry{{name: "l", link: "../../outside/keep.txt", typ: tar.TypeSymlink}},
			msg: "link target leaves the destination"},
		{name: "absolute link", entries: []tarEntry{{name: "l", link: "/etc/passwd", typ: tar.TypeSymlink}},
			msg: "link target is absolute"},
		{name: "link then write through it", entries: []tarEntry{
			{name: "sub/", typ: tar.TypeDir},
			{name: "l", link: "sub", typ: tar.TypeSymlink},
			{name: "l/x.txt", body: "x"}},
			msg: "passes through a symbolic link"},
		{name: "dot link then climb", entries: []tarEntry{
			{name: "a", link: ".", typ: tar.TypeSymlink},
			{name: "b", link: "a/..", typ: tar.TypeSymlink}},
			msg: `tar entry "b": link target leaves`},
		{name: "climb before the dot link exists", entries: []tarEntry{
			{name: "b", link: "a/../outside", typ: tar.TypeSymlink},
			{name: "a", link: ".", typ: tar.TypeSymlink}},
			msg: "link target leaves"},
		{name: "chain of dir links", entries: []tarEntry{
			{name: "d/e/", typ: tar.TypeDir},
			{name: "hop1", link: "d/e", typ: tar.TypeSymlink},
			{name: "hop2", link: "hop1/../../..", typ: tar.TypeSymlink}},
			msg: "link target leaves"},
		{name: "existing link on disk", setup: func(r *osUploadRig) {
			_ = os.Symlink(r.outside, path.Join(r.f.Home, "dest", "out"))
		}, entries: []tarEntry{{name: "out/evil.txt", body: "x"}},
			msg: "passes through a symbolic link"},
		{name: "link through an existing link", setup: func(r *osUploadRig) {
			_ = os.Symlink(r.outside, path.Join(r.f.Home, "dest", "out"))
		}, entries: []tarEntry{{name: "l", link: "out/keep.txt", typ: tar.TypeSymlink}},
			msg: "link target leaves"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			r := newOSUploadRig(t)
			if tt.setup != nil {
				tt.setup(r)
			}
			_, err := r.f.Upload(ctx, "dest", bytes.NewReader(makeTar(t, tt.entries...)))
			wantErr(t, err, domain.KindInvalidRequest, tt.msg)
			r.untouched(t)
			// No link made by the archive is left pointing out.
			_ = fs.WalkDir(os.DirFS(path.Join(r.f.Home, "dest")), ".", func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.Type()&fs.ModeSymlink == 0 || p == "out" {
					return nil
				}
				full := path.Join(r.f.Home, "dest", p)
				real, err := evalLinks(full)
				if err == nil && !strings.HasPrefix(real+"/", path.Join(r.f.Home, "dest")+"/") {
					t.Errorf("link %s left pointing at %s", p, real)
				}
				return nil
			})
		})
	}
}

// evalLinks resolves a path on the host (test only).
func evalLinks(p string) (string, error) {
	for range 40 {
		fi, err := os.Lstat(p)
		if err != nil {
			// Resolve the parent instead.
			dir, err := evalLinks(path.Dir(p))
			return path.Join(dir, path.Base(p)), err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if path.Dir(p) == p {
				return p, nil
			}
			dir, err := evalLinks(path.Dir(p))
			return path.Join(dir, path.Base(p)), err
		}
		dest, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		if !path.IsAbs(dest) {
			dest = path.Join(path.Dir(p), dest)
		}
		p = dest
	}
	return "", errors.New("loop")
}
