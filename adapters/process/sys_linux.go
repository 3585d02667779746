package process

import (
	"bytes"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts an os/exec child in a process group of its own, or in
// a session of its own with fd 0 as its controlling terminal, as cred if
// set, and kills it when the daemon dies (Pdeathsig; only the child, not
// what it starts: that needs the Supervisor).
func sysProcAttr(session bool, cred *Credential) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: !session, Setsid: session, Setctty: session, Pdeathsig: syscall.SIGKILL}
	if cred != nil {
		a.Credential = &syscall.Credential{Uid: cred.UID, Gid: cred.GID, Groups: cred.Groups}
	}
	return a
}

// groupHasLiveMember scans /proc for a process of group pgid that is not a
// zombie. Zombies hold no resources and disappear when their parent (init,
// after reparenting) reaps them, which the daemon does not control.
func groupHasLiveMember(pgid int) bool {
	found := false
	ok := eachProcess(func(p procStat) bool {
		found = !p.dead && p.pgrp == pgid
		return !found
	})
	return !ok || found
}

// procStat is what this adapter reads from /proc/<pid>/stat.
type procStat struct {
	pid, ppid, pgrp, session int
	dead                     bool // a zombie, or on its way out
}

// readStat parses /proc/<pid>/stat; false when the process is gone.
func readStat(pid string) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// pid (comm) state ppid pgrp session ...; comm may contain spaces and
	// parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 4 {
		return procStat{}, false
	}
	n := func(b []byte) int { v, _ := strconv.Atoi(string(b)); return v }
	return procStat{pid: n([]byte(pid)), ppid: n(f[1]), pgrp: n(f[2]), session: n(f[3]), dead: f[0][0] == 'Z' || f[0][0] == 'X'}, true
}

// eachProcess calls fn with every process in /proc until fn returns false.
// It reports false when /proc cannot be read.
func eachProcess(fn func(procStat) bool) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		if p, ok := readStat(e.Name()); ok && !fn(p) {
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
	var groups []int
	eachProcess(func(p procStat) bool {
		if !p.dead && p.session == sid && p.pgrp != sid && p.pgrp > 0 {
			groups = append(groups, p.pgrp)
		}
		return true
	})
	return groups
}
