package fsys

import (
	"errors"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// User is a host filesystem whose writes are made as another user (the
// daemon's --run-as): creating, writing, renaming, linking and removing
// run on an OS thread whose filesystem uid and gid (setfsuid, setfsgid)
// and supplementary groups are that user's, for the one call. So what the
// API creates belongs to the user, as if the user had made it, and the
// kernel checks every write as the user's: a write the user could not make
// (into a root-only directory, or through a symbolic link the user planted
// that leads there) fails with permission denied instead of being made
// with the daemon's rights. Reads stay the daemon's.
//
// Why not chown afterwards: a chown by name follows whatever the path
// holds by then, and the user's own processes can swap a directory of
// theirs for a link to /etc in between; a write made as the user needs no
// second step to race.
//
// The credentials are those of one thread only (raw system calls; Go's
// own Setfsuid would change every thread). The thread is locked to the
// call's goroutine and its credentials restored after; were that to fail,
// the goroutine ends still locked and the runtime ends the thread. The
// runtime creates new threads from a clean template thread when the
// creating one is locked, so no other thread inherits them.
type User struct {
	fs     afero.Fs
	uid    int
	gid    int
	groups []uint32
}

var (
	_ afero.Fs            = (*User)(nil)
	_ afero.Symlinker     = (*User)(nil)
	_ ports.Confiner      = (*User)(nil)
	_ ports.RegularOpener = (*User)(nil)
	_ ports.HardLinker    = (*User)(nil)
)

// AsUser returns fs with its writes made as uid, gid and groups. fs is a
// host backend (NewOS, OpenRoot). The daemon must be root.
func AsUser(fs afero.Fs, uid, gid uint32, groups []uint32) afero.Fs {
	return &User{fs: fs, uid: int(uid), gid: int(gid), groups: groups}
}

// as runs f on a locked thread with the user's filesystem credentials.
func (u *User) as(f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restore, err := u.become()
		if err != nil {
			if restore != nil && restore() != nil {
				done <- err
				return // still locked: the runtime ends this thread
			}
			runtime.UnlockOSThread()
			done <- err
			return
		}
		err = f()
		if restore() != nil {
			done <- err
			return // still locked: the runtime ends this thread
		}
		runtime.UnlockOSThread()
		done <- err
	}()
	return <-done
}

// become switches this thread to the user's groups, fsgid and fsuid, and
// returns how to switch back.
func (u *User) become() (func() error, error) {
	saved := make([]uint32, 256)
	n, _, e := syscall.RawSyscall(syscall.SYS_GETGROUPS, uintptr(len(saved)), uintptr(unsafe.Pointer(&saved[0])), 0)
	if e != 0 {
		return nil, os.NewSyscallError("getgroups", e)
	}
	saved = saved[:n]
	oldGID, _, _ := syscall.RawSyscall(syscall.SYS_SETFSGID, ^uintptr(0), 0, 0)
	oldUID, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, ^uintptr(0), 0, 0)
	restore := func() error {
		syscall.RawSyscall(syscall.SYS_SETFSUID, oldUID, 0, 0)
		syscall.RawSyscall(syscall.SYS_SETFSGID, oldGID, 0, 0)
		if err := setThreadGroups(saved); err != nil {
			return err
		}
		if fsid(syscall.SYS_SETFSUID) != int(oldUID) || fsid(syscall.SYS_SETFSGID) != int(oldGID) {
			return errors.New("could not restore the thread's credentials")
		}
		return nil
	}
	if err := setThreadGroups(u.groups); err != nil {
		return restore, err
	}
	syscall.RawSyscall(syscall.SYS_SETFSGID, uintptr(u.gid), 0, 0)
	syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(u.uid), 0, 0)
	// setfs[ug]id report no error; read them back.
	if fsid(syscall.SYS_SETFSUID) != u.uid || fsid(syscall.SYS_SETFSGID) != u.gid {
		return restore, errors.New("cannot act as the user: setfsuid refused (is the daemon root?)")
	}
	return restore, nil
}

// fsid reads the thread's fsuid or fsgid (setfs[ug]id(-1) changes nothing
// and returns the current one).
func fsid(trap uintptr) int {
	v, _, _ := syscall.RawSyscall(trap, ^uintptr(0), 0, 0)
	return int(v)
}

func setThreadGroups(groups []uint32) error {
	var p unsafe.Pointer
	if len(groups) > 0 {
		p = unsafe.Pointer(&groups[0])
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETGROUPS, uintptr(len(groups)), uintptr(p), 0); e != 0 {
		return os.NewSyscallError("setgroups", e)
	}
	return nil
}

