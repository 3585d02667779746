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
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// handleCount counts the directory handles a test view hands out.
type handleCount struct {
	open, max, total, doubleClose int
}

// handleView is a view of a host directory that hands out views of its
// subdirectories (a ports.Confiner view, as the daemon's os.Root views
// are), so the extractor's chain of handles runs here as it does in the
// daemon; it counts the handles open. (The adapter's own views are tested
// in adapters/fsys and, through the daemon, in e2e.)
type handleView struct {
	baseView
	n *handleCount
}

var (
	_ ports.Confiner = handleView{}
	_ afero.Linker   = handleView{}
)

func newHandleView(dir string, n *handleCount) handleView {
	host := afero.NewOsFs()
	return handleView{baseView{afero.NewBasePathFs(host, dir).(*afero.BasePathFs), host, dir}, n}
}

// Confine opens a subdirectory by a relative name, following links as
// os.Root does (the extractor must never ask it to).
func (v handleView) Confine(name string) (afero.Fs, func() error, error) {
	clean := path.Clean(name)
	if path.IsAbs(name) || clean == ".." || strings.HasPrefix(clean, "../") {
		return nil, nil, &fs.PathError{Op: "confine", Path: name, Err: domain.ErrOutsideRoot}
	}
	dir := path.Join(v.base, clean)
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, nil, err
	}
	if !fi.IsDir() {
		return nil, nil, &fs.PathError{Op: "confine", Path: name, Err: errors.New("not a directory")}
	}
	v.n.open++
	v.n.total++
	v.n.max = max(v.n.max, v.n.open)
	closed := false
	return newHandleView(dir, v.n), func() error {
		if closed {
			v.n.doubleClose++
			return nil
		}
		closed = true
		v.n.open--
		return nil
	}, nil
}

// handleHost is the host filesystem whose confined views are handleViews.
type handleHost struct {
	afero.Fs
	n *handleCount
}

func newHandleHost() handleHost { return handleHost{afero.NewOsFs(), &handleCount{}} }

func (h handleHost) Confine(dir string) (afero.Fs, func() error, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, nil, err
	}
	return newHandleView(dir, h.n), func() error { return nil }, nil
}

func (h handleHost) SymlinkIfPossible(oldname, newname string) error {
	return h.Fs.(afero.Linker).SymlinkIfPossible(oldname, newname)
}

func (h handleHost) LstatIfPossible(name string) (fs.FileInfo, bool, error) {
	return h.Fs.(afero.Lstater).LstatIfPossible(name)
}

// deepName is the path of n nested directories d0/d1/.../d(n-1).
func deepName(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("d%d", i)
	}
	return strings.Join(parts, "/")
}

// deepTree is an archive whose spine is depth directories deep, with the
// shapes that move the chain: a file at every level listed on the way down
// and again, bottom-up, after the spine (climbing past the window of held
// handles), a second deep branch whose entries alternate with the spine's,
// links that climb from the bottom to the top and through each other, and
// hard links between the bottom and the top.
func deepTree(depth int) []tarEntry {
	var es []tarEntry
	for i := 1; i <= depth; i++ {
		es = append(es, tarEntry{name: deepName(i) + "/", typ: tar.TypeDir}, tarEntry{name: deepName(i) + "/down", body: fmt.Sprint(i)})
	}
	for i := depth; i >= 1; i-- {
		es = append(es, tarEntry{name: deepName(i) + "/up", body: fmt.Sprint(i)})
	}
	half := depth / 2
	for i := half + 1; i <= depth; i++ {
		other := deepName(half) + "/b" + strings.Repeat("/b", i-half-1)
		es = append(es, tarEntry{name: other + "/f", body: "b"}, tarEntry{name: deepName(i) + "/again", body: "a"})
	}
	bottom := deepName(depth)
	es = append(es,
		tarEntry{name: "top.txt", body: "top"},
		tarEntry{name: bottom + "/to-top", link: strings.Repeat("../", depth) + "top.txt", typ: tar.TypeSymlink},
		tarEntry{name: bottom + "/to-mid", link: strings.Repeat("../", depth-half) + "b", typ: tar.TypeSymlink},
		tarEntry{name: "via", link: bottom + "/to-mid/b", typ: tar.TypeSymlink},
		tarEntry{name: "bottom", link: bottom, typ: tar.TypeSymlink},
		tarEntry{name: "bottom-up", link: "bottom/up", typ: tar.TypeSymlink},
		tarEntry{name: bottom + "/hard-top", link: "top.txt", typ: tar.TypeLink},
		tarEntry{name: "hard-bottom", link: bottom + "/down", typ: tar.TypeLink},
	)
	return es
}

