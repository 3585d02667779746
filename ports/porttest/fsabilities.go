package porttest

import (
	"errors"
	"io/fs"
	"path"
	"testing"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// FakeDiskSpace is a ports.DiskSpace answering from SpaceFunc.
type FakeDiskSpace struct {
	SpaceFunc func(path string) (free, total int64, err error)
}

var _ ports.DiskSpace = (*FakeDiskSpace)(nil)

// Space implements ports.DiskSpace.
func (f *FakeDiskSpace) Space(path string) (int64, int64, error) { return f.SpaceFunc(path) }

// DiskSpaceContract checks a DiskSpace: it answers for a path that does
// not exist yet (its nearest existing parent), with free space no larger
// than the filesystem.
func DiskSpaceContract(t *testing.T, d ports.DiskSpace, dir string) {
	free, total, err := d.Space(path.Join(dir, "not", "yet"))
	if err != nil || free < 0 || total <= 0 || free > total {
		t.Fatalf("Space: free %d total %d err %v", free, total, err)
	}
}

// ConfinerContract checks a backend's confined views: names are relative
// to the directory, nothing reaches outside it (a "..", or a chain of
// links when the backend has links), and what is written through the view
// is in the directory.
func ConfinerContract(t *testing.T, newFs NewFS) {
	t.Run("views are relative and confined", func(t *testing.T) {
		fsys, dir := newFs(t)
		c, ok := fsys.(ports.Confiner)
		if !ok {
			t.Fatalf("%T is not a ports.Confiner", fsys)
		}
		box := path.Join(dir, "box")
		if err := fsys.MkdirAll(path.Join(box, "d1", "d2"), 0o755); err != nil {
			t.Fatal(err)
		}
		view, done, err := c.Confine(box)
		if err != nil {
			t.Fatal(err)
		}
		defer done()
		writeFile(t, view, "d1/in.txt", "in")
		if got := readFile(t, fsys, path.Join(box, "d1", "in.txt")); got != "in" {
			t.Fatalf("through the view: %q", got)
		}
		if _, err := view.Create("../out.txt"); err == nil {
			t.Fatal("created ../out.txt through the view")
		}
		if _, err := fsys.Stat(path.Join(dir, "out.txt")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("out.txt exists: %v", err)
		}
		l, links := fsys.(afero.Linker)
		if !links {
			return
		}
		// Each link is harmless alone; together they lead above box.
		if err := l.SymlinkIfPossible("..", path.Join(box, "d1", "d2", "up")); err != nil {
			if errors.Is(err, afero.ErrNoSymlink) {
				return
			}
			t.Fatal(err)
		}
		if err := l.SymlinkIfPossible("d1/d2/up/../..", path.Join(box, "l")); err != nil {
			t.Fatal(err)
		}
		if _, err := view.Create("l/x"); !errors.Is(err, domain.ErrOutsideRoot) {
			t.Fatalf("create through the link chain: %v", err)
		}
		if _, err := fsys.Stat(path.Join(dir, "x")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("written outside through the chain: %v", err)
		}
	})
}

// ConfinerSubviewContract checks, for a backend whose views are Confiners
// themselves (ports.Confiner's second paragraph), that a view confined to
// one of its subdirectories by a relative name sees that directory, writes
// into it, and reaches nothing above it, not even the rest of the view.
func ConfinerSubviewContract(t *testing.T, newFs NewFS) {
	fsys, dir := newFs(t)
	box := path.Join(dir, "box")
	if err := fsys.MkdirAll(path.Join(box, "d1", "d2"), 0o755); err != nil {
		t.Fatal(err)
	}
	view, done, err := fsys.(ports.Confiner).Confine(box)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	c, ok := view.(ports.Confiner)
	if !ok {
		t.Fatalf("the view %T is not a ports.Confiner", view)
	}
	sub, subDone, err := c.Confine("d1")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, sub, "in.txt", "in")
	if got := readFile(t, fsys, path.Join(box, "d1", "in.txt")); got != "in" {
		t.Fatalf("through the subview: %q", got)
	}
	deeper, deeperDone, err := sub.(ports.Confiner).Confine("d2")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, deeper, "deep.txt", "deep")
	if got := readFile(t, fsys, path.Join(box, "d1", "d2", "deep.txt")); got != "deep" {
		t.Fatalf("through the subview's subview: %q", got)
	}
	if err := deeperDone(); err != nil {
		t.Fatal(err)
	}
	// Closing one handle leaves the others working.
	writeFile(t, sub, "after.txt", "after")
	if _, err := sub.Create("../up.txt"); err == nil {
		t.Fatal("created ../up.txt through the subview")
	}
	if _, err := fsys.Stat(path.Join(box, "up.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("up.txt exists: %v", err)
	}
	if _, _, err := c.Confine("../.."); err == nil {
		t.Fatal("confined a view above itself")
	}
	if err := subDone(); err != nil {
		t.Fatal(err)
	}
}

