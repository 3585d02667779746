package fsys

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// escapeFixture is a root directory with neighbours that must stay
// untouched: a sibling whose name extends the root's, a file and a
// directory next to it, and links inside the root pointing at them.
type escapeFixture struct {
	parent, dir string
	root        *Root
}

func newEscapeFixture(t *testing.T) *escapeFixture {
	t.Helper()
	parent := t.TempDir()
	dir := filepath.Join(parent, "root")
	must(t, os.MkdirAll(filepath.Join(dir, "inside"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "inside", "ok.txt"), []byte("ok"), 0o644))
	must(t, os.MkdirAll(filepath.Join(parent, "root-secret"), 0o755))
	must(t, os.WriteFile(filepath.Join(parent, "root-secret", "s.txt"), []byte("secret"), 0o644))
	must(t, os.WriteFile(filepath.Join(parent, "outside.txt"), []byte("outside"), 0o644))
	must(t, os.MkdirAll(filepath.Join(parent, "outdir"), 0o755))
	must(t, os.WriteFile(filepath.Join(parent, "outdir", "keep.txt"), []byte("keep"), 0o644))
	// Links out: relative, absolute, and a chain of directory links.
	must(t, os.Symlink("../outside.txt", filepath.Join(dir, "rel-link")))
	must(t, os.Symlink(filepath.Join(parent, "outside.txt"), filepath.Join(dir, "abs-link")))
	must(t, os.Symlink("../outdir", filepath.Join(dir, "dir-link")))
	must(t, os.Symlink("hop2", filepath.Join(dir, "hop1")))
	must(t, os.Symlink("inside/../..", filepath.Join(dir, "hop2")))
	// A link that stays inside.
	must(t, os.Symlink("inside/ok.txt", filepath.Join(dir, "good-link")))
	r, err := OpenRoot(dir)
	must(t, err)
	t.Cleanup(func() { r.Close() })
	return &escapeFixture{parent: parent, dir: dir, root: r}
}

// untouched checks that nothing outside the root changed.
func (f *escapeFixture) untouched(t *testing.T) {
	t.Helper()
	for p, want := range map[string]string{
		filepath.Join(f.parent, "outside.txt"):          "outside",
		filepath.Join(f.parent, "root-secret", "s.txt"): "secret",
		filepath.Join(f.parent, "outdir", "keep.txt"):   "keep",
	} {
		b, err := os.ReadFile(p)
		if err != nil || string(b) != want {
			t.Errorf("%s changed: %q, %v", p, b, err)
		}
	}
	entries, _ := os.ReadDir(f.parent)
	if len(entries) != 4 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("parent directory gained entries: %v", names)
	}
	outdir, _ := os.ReadDir(filepath.Join(f.parent, "outdir"))
	if len(outdir) != 1 {
		t.Errorf("outdir gained entries: %d", len(outdir))
	}
}

func TestRootEscapes(t *testing.T) {
	f := newEscapeFixture(t)
	p := func(parts ...string) string { return filepath.Join(append([]string{f.dir}, parts...)...) }
	out := func(parts ...string) string { return filepath.Join(append([]string{f.parent}, parts...)...) }

	paths := map[string]string{
		"dot-dot":                 f.dir + "/../outside.txt",
		"dot-dot deep":            f.dir + "/inside/../../outside.txt",
		"sibling prefix":          out("root-secret", "s.txt"),
		"sibling prefix dir":      out("root-secret"),
		"absolute outside":        "/etc/passwd",
		"parent":                  f.parent,
		"relative symlink out":    p("rel-link"),
		"absolute symlink out":    p("abs-link"),
		"dir symlink out":         p("dir-link", "keep.txt"),
		"symlink chain out":       p("hop1", "outside.txt"),
		"symlink chain into root": p("hop1", "root-secret", "s.txt"),
		"relative name dot-dot":   "../outside.txt",
	}
	for name, target := range paths {
		t.Run(name, func(t *testing.T) {
			if _, err := f.root.Open(target); !escaped(err) {
				t.Errorf("Open: %v", err)
			}
			if _, err := f.root.Stat(target); !escaped(err) {
				t.Errorf("Stat: %v", err)
			}
			w, err := f.root.OpenFile(target, os.O_WRONLY|os.O_TRUNC|os.O_CREATE, 0o644)
			if err == nil {
				w.Close()
			}
			if !escaped(err) {
				t.Errorf("OpenFile for writing: %v", err)
			}
			if err := f.root.MkdirAll(target+"/new", 0o755); !escaped(err) {
				t.Errorf("MkdirAll: %v", err)
			}
			if _, err := afero.TempFile(f.root, target, "tmp-*"); !escaped(err) {
				t.Errorf("TempFile: %v", err)
			}
			if err := afero.WriteFile(f.root, target, []byte("pwned"), 0o644); !escaped(err) {
				t.Errorf("WriteFile: %v", err)
			}
			if err := f.root.Rename(p("inside", "ok.txt"), target+"/moved"); !escaped(err) {
				t.Errorf("Rename out: %v", err)
			}
			if err := f.root.Chmod(target, 0o777); !escaped(err) {
				t.Errorf("Chmod: %v", err)
			}
			if err := f.root.SymlinkIfPossible("x", target+"/link"); !escaped(err) {
				t.Errorf("Symlink: %v", err)
			}
			f.untouched(t)
		})
	}

	t.Run("remove all through a link", func(t *testing.T) {
		if err := f.root.RemoveAll(p("dir-link", "keep.txt")); err == nil {
			t.Errorf("RemoveAll through a link succeeded")
		}
		if err := f.root.Remove(p("dir-link", "keep.txt")); err == nil {
			t.Errorf("Remove through a link succeeded")
		}
		f.untouched(t)
	})

	t.Run("NUL bytes", func(t *testing.T) {
		for _, name := range []string{p("a\x00b"), "\x00", p("inside") + "\x00/../../outside.txt"} {
			if _, err := f.root.Open(name); err == nil {
				t.Errorf("Open(%q) succeeded", name)
			}
			if err := f.root.MkdirAll(name, 0o755); err == nil {
				t.Errorf("MkdirAll(%q) succeeded", name)
			}
		}
		f.untouched(t)
	})

	t.Run("links inside work", func(t *testing.T) {
		b, err := afero.ReadFile(f.root, p("good-link"))
		if err != nil || string(b) != "ok" {
			t.Fatalf("read through inside link: %q, %v", b, err)
		}
		// Lstat of an outward link is fine: the link itself is inside.
		fi, _, err := f.root.LstatIfPossible(p("rel-link"))
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Fatalf("Lstat rel-link: %v, %v", fi, err)
		}
		// Removing an outward link removes only the link.
		must(t, f.root.Remove(p("abs-link")))
		must(t, f.root.RemoveAll(p("dir-link")))
		f.untouched(t)
	})

	t.Run("relative names resolve in the root", func(t *testing.T) {
		b, err := afero.ReadFile(f.root, "inside/ok.txt")
		if err != nil || string(b) != "ok" {
			t.Fatalf("%q, %v", b, err)
		}
	})

	t.Run("errors name the caller's path", func(t *testing.T) {
		_, err := f.root.Open(p("inside", "missing"))
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Path != p("inside", "missing") || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("error %#v", err)
		}
	})
}

func escaped(err error) bool { return errors.Is(err, domain.ErrOutsideRoot) }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
