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
// sandboxes run) a timer costs an exit to the host. The bridge's p50 round
// trip is about 10 % lower without it, its CPU per message 20 % lower
// (BenchmarkBridgeRoundTrip runs both in the same run; docs/RATIONALE.md
// gives the figures). Only the bridge does this: every descriptor it
// waits on is polled; a process that blocks in system calls has sysmon
// take its P back each time, which restarts the 20 µs polling.
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

// keepSysmonAwake executes this binary again (same pid, same arguments
// and descriptors) with sysmonSetting added to GODEBUG. It does nothing,
// and returns nil, when GODEBUG already names schedtrace (the user's
// choice, GODEBUG=schedtrace=0 to turn this off, or the re-exec done),
// when stdin or stdout is not a pipe or a socket, when the machine's clock is too close to the first trace line (above),
// or in a test (reexecAllowed). It returns only when nothing was done or
// the exec failed; the process then goes on with the runtime's default.
func keepSysmonAwake() error {
	if !reexecAllowed || godebugHas(os.Getenv("GODEBUG"), "schedtrace") {
		return nil
	}
	for fd := range 2 {
		// Polled stdio only (pollableStdio): a read blocked on a terminal
		// would restart sysmon's 20 µs polling each time.
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil {
			return nil
		}
		if m := st.Mode & unix.S_IFMT; m != unix.S_IFIFO && m != unix.S_IFSOCK {
			return nil
		}
	}
	var now unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err != nil || now.Nano() >= math.MaxInt32*1e6-sysmonMargin {
		return nil
	}
	env := os.Environ()
	godebug := sysmonSetting
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			if v != "" {
				godebug = v + "," + sysmonSetting
			}
			env = append(env[:i:i], env[i+1:]...)
			break
		}
	}
	env = append(env, "GODEBUG="+godebug)
	// /proc/self/exe is this very binary, even if its file was replaced
	// or removed since it started.
	return fmt.Errorf("exec: %w", syscall.Exec("/proc/self/exe", os.Args, env))
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
