package fsys

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/afero"
	"golang.org/x/sys/unix"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// Root is the host filesystem confined to one directory (--fs-root). It
// takes the same absolute host paths as the unconfined backend, so the API
// shows real paths, but every operation goes through an os.Root: a path
// outside the directory, a ".." above it, or a symbolic link (or a chain of
// them) leading out fails with domain.ErrOutsideRoot, and nothing outside
// is read or written. Symbolic links inside the root must be relative, as
// os.Root requires.
//
// Relative names are taken relative to the root directory.
type Root struct {
	dir  string
	root *os.Root
}

var (
	_ afero.Fs            = (*Root)(nil)
	_ afero.Symlinker     = (*Root)(nil)
	_ ports.Confiner      = (*Root)(nil)
	_ ports.RegularOpener = (*Root)(nil)
	_ ports.HardLinker    = (*Root)(nil)
	_ ports.DirRenamer    = (*Root)(nil)
)

// OpenRoot confines a filesystem to dir, which must exist. Close releases
// the directory handle.
func OpenRoot(dir string) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fs root %q: %w", dir, err)
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("fs root: %w", err)
	}
	return &Root{dir: filepath.Clean(abs), root: r}, nil
}

// Dir is the confining directory, absolute and clean.
func (r *Root) Dir() string { return r.dir }

// Close releases the root directory handle.
func (r *Root) Close() error { return r.root.Close() }

// rel maps a host path to a name inside the root, or fails with
// ErrOutsideRoot. The check is on whole path elements, so a sibling such
// as <root>-secret is outside.
func (r *Root) rel(op, name string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if !filepath.IsAbs(name) {
		// A relative name cleans to the same result alone as joined to
		// the (clean, absolute) root directory, without copying the
		// root's path on every call: a view deep in a tree has a long one,
		// and the extractor works through such views one name at a time.
		rel := filepath.Clean(name)
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return "", &fs.PathError{Op: op, Path: name, Err: domain.ErrOutsideRoot}
		}
		return rel, nil
	}
	rel, ok := domain.RootRelative(r.dir, filepath.Clean(name))
	if !ok {
		return "", &fs.PathError{Op: op, Path: name, Err: domain.ErrOutsideRoot}
	}
	return rel, nil
}

// errPathEscapes is the text of os.Root's unexported escape error; escape
// errors are translated to domain.ErrOutsideRoot (a test pins the text).
const errPathEscapes = "path escapes from parent"

// fix translates os.Root errors: escapes (however deeply os.Root nests
// them) become domain.ErrOutsideRoot, and paths are shown as the caller
// named them, not relative to the root.
func (r *Root) fix(name string, err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		out := &fs.PathError{Op: pe.Op, Path: name, Err: pe.Err}
		if isEscape(pe.Err) {
			out.Err = domain.ErrOutsideRoot
		}
		if errors.Is(pe.Err, syscall.ENAMETOOLONG) {
			out.Err = domain.ErrNameTooLong
		}
		return out
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		out := &os.LinkError{Op: le.Op, Old: le.Old, New: name, Err: le.Err}
		if isEscape(le.Err) {
			out.Err = domain.ErrOutsideRoot
		}
		return out
	}
	if isEscape(err) {
		return &fs.PathError{Op: "open", Path: name, Err: domain.ErrOutsideRoot}
	}
	return err
}

// isEscape reports whether err's innermost cause is os.Root's escape error.
func isEscape(err error) bool {
	for err != nil {
		if err.Error() == errPathEscapes {
			return true
		}
		err = errors.Unwrap(err)
	}
	return false
}

// file wraps *os.File so that Name reports the host path the caller used.
type file struct {
	*os.File
	name string
}

func (f *file) Name() string { return f.name }

func (r *Root) wrap(name string, f *os.File, err error) (afero.File, error) {
	if err != nil {
		return nil, r.fix(name, err)
	}
	return &file{File: f, name: name}, nil
}

// Confine implements ports.Confiner: the view is an os.Root opened inside
// this one, so it is confined to dir and, through it, to this root. A
// relative dir is taken from this root; confining a view to one of its
// own subdirectories by name costs one open, however deep the view is.
func (r *Root) Confine(dir string) (afero.Fs, func() error, error) {
	rel, err := r.rel("open", dir)
	if err != nil {
		return nil, nil, err
	}
	sub, err := r.root.OpenRoot(rel)
	if err != nil {
		return nil, nil, r.fix(dir, err)
	}
	v := &Root{dir: filepath.Join(r.dir, rel), root: sub}
	return v, v.Close, nil
}

// LinkIfPossible implements ports.HardLinker: both names inside the root.
func (r *Root) LinkIfPossible(oldname, newname string) error {
	oldRel, err := r.rel("link", oldname)
	if err != nil {
		return err
	}
	newRel, err := r.rel("link", newname)
	if err != nil {
		return err
	}
	return r.fixLink(oldname, newname, newname, r.root.Link(oldRel, newRel))
}

// RenameFrom implements ports.DirRenamer with renameat(2) between the two
// roots' directories: each name is one element, so nothing is resolved
// but the two entries themselves (a rename never follows its last
// element), and each directory is a handle os.Root opened inside its
// root.
func (r *Root) RenameFrom(from afero.Fs, oldname, newname string) error {
	src, ok := from.(*Root)
	if !ok {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fmt.Errorf("%T is not a view of this filesystem", from)}
	}
	for _, name := range []string{oldname, newname} {
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
			return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrInvalid}
		}
	}
	sd, err := src.root.Open(".")
	if err != nil {
		return src.fix(oldname, err)
	}
	defer sd.Close()
	dd, err := r.root.Open(".")
	if err != nil {
		return r.fix(newname, err)
	}
	defer dd.Close()
	if err := ignoringEINTR(func() error { return unix.Renameat(int(sd.Fd()), oldname, int(dd.Fd()), newname) }); err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	return nil
}

