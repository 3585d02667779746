package fsys

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// OS is the host filesystem, unconfined: absolute paths reach anything the
// daemon's user can. Archive extraction still goes through a confined view
// (Confine), so an archive cannot write outside its target directory.
type OS struct{ afero.OsFs }

var (
	_ afero.Fs            = (*OS)(nil)
	_ afero.Symlinker     = (*OS)(nil)
	_ ports.Confiner      = (*OS)(nil)
	_ ports.RegularOpener = (*OS)(nil)
	_ afero.Fs            = (*afero.OsFs)(nil)
)

// NewOS returns the host filesystem.
func NewOS() *OS { return &OS{} }

// Confine implements ports.Confiner with an os.Root on dir.
func (*OS) Confine(dir string) (afero.Fs, func() error, error) {
	r, err := OpenRoot(dir)
	if err != nil {
		return nil, nil, err
	}
	return r, r.Close, nil
}

// OpenRegular implements ports.RegularOpener.
func (*OS) OpenRegular(name string) (afero.File, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, openFailed(name, err)
	}
	return regularOnly(name, f)
}

// openFailed is err, or ErrNotRegular when the open failed for what the
// file is: open(2) refuses a socket (and a device without a driver) with
// ENXIO before there is a file to check.
func openFailed(name string, err error) error {
	if errors.Is(err, syscall.ENXIO) {
		return &os.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w (%v)", domain.ErrNotRegular, syscall.ENXIO)}
	}
	return err
}

// regularOnly returns f when it is a regular file, else closes it. O_NONBLOCK
// made the open return at once even on a FIFO without a writer; for a
// regular file the flag changes nothing.
func regularOnly(name string, f afero.File) (afero.File, error) {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &os.PathError{Op: "open", Path: name, Err: domain.ErrNotRegular}
	}
	return f, nil
}

// Statfs reports free space with statfs(2).
type Statfs struct{}

var _ ports.DiskSpace = Statfs{}

// Space implements ports.DiskSpace. A path that does not exist yet is
// measured at its nearest existing parent.
func (Statfs) Space(path string) (free, total int64, err error) {
	p := filepath.Clean(path)
	for {
		var st syscall.Statfs_t
		err := syscall.Statfs(p, &st)
		if err == nil {
			return int64(st.Bavail) * int64(st.Bsize), int64(st.Blocks) * int64(st.Bsize), nil
		}
		parent := filepath.Dir(p)
		if err != syscall.ENOENT && err != syscall.ENOTDIR || parent == p {
			return 0, 0, fmt.Errorf("statfs %s: %w", path, err)
		}
		p = parent
	}
}
