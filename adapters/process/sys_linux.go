package process

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// sysProcAttr puts the child in its own process group and signals it when
// the daemon dies: an agent gets SIGKILL; a supervisor gets SIGTERM, which
// it catches to kill the agent's whole tree first.
func sysProcAttr(supervisor bool) *syscall.SysProcAttr {
	if supervisor {
		return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	}
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// groupHasLiveMember scans /proc for a process of group pgid that is not a
// zombie. Zombies hold no resources and disappear when their parent (init,
// after reparenting) reaps them, which the daemon does not control.
func groupHasLiveMember(pgid int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	want := []byte(strconv.Itoa(pgid))
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may contain spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) >= 3 && f[0][0] != 'Z' && f[0][0] != 'X' && bytes.Equal(f[2], want) {
			return true
		}
	}
	return false
}
