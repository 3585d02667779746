package fsys

import (
	"testing"

	"golang.org/x/sys/unix"
)

// A spill file holds every agent message: it is the daemon's own, 0600,
// and close-on-exec, so no agent or process it starts inherits it (one
// run with --run-as could otherwise read any instance's replay).
func TestSpillFileIsPrivate(t *testing.T) {
	f, err := (&Spill{Dir: t.TempDir()}).Create()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.(*spillFile).Fd())
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("descriptor flags %#x (%v): not close-on-exec", flags, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&0o077 != 0 {
		t.Errorf("mode %o (%v): readable by others", st.Mode&0o777, err)
	}
}
