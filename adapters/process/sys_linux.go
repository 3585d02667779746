package process

import (
	"bytes"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
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
	want := []byte(strconv.Itoa(pgid))
	found := false
	ok := eachLiveProcess(func(pgrp, _ []byte) bool {
		found = bytes.Equal(pgrp, want)
		return !found
	})
	return !ok || found
}

// eachLiveProcess calls fn with the process group and session ids (as
// written in /proc/<pid>/stat) of every process that is not a zombie, until
// fn returns false. It reports false when /proc cannot be read.
func eachLiveProcess(fn func(pgrp, session []byte) bool) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session ...; comm may contain spaces
		// and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 4 || f[0][0] == 'Z' || f[0][0] == 'X' {
			continue
		}
		if !fn(f[2], f[3]) {
			break
		}
	}
	return true
}

// waitExited blocks until process pid has exited, without reaping it: a
// zombie keeps its pid, so its process group id cannot be reused meanwhile.
func waitExited(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// sessionGroups lists the process groups with a live member in session
// sid other than group sid itself: the jobs a shell with job control put
// in groups of their own, which a signal to the session leader's group
// does not reach.
func sessionGroups(sid int) []int {
	want := []byte(strconv.Itoa(sid))
	var groups []int
	eachLiveProcess(func(pgrp, session []byte) bool {
		if bytes.Equal(session, want) && !bytes.Equal(pgrp, want) {
			if g, err := strconv.Atoi(string(pgrp)); err == nil && g > 0 {
				groups = append(groups, g)
			}
		}
		return true
	})
	return groups
}
