package files

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// chainEntries is the escape the installer's own extractor let through: each
// link is harmless alone (up -> ".." stays inside d1, and l's text
// "d1/d2/up/../.." is lexically "."), but l resolves to the directory above
// the target, so "l/x" lands outside.
var chainEntries = []tarEntry{
	{name: "d1/", typ: tar.TypeDir},
	{name: "d1/d2/", typ: tar.TypeDir},
	{name: "d1/d2/up", link: "..", typ: tar.TypeSymlink},
	{name: "l", link: "d1/d2/up/../..", typ: tar.TypeSymlink},
	{name: "l/x", body: "escaped"},
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	gz.Write(b)
	gz.Close()
	return buf.Bytes()
}

// zipChain is chainEntries as a zip (links are members with the symlink
// mode bit whose data is the target).
func zipChain(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range chainEntries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Store}
		body := e.body
		switch e.typ {
		case tar.TypeDir:
			h.SetMode(fs.ModeDir | 0o755)
		case tar.TypeSymlink:
			h.SetMode(fs.ModeSymlink | 0o777)
			body = e.link
		default:
			h.SetMode(0o644)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, body)
	}
	zw.Close()
	return buf.Bytes()
}

// TestUnpackSymlinkChainEscape unpacks the chain as agent installs do
// (Limits.Unpack, the installer's agents.Disk), on the host, into
// <tmp>/box/dist: <tmp>/box/x must not appear. The installer's own
// extractor, before there was one extractor, wrote it.
func TestUnpackSymlinkChainEscape(t *testing.T) {
	for _, tc := range []struct {
		kind    string
		archive func(t *testing.T) []byte
	}{
		{"tar.gz", func(t *testing.T) []byte { return gzipped(t, makeTar(t, chainEntries...)) }},
		{"tar", func(t *testing.T) []byte { return makeTar(t, chainEntries...) }},
		{"zip", func(t *testing.T) []byte { return zipChain(t) }},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			box := path.Join(t.TempDir(), "box")
			dist := path.Join(box, "dist")
			if err := os.MkdirAll(dist, 0o755); err != nil {
				t.Fatal(err)
			}
			src := path.Join(box, "download")
			if err := os.WriteFile(src, tc.archive(t), 0o644); err != nil {
				t.Fatal(err)
			}
			err := Limits{}.Unpack(context.Background(), afero.NewOsFs(), src, tc.kind, dist)
			if err == nil {
				t.Fatal("the chain was unpacked")
			}
			if !strings.Contains(err.Error(), "symbolic link") && !strings.Contains(err.Error(), "leaves the destination") {
				t.Errorf("error %v", err)
			}
			if _, err := os.Lstat(path.Join(box, "x")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%s/x was written outside the target: %v", box, err)
			}
		})
	}
}

