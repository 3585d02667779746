package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/proc"
)

// liveGroupMembers lists the live processes of process group pgid.
func liveGroupMembers(pgid int) []int {
	var pids []int
	for _, p := range proc.All() {
		if p.PGRP == pgid && !p.Dead() {
			pids = append(pids, p.PID)
		}
	}
	return pids
}

// zombieChildren lists the children of pid that have exited but were not
// reaped.
func zombieChildren(pid int) []int {
	var out []int
	for _, p := range proc.All() {
		if p.PPID == pid && p.State == 'Z' {
			out = append(out, p.PID)
		}
	}
	return out
}

// openFDs counts the open file descriptors of pid.
func openFDs(t testing.TB, pid int) int {
	t.Helper()
	fds, err := proc.FDs(pid)
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// statusKiB reads one "<field>: N kB" line of /proc/<pid>/status.
func statusKiB(t testing.TB, pid int, field string) int64 {
	t.Helper()
	n, err := proc.StatusKiB(pid, field)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// processCPU is the user plus system time pid has used.
func processCPU(t testing.TB, pid int) time.Duration {
	t.Helper()
	s, err := proc.ReadStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	return s.CPU
}

// waitGone polls until none of pids is alive, failing after limit.
func waitGone(t *testing.T, limit time.Duration, pids ...int) {
	t.Helper()
	var alive []int
	if !harness.WaitUntil(limit, func() bool {
		alive = alive[:0]
		for _, p := range pids {
			if proc.Alive(p) {
				alive = append(alive, p)
			}
		}
		return len(alive) == 0
	}) {
		var what []string
		for _, p := range alive {
			what = append(what, describeProc(p))
		}
		t.Fatalf("processes still alive after %v: %v\n%s", limit, alive, strings.Join(what, "\n"))
	}
}

// describeProc says what a process is, for a failure message: its pid,
// state, parent and command line.
func describeProc(pid int) string {
	s, err := proc.ReadStat(pid)
	cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return fmt.Sprintf("  pid %d: stat %+v (%v), cmdline %q", pid, s, err, strings.ReplaceAll(string(cmd), "\x00", " "))
}
