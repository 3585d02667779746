//go:build unix && !linux

package daemon

import (
	"errors"
	"syscall"
)

// identity: without /proc, only whether the pid is alive is known.
type identity struct {
	startTicks uint64
	bootID     string
}

func identify(pid int) (identity, bool, error) {
	err := syscall.Kill(pid, 0)
	switch {
	case errors.Is(err, syscall.ESRCH):
		return identity{}, true, nil
	case err != nil && !errors.Is(err, syscall.EPERM):
		return identity{}, false, err
	}
	return identity{}, false, nil
}

// verifiable is false: a live pid is trusted as the daemon only when the
// daemon's address answers its health check too.
const verifiable = false

func sameProcess(r Record, now identity) (bool, string) { return true, "" }