// TestExtractLimits: bytes are counted by logical size before they are
// written, hard links count again, sparse entries are refused, and a
// small archive cannot write more than the limit.
func TestExtractLimits(t *testing.T) {
	ctx := context.Background()
	run := func(t *testing.T, limit int64, archive []byte) (afero.Fs, error) {
		t.Helper()
		view := afero.NewMemMapFs()
		x := &extraction{view: view, limit: limit, ctx: ctx}
		return view, x.extract(tarEntries(bytes.NewReader(archive), nil))
	}
	t.Run("over the limit is 413 with limitBytes, before writing", func(t *testing.T) {
		view, err := run(t, 1000, makeTar(t, tarEntry{name: "a", body: strings.Repeat("a", 600)}, tarEntry{name: "b", body: strings.Repeat("b", 600)}))
		e, ok := domain.AsError(err)
		if !ok || e.Kind != domain.KindPayloadTooLarge || e.LimitBytes != 1000 {
			t.Fatalf("err %v", err)
		}
		if _, err := view.Stat("b"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("b was written: %v", err)
		}
	})
	t.Run("exactly the limit fits", func(t *testing.T) {
		if _, err := run(t, 1200, makeTar(t, tarEntry{name: "a", body: strings.Repeat("a", 600)}, tarEntry{name: "b", body: strings.Repeat("b", 600)})); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("hard links count again", func(t *testing.T) {
		_, err := run(t, 1000, makeTar(t, tarEntry{name: "a", body: strings.Repeat("a", 600)}, tarEntry{name: "b", link: "a", typ: tar.TypeLink}))
		if !domain.IsKind(err, domain.KindPayloadTooLarge) {
			t.Fatalf("err %v", err)
		}
	})
	for _, name := range []string{"sparse-gnu.tar", "sparse-pax.tar"} {
		archive, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(name+" over the limit is 413", func(t *testing.T) {
			if _, err := run(t, 1<<19, archive); !domain.IsKind(err, domain.KindPayloadTooLarge) {
				t.Fatalf("err %v", err)
			}
		})
		t.Run(name+" under the limit is refused", func(t *testing.T) {
			view, err := run(t, 1<<30, archive)
			if !domain.IsKind(err, domain.KindInvalidRequest) || !strings.Contains(err.Error(), "sparse files are not supported") {
				t.Fatalf("err %v", err)
			}
			if _, err := view.Stat("small"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("sparse file written: %v", err)
			}
		})
	}
}

// shrinkingSpace is a disk with free bytes left, less what used reports
// as written so far.
func shrinkingSpace(free int64, used func() int64) *porttest.FakeDiskSpace {
	return &porttest.FakeDiskSpace{SpaceFunc: func(string) (int64, int64, error) {
		n := free
		if used != nil {
			n -= used()
		}
		return n, 1 << 40, nil
	}}
}

func TestFilesMinFree(t *testing.T) {
	ctx := context.Background()
	t.Run("auto floor is 1 GiB or 5 %", func(t *testing.T) {
		if got := minFreeFor(AutoMinFree, 100<<30); got != 1<<30 {
			t.Errorf("100 GiB disk: %d", got)
		}
		if got := minFreeFor(AutoMinFree, 10<<30); got != 512<<20 {
			t.Errorf("10 GiB disk: %d", got)
		}
		if got := minFreeFor(0, 10<<30); got != 0 {
			t.Errorf("0: %d", got)
		}
	})
	t.Run("a filesystem without block counts has no floor", func(t *testing.T) {
		// procfs and sysfs report 0 of 0 blocks free: a write there was
		// refused as "would leave less than 0 bytes free".
		f := memFiles(t)
		f.Space, f.MinFree = &porttest.FakeDiskSpace{SpaceFunc: func(string) (int64, int64, error) { return 0, 0, nil }}, AutoMinFree
		if _, err := f.Write(ctx, "new.txt", strings.NewReader("x"), 1); err != nil {
			t.Errorf("write: %v", err)
		}
	})
	t.Run("a declared size past the floor writes nothing", func(t *testing.T) {
		f := memFiles(t)
		f.Space, f.MinFree = shrinkingSpace(1100, nil), 1000
		_, err := f.Write(ctx, "new.txt", strings.NewReader(strings.Repeat("x", 200)), 200)
		wantErr(t, err, domain.KindInsufficientStorage, "would leave less than 1000 bytes free")
		if _, err := f.Fs.Stat("/home/u/new.txt"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("file written: %v", err)
		}
	})
	t.Run("a streamed body is stopped while writing and removed", func(t *testing.T) {
		f := memFiles(t)
		var written int64
		f.Space, f.MinFree = shrinkingSpace(40<<20, func() int64 { return written }), 20<<20
		body := &countingReader{r: io.LimitReader(zeros{}, 100<<20), n: &written}
		_, err := f.Write(ctx, "big.bin", body, -1)
		wantErr(t, err, domain.KindInsufficientStorage, "")
		if written >= 100<<20 {
			t.Errorf("the whole body was read (%d bytes)", written)
		}
		entries, _ := afero.ReadDir(f.Fs, "/home/u")
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".sandbox-agent-upload") || e.Name() == "big.bin" {
				t.Errorf("left behind: %s", e.Name())
			}
		}
	})
	t.Run("an upload past the floor leaves no stage", func(t *testing.T) {
		f := memFiles(t)
		f.Space, f.MinFree = shrinkingSpace(1100, nil), 1000
		_, err := f.Upload(ctx, "up", bytes.NewReader(makeTar(t, tarEntry{name: "a", body: strings.Repeat("a", 200)})))
		wantErr(t, err, domain.KindInsufficientStorage, "")
		entries, _ := afero.ReadDir(f.Fs, "/home/u")
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), stagePrefix) || e.Name() == "up" {
				t.Errorf("left behind: %s", e.Name())
			}
		}
	})
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type countingReader struct {
	r io.Reader
	n *int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += int64(n)
	return n, err
}

