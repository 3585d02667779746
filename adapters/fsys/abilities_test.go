package fsys

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// TestConfineRefusesLinkChain: the confined views (os.Root) refuse the
// chain of individually harmless links that leads out, whatever the
// extractor's own checks do.
func TestConfineRefusesLinkChain(t *testing.T) {
	parent := t.TempDir()
	box := filepath.Join(parent, "box")
	must(t, os.MkdirAll(filepath.Join(box, "d1", "d2"), 0o755))
	must(t, os.Symlink("..", filepath.Join(box, "d1", "d2", "up")))
	must(t, os.Symlink("d1/d2/up/../..", filepath.Join(box, "l")))
	root, err := OpenRoot(parent)
	must(t, err)
	defer root.Close()
	for name, c := range map[string]ports.Confiner{"os": NewOS(), "root": root} {
		t.Run(name, func(t *testing.T) {
			view, done, err := c.Confine(box)
			must(t, err)
			defer done()
			if _, err := view.Create("l/x"); !errors.Is(err, domain.ErrOutsideRoot) {
				t.Errorf("create through the chain: %v", err)
			}
			if _, err := view.Stat("l"); !errors.Is(err, domain.ErrOutsideRoot) {
				t.Errorf("stat of the chain: %v", err)
			}
			if _, err := os.Lstat(filepath.Join(parent, "x")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("written outside: %v", err)
			}
			// Inside is fine.
			f, err := view.Create("d1/ok")
			must(t, err)
			f.Close()
		})
	}
	t.Run("root view stays inside the root", func(t *testing.T) {
		if _, _, err := root.Confine(filepath.Dir(parent)); !errors.Is(err, domain.ErrOutsideRoot) {
			t.Errorf("confine outside the root: %v", err)
		}
	})
}

// TestOpenRegularNeverBlocks: a FIFO without a writer is refused at once
// (a plain open would wait for a writer forever); a directory and a socket
// too (open(2) fails on a socket with ENXIO, which GET /v1/fs/file and the
// config routes answered 502 "no such device or address").
func TestOpenRegularNeverBlocks(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	must(t, syscall.Mkfifo(fifo, 0o644))
	sock := filepath.Join(dir, "sock")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	must(t, err)
	defer syscall.Close(fd)
	must(t, syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}))
	must(t, os.WriteFile(filepath.Join(dir, "file"), []byte("x"), 0o644))
	root, err := OpenRoot(dir)
	must(t, err)
	defer root.Close()
	for name, o := range map[string]ports.RegularOpener{"os": NewOS(), "root": root} {
		t.Run(name, func(t *testing.T) {
			for _, p := range []string{fifo, dir, sock} {
				if f, err := o.OpenRegular(p); !errors.Is(err, domain.ErrNotRegular) {
					t.Errorf("%s: %v", p, err)
					if f != nil {
						f.Close()
					}
				}
			}
			f, err := o.OpenRegular(filepath.Join(dir, "file"))
			must(t, err)
			f.Close()
			if _, err := o.OpenRegular(filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("missing: %v", err)
			}
		})
	}
}

func TestMemoryDirectoriesHaveSizeZero(t *testing.T) {
	m := NewMemory()
	must(t, m.MkdirAll("/a/b", 0o755))
	must(t, afero.WriteFile(m, "/a/f", []byte("12345"), 0o644))
	fi, err := m.Stat("/a")
	must(t, err)
	if fi.Size() != 0 || !fi.IsDir() {
		t.Errorf("stat /a: size %d", fi.Size())
	}
	infos, err := afero.ReadDir(m, "/a")
	must(t, err)
	for _, fi := range infos {
		want := int64(0)
		if fi.Name() == "f" {
			want = 5
		}
		if fi.Size() != want {
			t.Errorf("%s: size %d, want %d", fi.Name(), fi.Size(), want)
		}
	}
	view, done, err := m.Confine("/a")
	must(t, err)
	defer done()
	if b, err := afero.ReadFile(view, "f"); err != nil || string(b) != "12345" {
		t.Errorf("view: %q %v", b, err)
	}
}

func TestStatfs(t *testing.T) {
	free, total, err := Statfs{}.Space(filepath.Join(t.TempDir(), "not", "yet"))
	if err != nil || free <= 0 || total < free {
		t.Fatalf("free %d total %d err %v", free, total, err)
	}
}

func TestRootNameTooLong(t *testing.T) {
	root, err := OpenRoot(t.TempDir())
	must(t, err)
	defer root.Close()
	long := filepath.Join(root.Dir(), strings.Repeat("n", 300))
	if _, err := root.Create(long); !errors.Is(err, domain.ErrNameTooLong) {
		t.Errorf("create: %v", err)
	}
}

func TestMemoryRenameKeepsFullDirectories(t *testing.T) {
	m := NewMemory()
	must(t, m.MkdirAll("/a", 0o755))
	must(t, m.MkdirAll("/b", 0o755))
	must(t, afero.WriteFile(m, "/b/keep", []byte("x"), 0o644))
	if err := m.Rename("/a", "/b"); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rename over a full directory: %v", err)
	}
	if ok, _ := afero.Exists(m, "/b/keep"); !ok {
		t.Fatal("the directory's file was lost")
	}
	must(t, m.MkdirAll("/c", 0o755))
	must(t, m.Rename("/a", "/c")) // over an empty one: as on the host
}

func TestRootHardLinksStayInside(t *testing.T) {
	parent := t.TempDir()
	must(t, os.WriteFile(filepath.Join(parent, "outside"), []byte("secret"), 0o644))
	box := filepath.Join(parent, "box")
	must(t, os.Mkdir(box, 0o755))
	must(t, os.WriteFile(filepath.Join(box, "in"), []byte("in"), 0o644))
	r, err := OpenRoot(box)
	must(t, err)
	defer r.Close()
	must(t, r.LinkIfPossible("in", "in2"))
	if b, _ := os.ReadFile(filepath.Join(box, "in2")); string(b) != "in" {
		t.Errorf("in2 = %q", b)
	}
	if err := r.LinkIfPossible("../outside", "stolen"); !errors.Is(err, domain.ErrOutsideRoot) {
		t.Errorf("link to outside: %v", err)
	}
}