// checkDeepTree verifies what deepTree(depth) left in dir.
func checkDeepTree(t *testing.T, dir string, depth int) {
	t.Helper()
	bottom := filepath.Join(dir, deepName(depth))
	want := map[string]string{
		filepath.Join(dir, deepName(1), "down"):                              "1",
		filepath.Join(dir, deepName(depth/2), "up"):                          fmt.Sprint(depth / 2),
		filepath.Join(bottom, "up"):                                          fmt.Sprint(depth),
		filepath.Join(bottom, "again"):                                       "a",
		filepath.Join(bottom, "to-top"):                                      "top",
		filepath.Join(bottom, "hard-top"):                                    "top",
		filepath.Join(dir, "hard-bottom"):                                    fmt.Sprint(depth),
		filepath.Join(dir, "bottom-up"):                                      fmt.Sprint(depth),
		filepath.Join(dir, "via", strings.Repeat("b/", depth-depth/2-2)+"f"): "b",
	}
	for p, c := range want {
		b, err := os.ReadFile(p)
		if err != nil || string(b) != c {
			t.Errorf("%s = %q, %v; want %q", strings.TrimPrefix(p, dir), b, err, c)
		}
	}
}

// TestExtractDeepTree: a 100-deep archive (three times the chain's window
// of handles, past three of its checkpoints) with links and hard links at
// the bottom lands whole, through views that hand out handles, with a
// bounded number of handles open and every one closed; also merged into a
// target that already holds part of it. Shallow files after it take the
// paths listed past their cap. (The test's views cost each call the
// length of its path, so a deeper tree costs the square of its depth,
// without exercising anything more.)
func TestExtractDeepTree(t *testing.T) {
	const depth = 100
	entries := deepTree(depth)
	for i := range domain.MaxUploadPaths {
		entries = append(entries, tarEntry{name: fmt.Sprintf("flat/f%04d", i), body: "f"})
	}
	archive := makeTar(t, entries...)
	bound := 2 * (chainWindow + depth/chainEvery + 2)
	for _, existing := range []bool{false, true} {
		t.Run(fmt.Sprintf("target exists %v", existing), func(t *testing.T) {
			home := t.TempDir()
			if existing {
				if err := os.MkdirAll(filepath.Join(home, "dst", deepName(depth/3)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(home, "dst", deepName(depth/3), "mine"), []byte("mine"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			host := newHandleHost()
			f := &Files{Fs: host, Home: home}
			res, err := f.Upload(context.Background(), "dst", bytes.NewReader(archive))
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Paths) != domain.MaxUploadPaths || !res.Truncated {
				t.Errorf("paths %d, truncated %v", len(res.Paths), res.Truncated)
			}
			checkDeepTree(t, filepath.Join(home, "dst"), depth)
			if b, err := os.ReadFile(filepath.Join(home, "dst", "flat", fmt.Sprintf("f%04d", domain.MaxUploadPaths-1))); string(b) != "f" {
				t.Errorf("the last flat file: %q, %v", b, err)
			}
			if existing {
				if b, _ := os.ReadFile(filepath.Join(home, "dst", deepName(depth/3), "mine")); string(b) != "mine" {
					t.Errorf("the target's own file: %q", b)
				}
			}
			n := host.n
			if n.open != 0 || n.doubleClose != 0 {
				t.Errorf("handles left open %d, closed twice %d", n.open, n.doubleClose)
			}
			if n.max > bound {
				t.Errorf("%d handles open at once, want at most %d", n.max, bound)
			}
			t.Logf("%d handles opened, at most %d at once", n.total, n.max)
		})
	}
}

// TestExtractDeepEscapes: the link tricks of TestFilesUploadLinks, deep
// down and through the chain's handles, are refused, and leave nothing
// outside.
func TestExtractDeepEscapes(t *testing.T) {
	const depth = 200
	deep := deepName(depth)
	for _, tc := range []struct {
		name    string
		entries []tarEntry
		msg     string
	}{
		{"chain of harmless links", []tarEntry{
			{name: deep + "/", typ: tar.TypeDir},
			{name: deep + "/up", link: "..", typ: tar.TypeSymlink},
			{name: "l", link: deep + "/up/" + strings.Repeat("../", depth), typ: tar.TypeSymlink},
		}, "link target leaves"},
		{"climb one past the top", []tarEntry{
			{name: deep + "/x", link: strings.Repeat("../", depth+1) + "outside", typ: tar.TypeSymlink},
		}, "link target leaves"},
		{"dot link then climb, deep", []tarEntry{
			{name: deep + "/a", link: ".", typ: tar.TypeSymlink},
			{name: deep + "/b", link: "a/" + strings.Repeat("../", depth+1), typ: tar.TypeSymlink},
		}, "link target leaves"},
		{"write through a deep link", []tarEntry{
			{name: deep + "/", typ: tar.TypeDir},
			{name: deep + "/l", link: "..", typ: tar.TypeSymlink},
			{name: deep + "/l/x", body: "x"},
		}, "passes through a symbolic link"},
		{"hard link through a link", []tarEntry{
			{name: deep + "/f", body: "f"},
			{name: "l", link: deepName(depth / 2), typ: tar.TypeSymlink},
			{name: "h", link: "l/" + strings.TrimPrefix(deep, deepName(depth/2)+"/") + "/f", typ: tar.TypeLink},
		}, "passes through a symbolic link"},
		{"a file as a parent", []tarEntry{
			{name: deepName(100), body: "file"},
			{name: deep + "/x", body: "x"},
		}, "a parent is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newOSUploadRig(t)
			host := newHandleHost()
			r.f.Fs = host
			_, err := r.f.Upload(context.Background(), "dest", bytes.NewReader(makeTar(t, tc.entries...)))
			wantErr(t, err, domain.KindInvalidRequest, tc.msg)
			r.untouched(t)
			if entries, _ := os.ReadDir(filepath.Join(r.f.Home, "dest")); len(entries) != 0 {
				t.Errorf("dest holds %v", entries)
			}
			if host.n.open != 0 || host.n.doubleClose != 0 {
				t.Errorf("handles left open %d, closed twice %d", host.n.open, host.n.doubleClose)
			}
		})
	}
}

// TestExtractLinkWalk pins the link walk's rule: ".." may only leave a
// real directory it has seen, so after a link (or a file, or a missing
// name) the rest of a target is names only; and a link met on the way
// must be the archive's own.
func TestExtractLinkWalk(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, dest string)
		entries []tarEntry
		msg     string // "" when the archive lands
	}{
		{name: "through a link, names only", entries: []tarEntry{
			{name: "real/sub/", typ: tar.TypeDir},
			{name: "l", link: "real", typ: tar.TypeSymlink},
			{name: "m", link: "l/sub", typ: tar.TypeSymlink},
		}},
		{name: "through a link, then up", entries: []tarEntry{
			{name: "real/sub/", typ: tar.TypeDir},
			{name: "l", link: "real", typ: tar.TypeSymlink},
			{name: "m", link: "l/sub/..", typ: tar.TypeSymlink},
		}, msg: "link target leaves"},
		{name: "a missing name, then up", entries: []tarEntry{
			{name: "m", link: "nothing/..", typ: tar.TypeSymlink},
		}, msg: "link target leaves"},
		{name: "a directory only the target has", setup: func(t *testing.T, dest string) {
			must(t, os.MkdirAll(filepath.Join(dest, "old", "sub"), 0o755))
		}, entries: []tarEntry{
			{name: "new/l", link: "../old/sub/..", typ: tar.TypeSymlink},
		}},
		{name: "a link only the target has", setup: func(t *testing.T, dest string) {
			must(t, os.MkdirAll(filepath.Join(dest, "old"), 0o755))
			must(t, os.Symlink("/etc", filepath.Join(dest, "old", "etc")))
		}, entries: []tarEntry{
			{name: "l", link: "old/etc/passwd", typ: tar.TypeSymlink},
		}, msg: "link target leaves"},
		{name: "beneath the archive's directory, the target's link", setup: func(t *testing.T, dest string) {
			must(t, os.MkdirAll(filepath.Join(dest, "both"), 0o755))
			must(t, os.Symlink("/etc", filepath.Join(dest, "both", "etc")))
		}, entries: []tarEntry{
			{name: "both/mine", body: "x"},
			{name: "l", link: "both/etc/passwd", typ: tar.TypeSymlink},
		}, msg: "link target leaves"},
	} {
		for _, handles := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s handles %v", tc.name, handles), func(t *testing.T) {
				r := newOSUploadRig(t)
				if handles {
					r.f.Fs = newHandleHost()
				}
				dest := filepath.Join(r.f.Home, "dest")
				if tc.setup != nil {
					tc.setup(t, dest)
				}
				_, err := r.f.Upload(context.Background(), "dest", bytes.NewReader(makeTar(t, tc.entries...)))
				if tc.msg == "" {
					if err != nil {
						t.Fatal(err)
					}
				} else {
					wantErr(t, err, domain.KindInvalidRequest, tc.msg)
				}
				r.untouched(t)
			})
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestExtractMaxDepth: an entry with MaxDepth path elements lands, one
// more is refused with the limit in the message, for uploads and installs.
func TestExtractMaxDepth(t *testing.T) {
	ctx := context.Background()
	const limit = 40
	f := &Files{Fs: newHandleHost(), Home: t.TempDir(), Limits: Limits{MaxDepth: limit}}
	if _, err := f.Upload(ctx, "ok", bytes.NewReader(makeTar(t, tarEntry{name: deepName(limit-1) + "/f", body: "x"}))); err != nil {
		t.Fatal(err)
	}
	_, err := f.Upload(ctx, "deep", bytes.NewReader(makeTar(t, tarEntry{name: deepName(limit) + "/f", body: "x"})))
	wantErr(t, err, domain.KindInvalidRequest, "41 path elements deep, past the limit of 40")
	if _, err := os.Stat(filepath.Join(f.Home, "deep")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("refused upload left its target: %v", err)
	}

	dir := t.TempDir()
	src := filepath.Join(dir, "a.tar")
	must(t, os.WriteFile(src, makeTar(t, tarEntry{name: deepName(limit+1) + "/", typ: tar.TypeDir}), 0o644))
	err = Limits{MaxDepth: limit}.Unpack(ctx, afero.NewOsFs(), src, "tar", filepath.Join(dir, "dist"))
	wantErr(t, err, domain.KindInvalidRequest, "past the limit of 40")

	// The default is DefaultMaxDepth (one-letter names: the path stays
	// under 4095 bytes).
	mem := afero.NewMemMapFs()
	for _, tc := range []struct {
		depth int
		ok    bool
	}{{DefaultMaxDepth, true}, {DefaultMaxDepth + 1, false}} {
		must(t, afero.WriteFile(mem, "/a.tar", makeTar(t, tarEntry{name: strings.Repeat("a/", tc.depth), typ: tar.TypeDir}), 0o644))
		err := Limits{}.Unpack(ctx, mem, "/a.tar", "tar", "/dist")
		if tc.ok && err != nil || !tc.ok && !strings.Contains(fmt.Sprint(err), "past the limit of 1024") {
			t.Errorf("depth %d: %v", tc.depth, err)
		}
	}
}

