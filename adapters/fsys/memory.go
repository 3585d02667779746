package fsys

import (
	"io/fs"
	"os"
	"sync"
	"syscall"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// Memory is an in-memory filesystem for tests and demos. It has no
// symbolic links (tar archives that hold some are rejected on it) and no
// FIFOs or devices. Directories report size 0: afero's memory backend
// reports a made-up 42.
type Memory struct {
	afero.Fs
	renames sync.Mutex
}

var (
	_ afero.Fs            = (*Memory)(nil)
	_ afero.Lstater       = (*Memory)(nil)
	_ ports.Confiner      = (*Memory)(nil)
	_ ports.RegularOpener = (*Memory)(nil)
)

// NewMemory returns an empty in-memory filesystem.
func NewMemory() *Memory { return &Memory{Fs: afero.NewMemMapFs()} }

// Confine implements ports.Confiner. Without links, a base path is a
// complete confinement.
func (m *Memory) Confine(dir string) (afero.Fs, func() error, error) {
	fi, err := m.Stat(dir)
	if err != nil {
		return nil, nil, err
	}
	if !fi.IsDir() {
		return nil, nil, &os.PathError{Op: "confine", Path: dir, Err: fs.ErrInvalid}
	}
	return afero.NewBasePathFs(m, dir), func() error { return nil }, nil
}

// OpenRegular implements ports.RegularOpener.
func (m *Memory) OpenRegular(name string) (afero.File, error) {
	f, err := m.Open(name)
	if err != nil {
		return nil, err
	}
	return regularOnly(name, f)
}

// Stat implements afero.Fs.
func (m *Memory) Stat(name string) (os.FileInfo, error) {
	fi, err := m.Fs.Stat(name)
	return sized(fi), err
}

// LstatIfPossible implements afero.Lstater (there are no links: Stat).
func (m *Memory) LstatIfPossible(name string) (os.FileInfo, bool, error) {
	fi, err := m.Stat(name)
	return fi, false, err
}

// Open implements afero.Fs.
func (m *Memory) Open(name string) (afero.File, error) {
	f, err := m.Fs.Open(name)
	if err != nil {
		return nil, err
	}
	return memFile{f}, nil
}

// OpenFile implements afero.Fs.
func (m *Memory) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	f, err := m.Fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return memFile{f}, nil
}

// Create implements afero.Fs.
func (m *Memory) Create(name string) (afero.File, error) {
	f, err := m.Fs.Create(name)
	if err != nil {
		return nil, err
	}
	return memFile{f}, nil
}

// Name implements afero.Fs.
func (m *Memory) Name() string { return "MemoryFs" }

// Rename implements afero.Fs with the host's rule that a directory that is
// not empty is never replaced (afero's memory backend replaces it and
// loses its files; uploads racing to create one directory rely on it).
func (m *Memory) Rename(oldname, newname string) error {
	m.renames.Lock()
	defer m.renames.Unlock()
	if fi, err := m.Fs.Stat(newname); err == nil && fi.IsDir() {
		if names, _ := afero.ReadDir(m.Fs, newname); len(names) > 0 {
			return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.ENOTEMPTY}
		}
	}
	return m.Fs.Rename(oldname, newname)
}

type memFile struct{ afero.File }

func (f memFile) Stat() (os.FileInfo, error) {
	fi, err := f.File.Stat()
	return sized(fi), err
}

func (f memFile) Readdir(n int) ([]os.FileInfo, error) {
	infos, err := f.File.Readdir(n)
	for i := range infos {
		infos[i] = sized(infos[i])
	}
	return infos, err
}

// dirInfo reports a directory's size as 0.
type dirInfo struct{ os.FileInfo }

func (dirInfo) Size() int64 { return 0 }

func sized(fi os.FileInfo) os.FileInfo {
	if fi != nil && fi.IsDir() {
		return dirInfo{fi}
	}
	return fi
}
