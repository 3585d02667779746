package harness

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// MemoryCgroup is a memory cgroup a test made for a daemon (Options.Cgroup):
// a child of the test's own, with a limit, removed when the test ends.
type MemoryCgroup struct {
	Dir string
	V2  bool
}

// NewMemoryCgroup makes a memory cgroup of limit bytes below the test's
// own cgroup, or skips the test, saying why, where the machine does not
// allow it (not root, no memory controller mounted or writable). It is
// removed at cleanup, once the processes in it are gone (the daemon's own
// cleanup, registered after this, runs first).
func NewMemoryCgroup(t testing.TB, limit int64) *MemoryCgroup {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a memory cgroup")
	}
	parent, v2, why := ownMemoryCgroup()
	if parent == "" {
		t.Skip(why)
	}
	dir := filepath.Join(parent, "sandbox-agent-e2e-"+strconv.Itoa(os.Getpid())+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup under %s: %v", parent, err)
	}
	t.Cleanup(func() {
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			err := os.Remove(dir)
			if err == nil || os.IsNotExist(err) {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("memory cgroup %s left behind: %v", dir, err)
				return
			}
		}
	})
	c := &MemoryCgroup{Dir: dir, V2: v2}
	file := "memory.limit_in_bytes"
	if v2 {
		file = "memory.max"
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Skipf("cannot set %s in %s: %v", file, dir, err)
	}
	return c
}

// OOMKills is how many processes the kernel killed in the cgroup for want
// of memory (v1 memory.oom_control, v2 memory.events).
func (c *MemoryCgroup) OOMKills() int64 {
	file := "memory.oom_control"
	if c.V2 {
		file = "memory.events"
	}
	return c.stat(file, "oom_kill")
}

// Peak is the most memory the cgroup ever used, in bytes (0 if unknown).
func (c *MemoryCgroup) Peak() int64 {
	file := "memory.max_usage_in_bytes"
	if c.V2 {
		file = "memory.peak"
	}
	b, _ := os.ReadFile(filepath.Join(c.Dir, file))
	v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v
}

func (c *MemoryCgroup) stat(file, key string) int64 {
	b, _ := os.ReadFile(filepath.Join(c.Dir, file))
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == key {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}

// ownMemoryCgroup finds the directory of this process's memory cgroup:
// the v1 memory hierarchy's, else the v2 unified one's when memory is one
// of its controllers.
func ownMemoryCgroup() (dir string, v2 bool, why string) {
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false, "no /proc/self/cgroup"
	}
	var v1Path, v2Path string
	for _, line := range strings.Split(string(cg), "\n") {
		p := strings.SplitN(line, ":", 3)
		if len(p) != 3 {
			continue
		}
		if p[0] == "0" && p[1] == "" {
			v2Path = p[2]
		}
		for _, c := range strings.Split(p[1], ",") {
			if c == "memory" {
				v1Path = p[2]
			}
		}
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", false, "no /proc/self/mountinfo"
	}
	defer f.Close()
	var v2Mount string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, v := range fields {
			if v != "-" || i < 6 || len(fields) < i+4 {
				continue
			}
			root, point, fstype, super := fields[3], fields[4], fields[i+1], fields[i+3]
			if root != "/" {
				break // a container's view: its cgroup is the mount's root
			}
			switch {
			case fstype == "cgroup" && v1Path != "" && strings.Contains(","+super+",", ",memory,"):
				return filepath.Join(point, v1Path), false, ""
			case fstype == "cgroup2" && v2Path != "":
				v2Mount = point
			}
			break
		}
	}
	if v2Mount != "" {
		dir := filepath.Join(v2Mount, v2Path)
		if b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control")); err == nil && strings.Contains(string(b), "memory") {
			return dir, true, ""
		}
		return "", false, "the memory controller is not enabled for children of " + dir
	}
	return "", false, "no memory cgroup controller mounted"
}
