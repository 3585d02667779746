package main

import (
	"bufio"
	"bytes"
	"io/fs"
	"math"
	"path"
	"strconv"
	"strings"
)

// box is the memory the daemon can really use: the tightest memory limit
// of its cgroup and the cgroups above it, else the machine's physical
// memory. Agents and processes the daemon starts share it.
type box struct {
	bytes  int64
	source string // where it comes from, for the log line at start
	// nofile is the open-file limit in force (the Go runtime raised the
	// soft limit to the hard one at start); 0 when unknown.
	nofile uint64
}

// readBox finds the box of process pid ("self" for the daemon) under root
// (the filesystem root; tests pass a fake one). Both cgroup versions are
// read, as hybrid hosts mount both: v2 memory.max and memory.high, v1
// memory.limit_in_bytes, in the process's cgroup and every ancestor the
// mount shows; a limit of "max", or one at or above physical memory (v1
// says "none" with a huge number), is no limit. Anything unreadable is
// skipped: at worst the box is the machine.
func readBox(root fs.FS, pid string) box {
	b := box{bytes: physicalMemory(root), source: "physical memory (/proc/meminfo)"}
	if b.bytes <= 0 {
		b = box{bytes: math.MaxInt64, source: "unknown (no /proc/meminfo)"}
	}
	for _, c := range cgroupDirs(root, pid) {
		for dir := c.dir; ; dir = path.Dir(dir) {
			for _, file := range c.files {
				if v, ok := readLimit(root, path.Join(dir, file)); ok && v < b.bytes {
					b = box{bytes: v, source: c.version + " " + path.Join(dir, file)}
				}
			}
			if dir == c.mount || dir == "/" || dir == "." {
				break
			}
		}
	}
	return b
}

// cgroupDir is a process's cgroup directory in one hierarchy, and the
// limit files to read there and above it, up to the mount point.
type cgroupDir struct {
	version    string
	dir, mount string
	files      []string
}

// cgroupDirs finds pid's memory cgroup directories: the v1 memory
// hierarchy and the v2 unified one, each where it is mounted.
func cgroupDirs(root fs.FS, pid string) []cgroupDir {
	cg, err := fs.ReadFile(root, "proc/"+pid+"/cgroup")
	if err != nil {
		return nil
	}
	mi, err := fs.ReadFile(root, "proc/"+pid+"/mountinfo")
	if err != nil {
		return nil
	}
	var v1, v2 string // pid's cgroup path in each hierarchy
	var haveV1, haveV2 bool
	for _, line := range strings.Split(string(cg), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2, haveV2 = parts[2], true
		case hasField(parts[1], ",", "memory"):
			v1, haveV1 = parts[2], true
		}
	}
	var out []cgroupDir
	for _, m := range parseMountinfo(mi) {
		switch {
		case haveV2 && m.fstype == "cgroup2":
			out = append(out, cgroupDir{version: "cgroup v2", dir: m.join(v2), mount: m.point, files: []string{"memory.max", "memory.high"}})
			haveV2 = false
		case haveV1 && m.fstype == "cgroup" && hasField(m.super, ",", "memory"):
			out = append(out, cgroupDir{version: "cgroup v1", dir: m.join(v1), mount: m.point, files: []string{"memory.limit_in_bytes"}})
			haveV1 = false
		}
	}
	return out
}

// mount is one line of mountinfo.
type mount struct {
	root, point, fstype, super string
}

// join is where the cgroup at cgroup path p is under this mount: the path
// relative to the mount's root (a container sees only its own subtree).
// A path outside the mount's root (a cgroup namespace shows "/.." for a
// process outside it) is the mount point itself.
func (m mount) join(p string) string {
	rel := p
	if m.root != "/" {
		switch {
		case p == m.root:
			rel = "/"
		case strings.HasPrefix(p, m.root+"/"):
			rel = strings.TrimPrefix(p, m.root)
		default:
			return m.point
		}
	}
	if strings.Contains(rel, "..") {
		return m.point
	}
	return path.Join(m.point, rel)
}

// parseMountinfo reads /proc/PID/mountinfo: ID PARENT MAJ:MIN ROOT POINT
// OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS.
func parseMountinfo(b []byte) []mount {
	var out []mount
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		sep := -1
		for i, v := range f {
			if v == "-" && i >= 6 {
				sep = i
				break
			}
		}
		if sep < 0 || len(f) < sep+4 {
			continue
		}
		out = append(out, mount{root: unescapeMount(f[3]), point: unescapeMount(f[4]), fstype: f[sep+1], super: f[sep+3]})
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 is a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func hasField(list, sep, want string) bool {
	for _, v := range strings.Split(list, sep) {
		if v == want {
			return true
		}
	}
	return false
}

// readLimit reads one cgroup limit file: a byte count, or "max" (none).
func readLimit(root fs.FS, name string) (int64, bool) {
	b, err := fs.ReadFile(root, strings.TrimPrefix(name, "/"))
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v <= 0 {
		return 0, false // "max", or nonsense
	}
	return v, true
}

// physicalMemory is MemTotal from /proc/meminfo, in bytes; 0 when unknown.
func physicalMemory(root fs.FS) int64 {
	b, err := fs.ReadFile(root, "proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}