// FuzzExtract feeds arbitrary bytes to the extractor as a tar, on the
// host, into <tmp>/box/dst: whatever the archive (holes, links, names),
// nothing appears in <tmp>/box but dst, nothing under dst is written
// through a link to outside it, and no more than the limit is written.
func FuzzExtract(f *testing.F) {
	seed := func(entries ...tarEntry) { f.Add(makeTar(f, entries...)) }
	seed(chainEntries...)
	seed(tarEntry{name: "a", body: "x"}, tarEntry{name: "b", link: "a", typ: tar.TypeLink}, tarEntry{name: "c", link: "b", typ: tar.TypeSymlink})
	seed(tarEntry{name: "l", link: "..", typ: tar.TypeSymlink}, tarEntry{name: "l/x", body: "x"})
	seed(tarEntry{name: "a", link: ".", typ: tar.TypeSymlink}, tarEntry{name: "b", link: "a/../x", typ: tar.TypeSymlink})
	seed(tarEntry{name: strings.Repeat("n", 300), body: "x"})
	seed(tarEntry{name: "../x", body: "x"}, tarEntry{name: "/abs", body: "x"})
	// Deep enough to leave the chain's window of held handles.
	deep := strings.Repeat("d/", 40)
	seed(tarEntry{name: deep + "f", body: "x"}, tarEntry{name: "a/b", body: "y"}, tarEntry{name: deep + "up", link: strings.Repeat("../", 40) + "a", typ: tar.TypeSymlink},
		tarEntry{name: "l", link: deep + "up/../..", typ: tar.TypeSymlink}, tarEntry{name: deep + "h", link: "a/b", typ: tar.TypeLink})
	for _, name := range []string{"sparse-gnu.tar", "sparse-pax.tar"} {
		if b, err := os.ReadFile("testdata/" + name); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, archive []byte) {
		// Through a base path view, and through a view handing out
		// handles on subdirectories as the daemon's do (extract_chain.go).
		for _, handles := range []bool{false, true} {
			fuzzExtractOnce(t, archive, handles)
		}
	})
}

