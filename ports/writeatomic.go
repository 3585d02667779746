package ports

import (
	"io"
	"io/fs"
	"path"

	"github.com/spf13/afero"
)

// WriteAtomic replaces dst on fsys so that a reader sees the old file or
// the new one, never a part: write fills a new temporary file in dst's
// directory (named after pattern, as afero.TempFile names it), the file
// gets perm, check (when set) may inspect the complete file by its name
// (an installer runs a launcher there before it counts), and only then is
// it renamed over dst. On any failure (a panic in write included) the
// temporary file is closed and removed and dst is untouched.
//
// It lives beside the ports because the filesystem port is afero.Fs
// itself: every use case that writes a file (uploads, config entries,
// launchers, manifests) writes it this way.
func WriteAtomic(fsys afero.Fs, dst, pattern string, perm fs.FileMode, write func(io.Writer) error, check func(tmp string) error) error {
	tmp, err := afero.TempFile(fsys, path.Dir(dst), pattern)
	if err != nil {
		return err
	}
	name := tmp.Name()
	closed := false
	defer func() {
		// Also when write panics (a recovered handler): the descriptor
		// and the file would be left behind.
		if !closed {
			_ = tmp.Close()
			_ = fsys.Remove(name)
		}
	}()
	err = write(tmp)
	closed = true
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Chmod(name, perm)
	}
	if err == nil && check != nil {
		err = check(name)
	}
	if err == nil {
		err = fsys.Rename(name, dst)
	}
	if err != nil {
		_ = fsys.Remove(name)
	}
	return err
}
