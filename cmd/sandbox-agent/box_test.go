package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeRoot writes files (path relative to the root: content) under a new
// directory standing for "/".
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const meminfo = "MemTotal:       24684400 kB\nMemFree:        1 kB\n"

// The box from fake /proc and cgroup files: v2 (memory.max, memory.high,
// an ancestor's tighter limit), v1 (memory.limit_in_bytes, the "none"
// number), a container whose mount root is its own cgroup, hybrid hosts,
// and no cgroup at all.
func TestReadBox(t *testing.T) {
	const phys = 24684400 << 10
	v2mount := "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
	v1mount := "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
		"32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
	for _, c := range []struct {
		name   string
		files  map[string]string
		want   int64
		source string
	}{
		{"v2 memory.max", map[string]string{
			"proc/self/cgroup": "0::/sandbox/agent\n", "proc/self/mountinfo": v2mount, "proc/meminfo": meminfo,
			"sys/fs/cgroup/sandbox/agent/memory.max": "536870912\n", "sys/fs/cgroup/sandbox/agent/memory.high": "max\n",
			"sys/fs/cgroup/sandbox/memory.max": "max\n", "sys/fs/cgroup/memory.max": "max\n",
		}, 512 << 20, "cgroup v2 /sys/fs/cgroup/sandbox/agent/memory.max"},
		{"v2 memory.high and a tighter ancestor", map[string]string{
			"proc/self/cgroup": "0::/a/b\n", "proc/self/mountinfo": v2mount, "proc/meminfo": meminfo,
			"sys/fs/cgroup/a/b/memory.max": "1073741824", "sys/fs/cgroup/a/b/memory.high": "805306368",
			"sys/fs/cgroup/a/memory.max": "268435456",
		}, 256 << 20, "cgroup v2 /sys/fs/cgroup/a/memory.max"},
		{"v2 unlimited", map[string]string{
			"proc/self/cgroup": "0::/\n", "proc/self/mountinfo": v2mount, "proc/meminfo": meminfo,
			"sys/fs/cgroup/memory.max": "max\n",
		}, phys, "physical memory (/proc/meminfo)"},
		{"v1 limit_in_bytes", map[string]string{
			"proc/self/cgroup": "5:cpu:/\n4:memory:/box/one\n0::/\n", "proc/self/mountinfo": v1mount, "proc/meminfo": meminfo,
			"sys/fs/cgroup/memory/box/one/memory.limit_in_bytes": "536870912\n",
			"sys/fs/cgroup/memory/box/memory.limit_in_bytes":     "9223372036854771712\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":         "9223372036854771712\n",
		}, 512 << 20, "cgroup v1 /sys/fs/cgroup/memory/box/one/memory.limit_in_bytes"},
		{"v1 none (the huge number)", map[string]string{
			"proc/self/cgroup": "4:memory:/box\n", "proc/self/mountinfo": v1mount, "proc/meminfo": meminfo,
			"sys/fs/cgroup/memory/box/memory.limit_in_bytes": "9223372036854771712\n",
		}, phys, "physical memory (/proc/meminfo)"},
		{"v1 in a container (mount root is the cgroup)", map[string]string{
			"proc/self/cgroup":    "4:memory:/docker/abc\n",
			"proc/self/mountinfo": "35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro,relatime - cgroup cgroup rw,memory\n",
			"proc/meminfo":        meminfo,
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n",
		}, 1 << 30, "cgroup v1 /sys/fs/cgroup/memory/memory.limit_in_bytes"},
		{"hybrid: v1 memory, v2 without it", map[string]string{
			"proc/self/cgroup":    "4:memory:/x\n0::/\n",
			"proc/self/mountinfo": v1mount + "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
			"proc/meminfo":        meminfo,
			"sys/fs/cgroup/memory/x/memory.limit_in_bytes": "402653184\n",
		}, 384 << 20, "cgroup v1 /sys/fs/cgroup/memory/x/memory.limit_in_bytes"},
		{"a mount point with a space", map[string]string{
			"proc/self/cgroup":              "0::/s\n",
			"proc/self/mountinfo":           "30 23 0:26 / /sys/fs/my\\040cgroup rw - cgroup2 cgroup2 rw\n",
			"proc/meminfo":                  meminfo,
			"sys/fs/my cgroup/s/memory.max": "134217728",
		}, 128 << 20, "cgroup v2 /sys/fs/my cgroup/s/memory.max"},
		{"no cgroup files", map[string]string{"proc/meminfo": meminfo}, phys, "physical memory (/proc/meminfo)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := readBox(os.DirFS(fakeRoot(t, c.files)), "self")
			if got.bytes != c.want || got.source != c.source {
				t.Errorf("box %d (%s), want %d (%s)", got.bytes, got.source, c.want, c.source)
			}
		})
	}
	if got := readBox(os.DirFS(t.TempDir()), "self"); got.bytes <= 0 || !strings.Contains(got.source, "unknown") {
		t.Errorf("nothing readable: %+v", got)
	}
}

// The box of a process in a real memory cgroup: a child of the test's own
// cgroup with a limit of its own, holding a sleep. Skipped where the
// machine does not allow it (not root, no writable memory controller).
func TestReadBoxRealCgroup(t *testing.T) {
	dir, file := makeTestCgroup(t, 300<<20)
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Skipf("cannot move a process into %s: %v", dir, err)
	}
	got := readBox(os.DirFS("/"), strconv.Itoa(cmd.Process.Pid))
	if got.bytes != 300<<20 || !strings.HasSuffix(got.source, filepath.Join(dir, file)) {
		t.Fatalf("box %d (%s), want %d from %s", got.bytes, got.source, 300<<20, filepath.Join(dir, file))
	}
	// A quarter is 75 MiB; less the reserve, 43 MiB split 2:1:1.
	if b := deriveBudgets(got); b.share != 75<<20 || b.replayTotal != 43<<20/2 || b.inflight != 43<<20/4 {
		t.Fatalf("budgets %+v", b)
	}
}

// makeTestCgroup makes a memory cgroup below the test's own with limit
// bytes, removed when the test ends (after the processes in it are gone),
// and returns its directory and the limit file's name; it skips the test
// where the machine does not allow it.
func makeTestCgroup(t *testing.T, limit int64) (dir, file string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a memory cgroup")
	}
	for _, c := range cgroupDirs(os.DirFS("/"), "self") {
		file = c.files[0] // memory.limit_in_bytes (v1), memory.max (v2)
		dir = filepath.Join(c.dir, "sandbox-agent-test-"+strconv.Itoa(os.Getpid())+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
		if err := os.Mkdir(dir, 0o755); err != nil {
			continue
		}
		t.Cleanup(func() {
			// rmdir succeeds once the cgroup is empty; its processes are
			// being killed by earlier cleanups.
			for deadline := time.Now().Add(10 * time.Second); os.Remove(dir) != nil && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
			}
		})
		if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
			t.Skipf("cannot set %s in %s: %v", file, dir, err)
		}
		return dir, file
	}
	t.Skip("no writable memory cgroup controller")
	return "", ""
}