func fuzzExtractOnce(t *testing.T, archive []byte, handles bool) {
	box := path.Join(t.TempDir(), "box")
	dst := path.Join(box, "dst")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	const limit = 1 << 20
	x := &extraction{limit: limit, ctx: context.Background(), maxDepth: 64}
	view, done, err := confine(afero.NewOsFs(), dst)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	x.view = view
	n := &handleCount{}
	if handles {
		x.view = newHandleView(dst, n)
	}
	err = x.extract(tarEntries(bytes.NewReader(archive), nil))
	if n.open != 0 || n.doubleClose != 0 {
		t.Fatalf("handles left open %d, closed twice %d", n.open, n.doubleClose)
	}
	entries, _ := os.ReadDir(box)
	if len(entries) != 1 || entries[0].Name() != "dst" {
		t.Fatalf("outside the target: %v", entries)
	}
	if x.used > limit {
		t.Fatalf("counted %d bytes past the limit", x.used)
	}
	var size int64
	_ = fs.WalkDir(os.DirFS(dst), ".", func(p string, d fs.DirEntry, werr error) error {
		if werr != nil {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			// A failed extraction's stage is removed by its caller;
			// a successful one must leave no link pointing out.
			real, lerr := filepath.EvalSymlinks(path.Join(dst, p))
			if err == nil && lerr == nil && real != dst && !strings.HasPrefix(real, dst+"/") {
				t.Fatalf("link %s points out to %s", p, real)
			}
			return nil
		}
		if fi, ierr := d.Info(); ierr == nil && fi.Mode().IsRegular() {
			size += fi.Size()
		}
		return nil
	})
	if size > limit {
		t.Fatalf("%d bytes on disk past the %d limit", size, limit)
	}
}

