package ports

import "github.com/spf13/afero"

// The filesystem port is afero.Fs itself. These are optional abilities a
// backend adds, found with a type assertion as afero's own Symlinker is:
// the app uses them where the host must do the work (a confined view, an
// open that cannot block) and falls back where the backend cannot have the
// problem (memory has no links and no FIFOs).

// Confiner hands out a view of one directory of the filesystem that
// nothing can leave: no name, "..", or symbolic link (or chain of them)
// reaches outside dir; such an attempt fails with domain.ErrOutsideRoot.
// Names in the view are relative to dir. Archive extraction writes only
// through such a view. The caller calls close when done; the view is safe
// for concurrent use until then.
//
// A view may itself be a Confiner (the host's are): confined to one of its
// own subdirectories, named relative to it, it hands out a handle on that
// directory, at the cost of one open, and each handle is closed on its
// own. The extractor works deep in a tree through such handles, one name
// at a time, instead of walking every path from the top.
type Confiner interface {
	Confine(dir string) (view afero.Fs, close func() error, err error)
}

// HardLinker makes hard links, so an archive's hard link entries take no
// space again (a copy would turn a 512-byte header into a whole file).
// Names are those of the backend (relative ones in a confined view); both
// stay inside it.
type HardLinker interface {
	LinkIfPossible(oldname, newname string) error
}

// DirRenamer moves an entry from one view of a backend to another (views
// its Confiner handed out, on one filesystem) as a single rename between
// the two directories: each name is one path element of its own view, so
// neither path is walked from the top, however deep the views are.
// Upload-batch moves a stage deep into its target this way. It replaces
// what newname holds as a rename does (a file, or an empty directory);
// a view of another kind is an error.
type DirRenamer interface {
	RenameFrom(from afero.Fs, oldname, newname string) error
}

// RegularOpener opens a file for reading only when it is a regular file,
// and never blocks doing so: a FIFO, device or socket (or a file swapped
// for one between a check and the open) fails at once with
// domain.ErrNotRegular. The caller closes the file.
type RegularOpener interface {
	OpenRegular(name string) (afero.File, error)
}

// DiskSpace reports the space left on the filesystem holding a path, so
// writes can stop before they fill it.
type DiskSpace interface {
	// Space returns the bytes available to the daemon's user and the
	// filesystem's size, for the filesystem holding path (or its nearest
	// existing parent). It does not block beyond one statfs; safe for
	// concurrent use.
	Space(path string) (free, total int64, err error)
}
