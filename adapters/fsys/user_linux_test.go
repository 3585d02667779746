package fsys

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/ports"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// nobody is an unprivileged uid and gid every Linux has.
const nobody = 65534

// userDir is a directory the test user may write in (mode 0777 under a
// traversable parent), and a root-only one beside it.
func userDirs(t *testing.T) (open, rootOnly string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("acting as another user needs root (CI runs the tests as root)")
	}
	base := t.TempDir()
	// t.TempDir's directories are 0700: let the user through.
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	open, rootOnly = filepath.Join(base, "open"), filepath.Join(base, "root")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	if err := os.Mkdir(rootOnly, 0o755); err != nil {
		t.Fatal(err)
	}
	return open, rootOnly
}

func owner(t *testing.T, p string) (int, int) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return int(st.Uid), int(st.Gid)
}

// What the API writes through a User filesystem belongs to the user, and
// what the user could not write fails.
func TestUserWritesAsTheUser(t *testing.T) {
	open, rootOnly := userDirs(t)
	u := AsUser(NewOS(), nobody, nobody, []uint32{nobody})
	dir := filepath.Join(open, "a", "b")
	if err := u.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "f")
	if err := ports.WriteAtomic(u, file, ".tmp-*", 0o644, func(w io.Writer) error { _, err := w.Write([]byte("x")); return err }, nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(open, "a"), dir, file} {
		if uid, gid := owner(t, p); uid != nobody || gid != nobody {
			t.Errorf("%s owned by %d:%d, want %d:%d", p, uid, gid, nobody, nobody)
		}
	}
	// The user cannot write into a root-only directory, nor through a
	// link of its own leading there.
	if _, err := u.Create(filepath.Join(rootOnly, "x")); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("create in a root-only directory: %v, want permission denied", err)
	}
	link := filepath.Join(open, "escape")
	if err := os.Symlink(rootOnly, link); err != nil {
		t.Fatal(err)
	}
	if err := u.Mkdir(filepath.Join(link, "x"), 0o755); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("mkdir through a link: %v, want permission denied", err)
	}
	if ents, _ := os.ReadDir(rootOnly); len(ents) != 0 {
		t.Errorf("the root-only directory got %v", ents)
	}
	// Reads stay the daemon's.
	if _, err := u.Open(rootOnly); err != nil {
		t.Errorf("open: %v", err)
	}

	// A confined view (archive extraction) writes as the user too.
	view, closeView, err := u.(ports.Confiner).Confine(open)
	if err != nil {
		t.Fatal(err)
	}
	defer closeView()
	f, err := view.Create("extracted")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := view.Mkdir("d", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"extracted", "d"} {
		if uid, _ := owner(t, filepath.Join(open, p)); uid != nobody {
			t.Errorf("%s in the view owned by %d", p, uid)
		}
	}

	// The daemon's own threads keep their credentials.
	g, err := os.Create(filepath.Join(rootOnly, "daemon"))
	if err != nil {
		t.Fatalf("the daemon cannot write as root any more: %v", err)
	}
	g.Close()
	if uid, _ := owner(t, g.Name()); uid != 0 {
		t.Errorf("the daemon's file is owned by %d", uid)
	}
}

// A User filesystem is a filesystem like the others, on the host and
// confined (in a directory the user may write).
func TestContractUser(t *testing.T) {
	backends := map[string]porttest.NewFS{
		"os": func(t *testing.T) (afero.Fs, string) {
			open, _ := userDirs(t)
			return AsUser(NewOS(), nobody, nobody, nil), open
		},
		"root": func(t *testing.T) (afero.Fs, string) {
			open, _ := userDirs(t)
			r, err := OpenRoot(open)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			return AsUser(r, nobody, nobody, nil), r.Dir()
		},
	}
	for name, newFs := range backends {
		t.Run(name, func(t *testing.T) { porttest.FSContract(t, newFs) })
		t.Run(name+"/confiner", func(t *testing.T) { porttest.ConfinerContract(t, newFs) })
		t.Run(name+"/regular opener", func(t *testing.T) { porttest.RegularOpenerContract(t, newFs) })
	}
}