// TestUnpackEscapes: agent archives whose entries or links leave the
// target are refused, in every format the installer takes.
func TestUnpackEscapes(t *testing.T) {
	zipOf := func(t *testing.T, name string) []byte {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		w, _ := zw.Create(name)
		io.WriteString(w, "x")
		zw.Close()
		return buf.Bytes()
	}
	for _, tc := range []struct {
		name, kind string
		archive    func(t *testing.T) []byte
		want       string
	}{
		{"tar dotdot", "tar.gz", func(t *testing.T) []byte { return gzipped(t, makeTar(t, tarEntry{name: "../../evil", body: "x"})) },
			`tar entry "../../evil": ".." is not allowed`},
		{"tar absolute", "tar.gz", func(t *testing.T) []byte { return gzipped(t, makeTar(t, tarEntry{name: "/etc/evil", body: "x"})) },
			"absolute names are not allowed"},
		{"tar symlink out", "tar", func(t *testing.T) []byte {
			return makeTar(t, tarEntry{name: "bin/agent", link: "../../../../etc/passwd", typ: tar.TypeSymlink})
		}, "link target leaves the destination"},
		{"zip dotdot", "zip", func(t *testing.T) []byte { return zipOf(t, "../evil") }, `zip entry "../evil"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			box := path.Join(t.TempDir(), "box")
			dist := path.Join(box, "dist")
			src := path.Join(box, "download")
			if err := os.MkdirAll(dist, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(src, tc.archive(t), 0o644); err != nil {
				t.Fatal(err)
			}
			err := Limits{}.Unpack(context.Background(), afero.NewOsFs(), src, tc.kind, dist)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			entries, _ := os.ReadDir(box)
			if len(entries) != 2 {
				t.Errorf("box holds %v", entries)
			}
		})
	}
}

// TestUploadConcurrentToNewTarget: uploads racing to create the same new
// directory all land, merged.
func TestUploadConcurrentToNewTarget(t *testing.T) {
	home := t.TempDir()
	f := &Files{Fs: afero.NewOsFs(), Home: home}
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			name := string(rune('a' + i))
			_, err := f.Upload(context.Background(), "race/new", bytes.NewReader(makeTar(t, tarEntry{name: name, body: name})))
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	entries, _ := afero.ReadDir(f.Fs, home+"/race/new")
	if len(entries) != n {
		t.Errorf("%d entries, want %d", len(entries), n)
	}
	entries, _ = afero.ReadDir(f.Fs, home)
	if len(entries) != 1 {
		t.Errorf("home holds %v (stages left?)", entries)
	}
}

func TestUploadNameTooLongAtTarget(t *testing.T) {
	f := memFiles(t)
	deep := strings.Repeat("d/", 1900) // 3800 bytes: valid alone
	_, err := f.Upload(context.Background(), deep, bytes.NewReader(makeTar(t, tarEntry{name: strings.Repeat("e/", 200) + "f", body: "x"})))
	wantErr(t, err, domain.KindInvalidRequest, "path is longer than 4095 bytes")
}

// FuzzExtractZip is FuzzExtract for the zip archives of agent installs.
func FuzzExtractZip(f *testing.F) {
	f.Add(zipChain(f))
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("../evil")
	io.WriteString(w, "x")
	w, _ = zw.Create("ok/file")
	io.WriteString(w, strings.Repeat("z", 4096))
	zw.Close()
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, archive []byte) {
		box := path.Join(t.TempDir(), "box")
		dst := path.Join(box, "dst")
		src := path.Join(box, "download.zip")
		if err := os.MkdirAll(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(src, archive, 0o644); err != nil {
			t.Fatal(err)
		}
		const limit = 1 << 20
		_ = Limits{MaxExtract: limit}.Unpack(context.Background(), afero.NewOsFs(), src, "zip", dst)
		entries, _ := os.ReadDir(box)
		if len(entries) != 2 {
			t.Fatalf("outside the target: %v", entries)
		}
		var size int64
		_ = fs.WalkDir(os.DirFS(dst), ".", func(p string, d fs.DirEntry, err error) error {
			if fi, ierr := d.Info(); err == nil && ierr == nil && fi.Mode().IsRegular() {
				size += fi.Size()
			}
			return nil
		})
		if size > limit {
			t.Fatalf("%d bytes on disk past the %d limit", size, limit)
		}
	})
}

func TestExtractEntryAndLinkCaps(t *testing.T) {
	defer func(e, l int) { maxEntries, maxLinks = e, l }(maxEntries, maxLinks)
	maxEntries, maxLinks = 3, 1
	f := &Files{Fs: afero.NewOsFs(), Home: t.TempDir()}
	ctx := context.Background()
	_, err := f.Upload(ctx, "a", bytes.NewReader(makeTar(t, tarEntry{name: "1", body: "1"}, tarEntry{name: "2", body: "2"}, tarEntry{name: "3", body: "3"}, tarEntry{name: "4", body: "4"})))
	wantErr(t, err, domain.KindInvalidRequest, "more than 3 entries")
	_, err = f.Upload(ctx, "b", bytes.NewReader(makeTar(t, tarEntry{name: "l1", link: "x", typ: tar.TypeSymlink}, tarEntry{name: "l2", link: "x", typ: tar.TypeSymlink})))
	wantErr(t, err, domain.KindInvalidRequest, "more than 1 symbolic links")
	if entries, _ := os.ReadDir(f.Home); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}

func TestUploadStageNameReserved(t *testing.T) {
	f := memFiles(t)
	_, err := f.Upload(context.Background(), "dir", bytes.NewReader(makeTar(t, tarEntry{name: stagePrefix + "x/evil", body: "x"})))
	wantErr(t, err, domain.KindInvalidRequest, "reserved")
	entries, _ := afero.ReadDir(f.Fs, "/home/u/dir")
	if len(entries) != 2 { // inner.txt and sub, as memFiles made them
		t.Errorf("dir holds %v", entries)
	}
}

// TestGuardWriterCapsDownloads: an agent install's download (an endless or
// lying archive server) stops at --max-extract, as what it expands to
// does; it used to run until the disk reached the free-space floor (with
// --min-free 0, until the disk was full).
func TestGuardWriterCapsDownloads(t *testing.T) {
	var buf bytes.Buffer
	w, err := Limits{MaxExtract: 10}.GuardWriter("/tmp/x", &buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("0123456789")); err != nil {
		t.Fatalf("up to the limit: %v", err)
	}
	_, err = w.Write([]byte("a"))
	e, ok := domain.AsError(err)
	if !ok || e.Kind != domain.KindPayloadTooLarge || e.LimitBytes != 10 {
		t.Fatalf("one byte past the limit: %v, want payload_too_large with limitBytes 10", err)
	}
	if buf.Len() != 10 {
		t.Errorf("wrote %d bytes", buf.Len())
	}
}