func (u *User) file(f func() (afero.File, error)) (afero.File, error) {
	var out afero.File
	err := u.as(func() error {
		var err error
		out, err = f()
		return err
	})
	return out, err
}

// Name implements afero.Fs.
func (u *User) Name() string { return u.fs.Name() }

// Create implements afero.Fs.
func (u *User) Create(name string) (afero.File, error) {
	return u.file(func() (afero.File, error) { return u.fs.Create(name) })
}

// OpenFile implements afero.Fs: as the user when it may write or create.
func (u *User) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) == 0 {
		return u.fs.OpenFile(name, flag, perm)
	}
	return u.file(func() (afero.File, error) { return u.fs.OpenFile(name, flag, perm) })
}

// Open implements afero.Fs.
func (u *User) Open(name string) (afero.File, error) { return u.fs.Open(name) }

// Stat implements afero.Fs.
func (u *User) Stat(name string) (os.FileInfo, error) { return u.fs.Stat(name) }

// Mkdir implements afero.Fs.
func (u *User) Mkdir(name string, perm os.FileMode) error {
	return u.as(func() error { return u.fs.Mkdir(name, perm) })
}

// MkdirAll implements afero.Fs.
func (u *User) MkdirAll(name string, perm os.FileMode) error {
	return u.as(func() error { return u.fs.MkdirAll(name, perm) })
}

// Remove implements afero.Fs.
func (u *User) Remove(name string) error { return u.as(func() error { return u.fs.Remove(name) }) }

// RemoveAll implements afero.Fs.
func (u *User) RemoveAll(name string) error {
	return u.as(func() error { return u.fs.RemoveAll(name) })
}

// Rename implements afero.Fs.
func (u *User) Rename(oldname, newname string) error {
	return u.as(func() error { return u.fs.Rename(oldname, newname) })
}

// Chmod implements afero.Fs.
func (u *User) Chmod(name string, mode os.FileMode) error {
	return u.as(func() error { return u.fs.Chmod(name, mode) })
}

// Chown implements afero.Fs.
func (u *User) Chown(name string, uid, gid int) error {
	return u.as(func() error { return u.fs.Chown(name, uid, gid) })
}

// Chtimes implements afero.Fs.
func (u *User) Chtimes(name string, atime, mtime time.Time) error {
	return u.as(func() error { return u.fs.Chtimes(name, atime, mtime) })
}

// LstatIfPossible implements afero.Lstater.
func (u *User) LstatIfPossible(name string) (os.FileInfo, bool, error) {
	if l, ok := u.fs.(afero.Lstater); ok {
		return l.LstatIfPossible(name)
	}
	fi, err := u.fs.Stat(name)
	return fi, false, err
}

// SymlinkIfPossible implements afero.Linker.
func (u *User) SymlinkIfPossible(oldname, newname string) error {
	l, ok := u.fs.(afero.Linker)
	if !ok {
		return &os.LinkError{Op: "symlink", Old: oldname, New: newname, Err: afero.ErrNoSymlink}
	}
	return u.as(func() error { return l.SymlinkIfPossible(oldname, newname) })
}

// ReadlinkIfPossible implements afero.LinkReader.
func (u *User) ReadlinkIfPossible(name string) (string, error) {
	if l, ok := u.fs.(afero.LinkReader); ok {
		return l.ReadlinkIfPossible(name)
	}
	return "", &os.PathError{Op: "readlink", Path: name, Err: afero.ErrNoReadlink}
}

// LinkIfPossible implements ports.HardLinker.
func (u *User) LinkIfPossible(oldname, newname string) error {
	l, ok := u.fs.(ports.HardLinker)
	if !ok {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: afero.ErrNoSymlink}
	}
	return u.as(func() error { return l.LinkIfPossible(oldname, newname) })
}

// OpenRegular implements ports.RegularOpener.
func (u *User) OpenRegular(name string) (afero.File, error) {
	if r, ok := u.fs.(ports.RegularOpener); ok {
		return r.OpenRegular(name)
	}
	return u.fs.Open(name)
}

// Confine implements ports.Confiner: the view's writes are the user's too.
func (u *User) Confine(dir string) (afero.Fs, func() error, error) {
	c, ok := u.fs.(ports.Confiner)
	if !ok {
		return nil, nil, errors.New("this filesystem cannot confine a view")
	}
	view, closeView, err := c.Confine(dir)
	if err != nil {
		return nil, nil, err
	}
	return &User{fs: view, uid: u.uid, gid: u.gid, groups: u.groups}, closeView, nil
}
