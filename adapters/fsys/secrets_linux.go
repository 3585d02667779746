//go:build linux

package fsys

import (
	"os"
	"strconv"
	"syscall"

	"github.com/spf13/afero"
	"golang.org/x/sys/unix"
)

// isProcfs reports whether p (not a link) is on a procfs mount.
func isProcfs(p string) bool {
	var st unix.Statfs_t
	return unix.Statfs(p, &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
}

// fileOnProcfs reports whether the open file f, of device dev, is on procfs.
func fileOnProcfs(f afero.File, dev uint64, cache map[uint64]bool) bool {
	if v, ok := cache[dev]; ok {
		return v
	}
	v := false
	withFD(f, func(fd int) {
		var st unix.Statfs_t
		v = unix.Fstatfs(fd, &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
	})
	cache[dev] = v
	return v
}

// openedPath is the path the kernel opened f by.
func openedPath(f afero.File) (p string, ok bool) {
	withFD(f, func(fd int) {
		var err error
		p, err = os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		ok = err == nil && len(p) > 0 && p[0] == '/'
	})
	return p, ok
}

// withFD runs fn with f's descriptor, when f has one, without switching
// it to blocking mode as Fd would.
func withFD(f afero.File, fn func(fd int)) {
	sc, ok := f.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) { fn(int(fd)) })
}