func ignoringEINTR(f func() error) error {
	for {
		if err := f(); err != unix.EINTR {
			return err
		}
	}
}

// OpenRegular implements ports.RegularOpener.
func (r *Root) OpenRegular(name string) (afero.File, error) {
	rel, err := r.rel("open", name)
	if err != nil {
		return nil, err
	}
	f, err := r.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	af, err := r.wrap(name, f, err)
	if err != nil {
		return nil, openFailed(name, err)
	}
	return regularOnly(name, af)
}

// Name implements afero.Fs.
func (r *Root) Name() string { return "RootFs" }

// Create implements afero.Fs.
func (r *Root) Create(name string) (afero.File, error) {
	rel, err := r.rel("open", name)
	if err != nil {
		return nil, err
	}
	f, err := r.root.Create(rel)
	return r.wrap(name, f, err)
}

// Open implements afero.Fs.
func (r *Root) Open(name string) (afero.File, error) {
	rel, err := r.rel("open", name)
	if err != nil {
		return nil, err
	}
	f, err := r.root.Open(rel)
	return r.wrap(name, f, err)
}

// OpenFile implements afero.Fs.
func (r *Root) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	rel, err := r.rel("open", name)
	if err != nil {
		return nil, err
	}
	f, err := r.root.OpenFile(rel, flag, perm)
	return r.wrap(name, f, err)
}

// Mkdir implements afero.Fs.
func (r *Root) Mkdir(name string, perm os.FileMode) error {
	rel, err := r.rel("mkdir", name)
	if err != nil {
		return err
	}
	return r.fix(name, r.root.Mkdir(rel, perm))
}

// MkdirAll implements afero.Fs.
func (r *Root) MkdirAll(name string, perm os.FileMode) error {
	rel, err := r.rel("mkdir", name)
	if err != nil {
		return err
	}
	if rel == "." {
		return nil
	}
	return r.fix(name, r.root.MkdirAll(rel, perm))
}

// Remove implements afero.Fs.
func (r *Root) Remove(name string) error {
	rel, err := r.rel("remove", name)
	if err != nil {
		return err
	}
	return r.fix(name, r.root.Remove(rel))
}

// RemoveAll implements afero.Fs.
func (r *Root) RemoveAll(name string) error {
	rel, err := r.rel("remove", name)
	if err != nil {
		return err
	}
	return r.fix(name, r.root.RemoveAll(rel))
}

// Rename implements afero.Fs.
func (r *Root) Rename(oldname, newname string) error {
	oldRel, err := r.rel("rename", oldname)
	if err != nil {
		return err
	}
	newRel, err := r.rel("rename", newname)
	if err != nil {
		return err
	}
	return r.fixLink(oldname, newname, oldname, r.root.Rename(oldRel, newRel))
}

// Stat implements afero.Fs; it follows symbolic links (inside the root).
func (r *Root) Stat(name string) (os.FileInfo, error) {
	rel, err := r.rel("stat", name)
	if err != nil {
		return nil, err
	}
	fi, err := r.root.Stat(rel)
	return fi, r.fix(name, err)
}

// LstatIfPossible implements afero.Lstater.
func (r *Root) LstatIfPossible(name string) (os.FileInfo, bool, error) {
	rel, err := r.rel("lstat", name)
	if err != nil {
		return nil, true, err
	}
	fi, err := r.root.Lstat(rel)
	return fi, true, r.fix(name, err)
}

// SymlinkIfPossible implements afero.Linker. The link's text is stored as
// given; following it later is confined like any other path.
func (r *Root) SymlinkIfPossible(oldname, newname string) error {
	rel, err := r.rel("symlink", newname)
	if err != nil {
		return err
	}
	return r.fixLink(oldname, newname, newname, r.root.Symlink(oldname, rel))
}

// fixLink gives a two-name error the names the caller used (not the
// root-relative ones) and reports an escape as domain.ErrOutsideRoot; any
// other error goes through fix for name.
func (r *Root) fixLink(oldname, newname, name string, err error) error {
	if err == nil {
		return nil
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		out := &os.LinkError{Op: le.Op, Old: oldname, New: newname, Err: le.Err}
		if isEscape(le.Err) {
			out.Err = domain.ErrOutsideRoot
		}
		return out
	}
	return r.fix(name, err)
}

// ReadlinkIfPossible implements afero.LinkReader.
func (r *Root) ReadlinkIfPossible(name string) (string, error) {
	rel, err := r.rel("readlink", name)
	if err != nil {
		return "", err
	}
	s, err := r.root.Readlink(rel)
	return s, r.fix(name, err)
}

// Chmod implements afero.Fs.
func (r *Root) Chmod(name string, mode os.FileMode) error {
	rel, err := r.rel("chmod", name)
	if err != nil {
		return err
	}
	return r.fix(name, r.root.Chmod(rel, mode))
}

// Chown implements afero.Fs.
func (r *Root) Chown(name string, uid, gid int) error {
	rel, err := r.rel("chown", name)
	if err != nil {
		return err
	}
	return r.fix(name, r.root.Chown(rel, uid, gid))
}

// Chtimes implements afero.Fs.
func (r *Root) Chtimes(name string, atime, mtime time.Time) error {
	rel, err := r.rel("chtimes", name)
	if err != nil {
		return err
	}
	return r.fix(name, r.root.Chtimes(rel, atime, mtime))
}