// cancelFs cancels a context when trigger first says so, and counts the
// operations after that: the extractor must stop at once.
type cancelFs struct {
	afero.Fs
	cancel  context.CancelFunc
	trigger func(op, name string) bool
	after   *int
	fired   *bool
}

func newCancelFs(fsys afero.Fs, cancel context.CancelFunc, trigger func(op, name string) bool) cancelFs {
	return cancelFs{Fs: fsys, cancel: cancel, trigger: trigger, after: new(int), fired: new(bool)}
}

func (c cancelFs) see(op, name string) {
	if *c.fired {
		*c.after++
	} else if c.trigger(op, name) {
		*c.fired = true
		c.cancel()
	}
}

func (c cancelFs) Create(name string) (afero.File, error) {
	c.see("create", name)
	return c.Fs.Create(name)
}

func (c cancelFs) LstatIfPossible(name string) (fs.FileInfo, bool, error) {
	c.see("lstat", name)
	return lstatOnBool(c.Fs, name)
}

func lstatOnBool(fsys afero.Fs, name string) (fs.FileInfo, bool, error) {
	fi, err := lstatOn(fsys, name)
	return fi, true, err
}

func (c cancelFs) Confine(dir string) (afero.Fs, func() error, error) {
	v, done, err := c.Fs.(ports.Confiner).Confine(dir)
	if err != nil {
		return nil, nil, err
	}
	return cancelFs{Fs: v, cancel: c.cancel, trigger: c.trigger, after: c.after, fired: c.fired}, done, nil
}