// DirRenamerContract checks RenameFrom on two views of a backend whose
// views are DirRenamers: an entry moves between them by its own name,
// replaces a file, is never followed (a link moves as a link), and names
// of more than one element are refused.
func DirRenamerContract(t *testing.T, newFs NewFS) {
	fsys, dir := newFs(t)
	for _, d := range []string{"a/deep/er", "b/deep/er"} {
		if err := fsys.MkdirAll(path.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	view := func(p string) afero.Fs {
		top, done, err := fsys.(ports.Confiner).Confine(path.Join(dir, path.Dir(p)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { done() })
		v, done2, err := top.(ports.Confiner).Confine(path.Base(p))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { done2() })
		return v
	}
	a, b := view("a/deep/er"), view("b/deep/er")
	r, ok := b.(ports.DirRenamer)
	if !ok {
		t.Fatalf("the view %T is not a ports.DirRenamer", b)
	}
	writeFile(t, a, "f", "moved")
	writeFile(t, b, "g", "old")
	if err := r.RenameFrom(a, "f", "g"); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, fsys, path.Join(dir, "b/deep/er/g")); got != "moved" {
		t.Fatalf("after the move: %q", got)
	}
	if _, err := fsys.Stat(path.Join(dir, "a/deep/er/f")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the source is still there: %v", err)
	}
	if err := a.MkdirAll("sub/x", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.RenameFrom(a, "sub/x", "x"); err == nil {
		t.Fatal("a two-element name was taken")
	}
	if err := r.RenameFrom(a, "sub", ".."); err == nil {
		t.Fatal(`".." was taken as a name`)
	}
	if err := r.RenameFrom(a, "sub", "sub"); err != nil {
		t.Fatal(err)
	}
	if fi, err := fsys.Stat(path.Join(dir, "b/deep/er/sub/x")); err != nil || !fi.IsDir() {
		t.Fatalf("the directory moved with its contents: %v", err)
	}
	if l, ok := a.(afero.Linker); ok {
		if err := l.SymlinkIfPossible("../../../outside", "l"); err == nil {
			if err := r.RenameFrom(a, "l", "l"); err != nil {
				t.Fatal(err)
			}
			lr, _ := b.(afero.LinkReader)
			if target, err := lr.ReadlinkIfPossible("l"); err != nil || target != "../../../outside" {
				t.Fatalf("the link moved as %q, %v", target, err)
			}
		}
	}
}

// RegularOpenerContract checks OpenRegular: a regular file opens, a
// directory is domain.ErrNotRegular, a missing file fs.ErrNotExist. (FIFOs
// need the host; the adapters test them.)
func RegularOpenerContract(t *testing.T, newFs NewFS) {
	fsys, dir := newFs(t)
	o, ok := fsys.(ports.RegularOpener)
	if !ok {
		t.Fatalf("%T is not a ports.RegularOpener", fsys)
	}
	p := path.Join(dir, "f.txt")
	writeFile(t, fsys, p, "x")
	f, err := o.OpenRegular(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := o.OpenRegular(dir); !errors.Is(err, domain.ErrNotRegular) {
		t.Fatalf("directory: %v", err)
	}
	if _, err := o.OpenRegular(path.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
}
