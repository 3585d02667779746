package main

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeInheritedOnExec marks every descriptor above stderr close-on-exec.
// Go opens its own that way, but descriptors the daemon inherited from
// whatever started it (a supervisor's pipe, a shell's redirections) are
// not, and would otherwise reach every agent and process it starts: a
// process could hold a supervisor's pipe open or write into it. `daemon
// start` calls it too, so the daemon it spawns inherits none of them.
func closeInheritedOnExec() {
	if unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	// Kernels before 5.11: one fcntl per open descriptor.
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}
