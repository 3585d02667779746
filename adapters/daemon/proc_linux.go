package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// identity is what tells one process from another that later gets its
// pid: its start time in clock ticks since boot and the boot's id.
type identity struct {
	startTicks uint64
	bootID     string
}

// identify reads pid's identity; gone is true when there is no such
// process or it has exited (a zombie waiting for its parent).
func identify(pid int) (id identity, gone bool, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, fs.ErrNotExist) {
		return identity{}, true, nil
	}
	if err != nil {
		return identity{}, false, err
	}
	// pid (comm) state ppid ... starttime is the 22nd field; comm may hold
	// spaces and parentheses, so count from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return identity{}, false, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return identity{}, false, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ticks, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return identity{}, false, fmt.Errorf("/proc/%d/stat: start time %q", pid, f[19])
	}
	id = identity{startTicks: ticks, bootID: bootID()}
	if f[0] == "Z" || f[0] == "X" {
		// The leader of a multi-threaded process turns zombie before its
		// other threads have exited, and they still hold its descriptors
		// (its listening socket): gone once they are too.
		if threads, err := strconv.Atoi(f[17]); err == nil && threads > 1 {
			return id, false, nil
		}
		return identity{}, true, nil
	}
	return id, false, nil
}

func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// verifiable: identities can be compared here (not only whether the pid
// is alive).
const verifiable = true

// sameProcess says whether the recorded process is the one now at its
// pid, and if not, why.
func sameProcess(r Record, now identity) (bool, string) {
	switch {
	case r.BootID != "" && now.bootID != "" && r.BootID != now.bootID:
		return false, fmt.Sprintf("the machine has restarted since pid %d was recorded", r.PID)
	case r.StartTicks == 0:
		return false, fmt.Sprintf("the record of pid %d holds no start time", r.PID)
	case r.StartTicks != now.startTicks:
		return false, fmt.Sprintf("pid %d now belongs to another process (its start time is not the recorded one)", r.PID)
	}
	return true, ""
}