func (c cancelFs) SymlinkIfPossible(oldname, newname string) error {
	if l, ok := c.Fs.(afero.Linker); ok {
		return l.SymlinkIfPossible(oldname, newname)
	}
	return &fs.PathError{Op: "symlink", Path: newname, Err: afero.ErrNoSymlink}
}

// TestExtractCancelled: a request that goes away stops the extraction at
// the next entry, within one buffer of a long copy, and between link
// checks; Upload removes its stage and leaves no target, Unpack returns the
// context's error (the installer removes its directory on any error).
func TestExtractCancelled(t *testing.T) {
	var many []tarEntry
	for i := range 200 {
		many = append(many, tarEntry{name: fmt.Sprintf("d/f%03d", i), body: "x"})
	}
	var links []tarEntry
	for i := range 200 {
		links = append(links, tarEntry{name: fmt.Sprintf("l%03d", i), link: "sub/trigger", typ: tar.TypeSymlink})
	}
	links = append([]tarEntry{{name: "sub/", typ: tar.TypeDir}}, links...)

	t.Run("between entries", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		home := t.TempDir()
		cfs := newCancelFs(newHandleHost(), cancel, func(op, name string) bool { return op == "create" && strings.HasSuffix(name, "f010") })
		f := &Files{Fs: cfs, Home: home}
		_, err := f.Upload(ctx, "up", bytes.NewReader(makeTar(t, many...)))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
		if *cfs.after > 2 {
			t.Errorf("%d operations after the cancel", *cfs.after)
		}
		if entries, _ := os.ReadDir(home); len(entries) != 0 {
			t.Errorf("left behind: %v", entries)
		}
	})

	t.Run("inside a long copy", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		home := t.TempDir()
		var written int64
		const size = 4 << 30
		var h bytes.Buffer
		tw := tar.NewWriter(&h)
		must(t, tw.WriteHeader(&tar.Header{Name: "big", Mode: 0o644, Size: size}))
		// The body cancels the request once 64 MiB of the entry were read.
		body := io.MultiReader(bytes.NewReader(h.Bytes()), &cancelAt{r: io.LimitReader(zeros{}, size), n: &written, at: 64 << 20, cancel: cancel})
		f := &Files{Fs: afero.NewOsFs(), Home: home}
		_, err := f.Upload(ctx, "up", body)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
		if w := written; w > 1<<30 {
			t.Errorf("%d bytes read after a cancel at 64 MiB", w)
		}
		if entries, _ := os.ReadDir(home); len(entries) != 0 {
			t.Errorf("left behind: %v", entries)
		}
	})

	t.Run("between link checks", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		home := t.TempDir()
		cfs := newCancelFs(newHandleHost(), cancel, func(op, name string) bool { return op == "lstat" && strings.HasSuffix(name, "trigger") })
		f := &Files{Fs: cfs, Home: home}
		_, err := f.Upload(ctx, "up", bytes.NewReader(makeTar(t, links...)))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
		if *cfs.after > 2 {
			t.Errorf("%d operations after the cancel", *cfs.after)
		}
		if entries, _ := os.ReadDir(home); len(entries) != 0 {
			t.Errorf("left behind: %v", entries)
		}
	})

	t.Run("an install", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		dir := t.TempDir()
		cfs := newCancelFs(newHandleHost(), cancel, func(op, name string) bool { return op == "create" && strings.HasSuffix(name, "f010") })
		src := filepath.Join(dir, "a.tar.gz")
		must(t, os.WriteFile(src, gzipped(t, makeTar(t, many...)), 0o644))
		err := Limits{}.Unpack(ctx, cfs, src, "tar.gz", filepath.Join(dir, "dist"))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
		if *cfs.after > 2 {
			t.Errorf("%d operations after the cancel", *cfs.after)
		}
	})
}

