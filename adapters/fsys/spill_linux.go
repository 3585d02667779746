package fsys

import (
	"os"

	"golang.org/x/sys/unix"
)

// openUnnamed opens a file in dir that has no name (O_TMPFILE), so
// nothing can ever open it by path.
func openUnnamed(dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), dir+"/(spill)"), nil
}

// punchHole frees the blocks (or tmpfs pages) under n bytes at off; the
// file keeps its size and the range reads as zeros.
func punchHole(f *os.File, off, n int64) error {
	return unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
}

// onTmpfs reports whether dir is on tmpfs.
func onTmpfs(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.TMPFS_MAGIC
}
