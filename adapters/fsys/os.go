package fsys

import "github.com/spf13/afero"

// NewOS returns the host filesystem, unconfined: absolute paths reach
// anything the daemon's user can.
func NewOS() afero.Fs { return afero.NewOsFs() }

var (
	_ afero.Fs        = (*afero.OsFs)(nil)
	_ afero.Symlinker = (*afero.OsFs)(nil)
	_ afero.Fs        = (*afero.MemMapFs)(nil)
	_ afero.Lstater   = (*afero.MemMapFs)(nil)
)

// NewMemory returns an empty in-memory filesystem. It has no symbolic links;
// tar archives that hold some are rejected on it.
func NewMemory() afero.Fs { return afero.NewMemMapFs() }