// cancelAt counts what is read through it and calls cancel once at bytes.
type cancelAt struct {
	r      io.Reader
	n      *int64
	at     int64
	cancel context.CancelFunc
}

func (c *cancelAt) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += int64(n)
	if *c.n >= c.at && *c.n-int64(n) < c.at {
		c.cancel()
	}
	return n, err
}

// TestExtractTargetGuard: every entry of the target the extraction or the
// merge looks at goes past the guard, by its path in the target, and the
// guard's refusal is the answer: an entry replacing it, going through it,
// or a link to it, and the move into place.
func TestExtractTargetGuard(t *testing.T) {
	refuse := func(rel string) bool { return rel == "keep" || strings.HasPrefix(rel, "keep/") }
	setup := func(t *testing.T) (home, stage, target string) {
		home = t.TempDir()
		target = filepath.Join(home, "target")
		stage = filepath.Join(target, stagePrefix+"x")
		must(t, os.MkdirAll(filepath.Join(target, "keep"), 0o755))
		must(t, os.WriteFile(filepath.Join(target, "keep", "secret"), []byte("s"), 0o600))
		must(t, os.MkdirAll(filepath.Join(target, "open"), 0o755))
		must(t, os.MkdirAll(stage, 0o755))
		return home, stage, target
	}
	guard := func(seen *[]string) func(rel string, fi fs.FileInfo) error {
		return func(rel string, fi fs.FileInfo) error {
			*seen = append(*seen, rel)
			if refuse(rel) {
				return domain.PermissionDenied("guarded: " + rel)
			}
			return nil
		}
	}
	for _, tc := range []struct {
		name    string
		entries []tarEntry
	}{
		{"replace it", []tarEntry{{name: "keep/secret", body: "x"}}},
		{"go through it", []tarEntry{{name: "keep/secret/x", body: "x"}}},
		{"link to it", []tarEntry{{name: "open/l", link: "../keep/secret", typ: tar.TypeSymlink}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stage, target := setup(t)
			for _, handles := range []bool{false, true} {
				var seen []string
				host := newHandleHost()
				var sv, tv afero.Fs = newHandleView(stage, host.n), newHandleView(target, host.n)
				if !handles {
					sv, _, _ = confine(afero.NewOsFs(), stage)
					tv, _, _ = confine(afero.NewOsFs(), target)
				}
				x := &extraction{view: sv, target: tv, guardTarget: guard(&seen), limit: 1 << 20, ctx: context.Background()}
				err := x.extract(tarEntries(bytes.NewReader(makeTar(t, tc.entries...)), nil))
				wantErr(t, err, domain.KindPermissionDenied, "guarded: keep")
				if !slices.ContainsFunc(seen, refuse) {
					t.Errorf("seen %v", seen)
				}
			}
		})
	}
	t.Run("the move into place", func(t *testing.T) {
		home, stage, target := setup(t)
		must(t, os.MkdirAll(filepath.Join(stage, "open", "new"), 0o755))
		must(t, os.MkdirAll(filepath.Join(stage, "keep"), 0o755))
		must(t, os.WriteFile(filepath.Join(stage, "keep", "secret"), []byte("x"), 0o644))
		var seen []string
		f := &Files{Fs: newHandleHost(), Home: home}
		err := f.merge(stage, target, guard(&seen))
		wantErr(t, err, domain.KindPermissionDenied, "guarded: keep")
		if b, _ := os.ReadFile(filepath.Join(target, "keep", "secret")); string(b) != "s" {
			t.Errorf("the guarded file was replaced: %q", b)
		}
		if !slices.ContainsFunc(seen, refuse) {
			t.Errorf("seen %v", seen)
		}
	})
}
