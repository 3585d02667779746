package main

import (
	"fmt"
	"math"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Go's runtime runs a monitor thread, sysmon. When every P is idle it
// parks in a deep sleep, and the next system call of any goroutine wakes
// it (a futex wake on the caller's path); awake, it polls every 20 µs
// until it finds every P idle again and parks again. A relay answering one
// message at a time goes idle between any two messages, so every message
// pays the wake and a few 20 µs polls, each a timer and two context
// switches, on the CPUs the agents need; in a VM (Firecracker, where
// sandboxes run) a timer costs an exit to the host. Kept awake, the
// daemon's round-trip p50 is 15-20 % lower and the bridge's about 10 %,
// its CPU per message 20 % lower (docs/RATIONALE.md gives the figures,
// both legs measured in the same run). The server and the bridge do it;
// the agents and processes the server starts do not (restoreGodebug): a
// process that blocks in system calls has sysmon take its P back each
// time, which restarts the 20 µs polling, and the mock agent, which
// blocks reading its stdin, got slower.
//
// The runtime has no setting for sysmon, only this: with
// GODEBUG=schedtrace=N, sysmon never parks (it has a trace to print every
// N ms), and while nothing happens it backs off to one poll per 10 ms, so
// an idle process wakes 100 times a second. N is the largest the runtime
// takes, 2^31-1 ms (24.8 days): the trace line itself ("SCHED ...", on
// stderr) is printed when the machine's monotonic clock is past a multiple
// of N since boot. The setting is therefore not applied on a machine up for
// longer than N less a day, where the first line would come at once or
// soon; a process started earlier and living past that moment prints one
// line then, and one every 24.8 days.

// sysmonSetting is the GODEBUG setting that keeps sysmon out of its deep
// sleep.
const sysmonSetting = "schedtrace=2147483647"

// sysmonMargin is how long before the first trace line the setting is no
// longer applied.
const sysmonMargin = 24 * 3600 * 1e9

// godebugWasEnv carries GODEBUG as it was before the re-exec ("" for
// unset, else "=" and its value), so that the new image puts it back for
// the processes it starts: the runtime has read the setting by then, and
// agents keep the runtime's default (see above).
const godebugWasEnv = "SANDBOX_AGENT_GODEBUG_WAS_INTERNAL"

// sysmonAwake is true in the image started with sysmonSetting.
var sysmonAwake bool

// restoreGodebug is called first in main: in the image the re-exec
// started, it puts GODEBUG back as it was and removes godebugWasEnv.
func restoreGodebug() {
	was, ok := os.LookupEnv(godebugWasEnv)
	if !ok {
		return
	}
	_ = os.Unsetenv(godebugWasEnv)
	sysmonAwake = godebugHas(os.Getenv("GODEBUG"), "schedtrace")
	if v, set := strings.CutPrefix(was, "="); set {
		_ = os.Setenv("GODEBUG", v)
	} else {
		_ = os.Unsetenv("GODEBUG")
	}
}

// sysmonEnv adds sysmonSetting to this process's GODEBUG, for the
// re-exec that follows (keepSysmonAwake, or the daemon's hideToken), and
// returns what undoes it should no exec happen. ok is false, and nothing
// changed, when GODEBUG already names schedtrace (the user's choice:
// GODEBUG=schedtrace=0 turns this off), in the image the re-exec started,
// when polled is set and stdin or stdout is not a pipe or a socket, when
// the machine's clock is too close to the first trace line (above), and
// in a test (reexecAllowed).
func sysmonEnv(polled bool) (undo func(), ok bool) {
	godebug, set := os.LookupEnv("GODEBUG")
	if !reexecAllowed || sysmonAwake || godebugHas(godebug, "schedtrace") {
		return nil, false
	}
	if polled && !(pipeOrSocket(0) && pipeOrSocket(1)) {
		// The bridge's stdio must be polled (pollableStdio): a read
		// blocked on a terminal would restart sysmon's 20 µs polling.
		return nil, false
	}
	var now unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err != nil || now.Nano() >= math.MaxInt32*1e6-sysmonMargin {
		return nil, false
	}
	was, next := "", sysmonSetting
	if set {
		was = "=" + godebug
		if godebug != "" {
			next = godebug + "," + sysmonSetting
		}
	}
	_ = os.Setenv(godebugWasEnv, was)
	_ = os.Setenv("GODEBUG", next)
	return func() {
		_ = os.Unsetenv(godebugWasEnv)
		if set {
			_ = os.Setenv("GODEBUG", godebug)
		} else {
			_ = os.Unsetenv("GODEBUG")
		}
	}, true
}

// keepSysmonAwake executes this binary again (same pid, same arguments
// and descriptors) with sysmonSetting added to GODEBUG, when sysmonEnv
// says to (polled: see there). It returns only when nothing was done or
// the exec failed; the process then goes on with the runtime's default.
func keepSysmonAwake(polled bool) error {
	undo, ok := sysmonEnv(polled)
	if !ok {
		return nil
	}
	err := execSelf(os.Args, os.Environ())
	undo()
	return err
}

// pipeOrSocket reports whether descriptor fd is a pipe or a socket.
func pipeOrSocket(fd int) bool {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return false
	}
	m := st.Mode & unix.S_IFMT
	return m == unix.S_IFIFO || m == unix.S_IFSOCK
}

// execSelf executes this very binary again, with args and env: it returns
// only if that failed. /proc/self/exe is this binary even if its file was
// replaced or removed since it started.
func execSelf(args, env []string) error {
	return fmt.Errorf("exec: %w", syscall.Exec("/proc/self/exe", args, env))
}

// godebugHas reports whether the GODEBUG value v sets key.
func godebugHas(v, key string) bool {
	for field := range strings.SplitSeq(v, ",") {
		if k, _, ok := strings.Cut(field, "="); ok && k == key {
			return true
		}
	}
	return false
}
