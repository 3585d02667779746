package porttest

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"testing"
	"time"

	"github.com/spf13/afero"
)

// NewFS builds a fresh filesystem for one subtest and names an existing,
// empty, writable directory in it (absolute) where the test may work.
type NewFS func(t *testing.T) (fsys afero.Fs, dir string)

// FSContract checks the afero.Fs behaviour the app's files and config use
// cases rely on. Run it against every backend; symlink cases run only when
// the backend implements afero.Linker.
func FSContract(t *testing.T, newFs NewFS) {
	t.Run("write then read back", func(t *testing.T) {
		fsys, dir := newFs(t)
		p := path.Join(dir, "a.txt")
		writeFile(t, fsys, p, "hello")
		if got := readFile(t, fsys, p); got != "hello" {
			t.Fatalf("read %q", got)
		}
		fi, err := fsys.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.IsDir() || fi.Size() != 5 || fi.Name() != "a.txt" || fi.ModTime().IsZero() {
			t.Fatalf("stat: dir=%v size=%d name=%q mtime=%v", fi.IsDir(), fi.Size(), fi.Name(), fi.ModTime())
		}
	})

	t.Run("missing paths are fs.ErrNotExist", func(t *testing.T) {
		fsys, dir := newFs(t)
		p := path.Join(dir, "nope")
		if _, err := fsys.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Stat: %v", err)
		}
		if _, err := fsys.Open(p); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Open: %v", err)
		}
		if err := fsys.Remove(p); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Remove: %v", err)
		}
		if err := fsys.Rename(p, path.Join(dir, "x")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Rename: %v", err)
		}
		if err := fsys.RemoveAll(p); err != nil {
			t.Fatalf("RemoveAll of a missing path: %v", err)
		}
	})

	t.Run("exclusive create fails on an existing file", func(t *testing.T) {
		fsys, dir := newFs(t)
		p := path.Join(dir, "x")
		writeFile(t, fsys, p, "1")
		_, err := fsys.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if !errors.Is(err, fs.ErrExist) {
			t.Fatalf("O_EXCL on existing file: %v", err)
		}
	})

	t.Run("temp files are unique", func(t *testing.T) {
		fsys, dir := newFs(t)
		seen := map[string]bool{}
		for range 20 {
			f, err := afero.TempFile(fsys, dir, ".x-*")
			if err != nil {
				t.Fatal(err)
			}
			if seen[f.Name()] {
				t.Fatalf("duplicate temp name %q", f.Name())
			}
			if path.Dir(f.Name()) != dir {
				t.Fatalf("temp file %q not in %q", f.Name(), dir)
			}
			seen[f.Name()] = true
			f.Close()
		}
	})

	t.Run("mkdir all and read dir", func(t *testing.T) {
		fsys, dir := newFs(t)
		deep := path.Join(dir, "a", "b", "c")
		if err := fsys.MkdirAll(deep, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fsys.MkdirAll(deep, 0o755); err != nil {
			t.Fatalf("MkdirAll again: %v", err)
		}
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("MkdirAll of the existing work dir: %v", err)
		}
		writeFile(t, fsys, path.Join(dir, "a", "f.txt"), "12345")
		f, err := fsys.Open(path.Join(dir, "a"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		infos, err := f.Readdir(-1)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, fi := range infos {
			kind := "file"
			if fi.IsDir() {
				kind = "dir"
			}
			got[fi.Name()] = kind
			if fi.Name() == "f.txt" && fi.Size() != 5 {
				t.Errorf("size of f.txt = %d", fi.Size())
			}
		}
		if len(got) != 2 || got["b"] != "dir" || got["f.txt"] != "file" {
			t.Fatalf("Readdir = %v", got)
		}
		fi, err := fsys.Stat(deep)
		if err != nil || !fi.IsDir() {
			t.Fatalf("Stat deep dir: %v, %v", fi, err)
		}
	})

	t.Run("rename replaces an existing file", func(t *testing.T) {
		fsys, dir := newFs(t)
		a, b := path.Join(dir, "a"), path.Join(dir, "b")
		writeFile(t, fsys, a, "new")
		writeFile(t, fsys, b, "old")
		if err := fsys.Rename(a, b); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, fsys, b); got != "new" {
			t.Fatalf("after rename: %q", got)
		}
		if _, err := fsys.Stat(a); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("source still there: %v", err)
		}
	})

	t.Run("rename moves a directory tree", func(t *testing.T) {
		fsys, dir := newFs(t)
		src := path.Join(dir, "src")
		writeFile(t, fsys, path.Join(src, "sub", "f"), "x")
		dst := path.Join(dir, "dst")
		if err := fsys.Rename(src, dst); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, fsys, path.Join(dst, "sub", "f")); got != "x" {
			t.Fatalf("moved file: %q", got)
		}
		if _, err := fsys.Stat(path.Join(src, "sub", "f")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("old child still there: %v", err)
		}
	})

	t.Run("remove and remove all", func(t *testing.T) {
		fsys, dir := newFs(t)
		f := path.Join(dir, "f")
		writeFile(t, fsys, f, "x")
		if err := fsys.Remove(f); err != nil {
			t.Fatal(err)
		}
		empty := path.Join(dir, "empty")
		if err := fsys.Mkdir(empty, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Remove(empty); err != nil {
			t.Fatalf("Remove empty dir: %v", err)
		}
		tree := path.Join(dir, "tree")
		writeFile(t, fsys, path.Join(tree, "a", "b"), "x")
		if err := fsys.RemoveAll(tree); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{f, empty, tree, path.Join(tree, "a", "b")} {
			if _, err := fsys.Stat(p); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s still there: %v", p, err)
			}
		}
	})

	t.Run("seek and partial reads", func(t *testing.T) {
		fsys, dir := newFs(t)
		p := path.Join(dir, "r")
		writeFile(t, fsys, p, "0123456789")
		f, err := fsys.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Seek(3, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(f, buf); err != nil || string(buf) != "3456" {
			t.Fatalf("read %q, %v", buf, err)
		}
		end, err := f.Seek(0, io.SeekEnd)
		if err != nil || end != 10 {
			t.Fatalf("seek end = %d, %v", end, err)
		}
	})

	t.Run("chmod and chtimes", func(t *testing.T) {
		fsys, dir := newFs(t)
		p := path.Join(dir, "m")
		writeFile(t, fsys, p, "x")
		if err := fsys.Chmod(p, 0o640); err != nil {
			t.Fatal(err)
		}
		when := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
		if err := fsys.Chtimes(p, when, when); err != nil {
			t.Fatal(err)
		}
		fi, err := fsys.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o640 {
			t.Errorf("mode = %v", fi.Mode())
		}
		if !fi.ModTime().Equal(when) {
			t.Errorf("mtime = %v", fi.ModTime())
		}
	})

	t.Run("lstat", func(t *testing.T) {
		fsys, dir := newFs(t)
		l, ok := fsys.(afero.Lstater)
		if !ok {
			t.Skip("backend has no Lstat")
		}
		p := path.Join(dir, "f")
		writeFile(t, fsys, p, "x")
		fi, _, err := l.LstatIfPossible(p)
		if err != nil || fi.IsDir() || fi.Size() != 1 {
			t.Fatalf("Lstat file: %v, %v", fi, err)
		}
		if _, _, err := l.LstatIfPossible(path.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Lstat missing: %v", err)
		}
	})

	t.Run("symbolic links", func(t *testing.T) {
		fsys, dir := newFs(t)
		sl, ok := fsys.(afero.Symlinker)
		if !ok {
			t.Skip("backend has no symbolic links")
		}
		writeFile(t, fsys, path.Join(dir, "d", "target"), "data")
		link := path.Join(dir, "d", "link")
		if err := sl.SymlinkIfPossible("target", link); err != nil {
			t.Fatal(err)
		}
		fi, lstatCalled, err := sl.LstatIfPossible(link)
		if err != nil || !lstatCalled || fi.Mode()&fs.ModeSymlink == 0 {
			t.Fatalf("Lstat link: mode=%v lstat=%v err=%v", fi, lstatCalled, err)
		}
		if fi, err := fsys.Stat(link); err != nil || fi.Mode()&fs.ModeSymlink != 0 || fi.Size() != 4 {
			t.Fatalf("Stat follows the link: %v, %v", fi, err)
		}
		if got, err := sl.ReadlinkIfPossible(link); err != nil || got != "target" {
			t.Fatalf("Readlink = %q, %v", got, err)
		}
		if got := readFile(t, fsys, link); got != "data" {
			t.Fatalf("read through link: %q", got)
		}
		// Listings do not follow links.
		f, err := fsys.Open(path.Join(dir, "d"))
		if err != nil {
			t.Fatal(err)
		}
		infos, err := f.Readdir(-1)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		sort.Slice(infos, func(i, j int) bool { return infos[i].Name() < infos[j].Name() })
		if len(infos) != 2 || infos[0].Name() != "link" || infos[0].Mode()&fs.ModeSymlink == 0 {
			t.Fatalf("Readdir does not lstat: %v", infos)
		}
		// Removing a link leaves its target.
		if err := fsys.Remove(link); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, fsys, path.Join(dir, "d", "target")); got != "data" {
			t.Fatalf("target after removing link: %q", got)
		}
	})
}

func writeFile(t *testing.T, fsys afero.Fs, p, content string) {
	t.Helper()
	if err := fsys.MkdirAll(path.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := afero.WriteFile(fsys, p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, fsys afero.Fs, p string) string {
	t.Helper()
	b, err := afero.ReadFile(fsys, p)
	if err != nil {
		t.Fatal(err)
	}
	return string(bytes.Clone(b))
}
