package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Stat is what the tools need from /proc/<pid>/stat.
type Stat struct {
	PID, PPID, PGRP int
	State           byte // 'R', 'S', 'Z' (zombie), ...
	// CPU is user plus system time (clock ticks of 10 ms, the USER_HZ of
	// every Linux architecture Go runs on).
	CPU time.Duration
}

// Dead reports whether the process has exited (a zombie or on its way out).
func (s Stat) Dead() bool { return s.State == 'Z' || s.State == 'X' }

// ReadStat reads pid's stat line.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return Stat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ppid, _ := strconv.Atoi(string(f[1]))
	pgrp, _ := strconv.Atoi(string(f[2]))
	utime, _ := strconv.Atoi(string(f[11]))
	stime, _ := strconv.Atoi(string(f[12]))
	return Stat{PID: pid, PPID: ppid, PGRP: pgrp, State: f[0][0], CPU: time.Duration(utime+stime) * 10 * time.Millisecond}, nil
}

// All reads the stat line of every process on the machine (those that
// vanish meanwhile are left out).
func All() []Stat {
	var out []Stat
	for _, pid := range pids() {
		if s, err := ReadStat(pid); err == nil {
			out = append(out, s)
		}
	}
	return out
}

// Alive reports whether pid exists and has not exited.
func Alive(pid int) bool {
	s, err := ReadStat(pid)
	return err == nil && !s.Dead()
}

// ExeUnder lists the live processes whose executable lies under dir.
func ExeUnder(dir string) []int {
	var out []int
	for _, pid := range pids() {
		exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
		if err == nil && strings.HasPrefix(exe, dir+string(os.PathSeparator)) && Alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// StatusKiB reads one "<field>: N kB" line of /proc/<pid>/status (VmRSS,
// VmHWM, ...).
func StatusKiB(pid int, field string) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		}
	}
	return 0, errors.New("no " + field + " in /proc/" + strconv.Itoa(pid) + "/status")
}

// FD is one open descriptor and what it points at.
type FD struct {
	Num, Target string
}

// FDs lists pid's open descriptors.
func FDs(pid int) ([]FD, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]FD, 0, len(ents))
	for _, e := range ents {
		target, _ := os.Readlink(dir + "/" + e.Name())
		out = append(out, FD{Num: e.Name(), Target: target})
	}
	return out, nil
}

func pids() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// KillUnder sends SIGKILL to every live process whose executable lies under
// dir: the agents a daemon under test failed to take down.
func KillUnder(dir string) {
	for _, pid := range ExeUnder(dir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
