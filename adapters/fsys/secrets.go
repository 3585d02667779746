package fsys

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// Secrets is ports.Secrets for the host filesystem (the OS and Root
// backends; a memory filesystem holds no host file and needs none).
//
// What it protects:
//
//   - files, by device and inode: the token file, the policy modules and
//     their configuration files, the agents file. For each, both the file
//     the daemon read (its identity when it was read, so a rename or a
//     hard link still counts) and whatever sits at the configured path now
//     (so an edited file that will be read on the next SIGHUP counts too).
//     SetFiles replaces a group when a reload succeeds.
//   - directories with everything they hold or will hold (SecretFile.Tree):
//     the policy compilation cache, whose files the daemon maps as machine
//     code. A name under one, existing or not, is protected, and so is a
//     directory holding one when it is moved or deleted.
//   - the /proc entries of the daemon's process and of every helper process
//     registered with ProtectPID: /proc/<pid> and everything under it, and
//     /proc/<tid> for each of their threads (a thread id resolves in /proc
//     though it is not listed). /proc/self, /proc/thread-self, /proc/net,
//     /dev/fd/N, /dev/stdin and any other link leading there are caught as
//     the path is resolved, element by element: a procfs directory is the
//     mount's root (inode 1) and the element under it names the process.
//     A procfs directory entered without passing its root (a bind mount of
//     a subdirectory) cannot be placed and counts as protected.
//
// Resolution follows links as the kernel does (at most 40, "..", after a
// link, is the parent of where the link led); a path the kernel would
// refuse (missing, not a directory, no access) is not a secret, since it
// opens nothing.
type Secrets struct {
	self int

	mu    sync.RWMutex
	files map[string][]SecretFile // by group
	trees int                     // how many of files are trees
	pids  map[int]int             // helper pids → registrations

	// procRoot is where the daemon's own procfs is mounted, for the
	// thread check (/proc/<pid>/task/<tid>).
	procRoot string
}

// SecretFile is one protected file.
type SecretFile struct {
	// Path is where the daemon reads it (as configured); whatever is found
	// there at the time of a check is protected.
	Path string
	// Read is the file as it was read (os.File.Stat of the opened file),
	// or nil: its device and inode stay protected while it is in use,
	// whatever it is renamed to or linked as.
	Read fs.FileInfo
	// What describes it in refusals: "its token file".
	What string
	// Tree protects Path as a directory with everything under it.
	Tree bool
}

var _ ports.Secrets = (*Secrets)(nil)

// NewSecrets protects the daemon's own /proc entries; files are added with
// SetFiles.
func NewSecrets() *Secrets {
	return &Secrets{self: os.Getpid(), files: map[string][]SecretFile{}, pids: map[int]int{}, procRoot: "/proc"}
}

// SetFiles replaces the protected files of one group ("tokens",
// "policies", "agents"): call it after each successful (re)load with the
// files read.
func (s *Secrets) SetFiles(group string, files []SecretFile) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[group] = append([]SecretFile(nil), files...)
	s.trees = 0
	for _, g := range s.files {
		for _, f := range g {
			if f.Tree {
				s.trees++
			}
		}
	}
}

// ProtectPID adds the /proc entries of a helper process the daemon runs
// for itself (a supervisor). The returned release removes them again; it
// may be called more than once.
func (s *Secrets) ProtectPID(pid int) (release func()) {
	s.mu.Lock()
	s.pids[pid]++
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.pids[pid]--; s.pids[pid] <= 0 {
				delete(s.pids, pid)
			}
			s.mu.Unlock()
		})
	}
}

// fileID is a file's identity.
type fileID struct{ dev, ino uint64 }

func idOf(fi fs.FileInfo) (fileID, bool) {
	if fi == nil {
		return fileID{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), uint64(st.Ino)}, true //nolint:unconvert // Dev and Ino differ by OS
}

// secretID is one identity to refuse, and why.
type secretID struct {
	id   fileID
	what string
}

// secretPath is a protected file's configured path.
type secretPath struct{ path, what string }

// secretTree is a protected directory: its configured path, where that
// leads now, and its identity when it exists.
type secretTree struct {
	path, real string
	id         fileID
	what       string
}

// resolver is one check: a snapshot of the protected identities and the
// procfs answers learnt on the way.
type resolver struct {
	s     *Secrets
	ids   []secretID
	paths []secretPath
	trees []secretTree
	pids  []int
	procs map[uint64]bool // device → on procfs
}

func (s *Secrets) resolver() *resolver {
	r := &resolver{s: s, procs: map[uint64]bool{}}
	s.mu.RLock()
	for _, group := range s.files {
		for _, f := range group {
			if id, ok := idOf(f.Read); ok {
				r.ids = append(r.ids, secretID{id, f.What})
			}
			if f.Tree && f.Path != "" {
				t := secretTree{path: filepath.Clean(f.Path), what: f.What}
				t.real, _ = filepath.EvalSymlinks(t.path)
				if fi, err := os.Stat(t.path); err == nil {
					t.id, _ = idOf(fi)
				}
				r.trees = append(r.trees, t)
			}
			if f.Path != "" {
				r.paths = append(r.paths, secretPath{f.Path, f.What})
				if fi, err := os.Stat(f.Path); err == nil {
					if id, ok := idOf(fi); ok {
						r.ids = append(r.ids, secretID{id, f.What})
					}
				}
			}
		}
	}
	r.pids = append(r.pids, s.self)
	for pid := range s.pids {
		r.pids = append(r.pids, pid)
	}
	s.mu.RUnlock()
	return r
}

// Secret implements ports.Secrets.
func (s *Secrets) Secret(name string, follow bool) string {
	r := s.resolver()
	why, at := r.walk(name, follow)
	if why != "" || follow || !at.dir {
		return why
	}
	// Removing or moving a directory takes what it holds along.
	prefix := strings.TrimSuffix(at.name, "/") + "/"
	for _, p := range r.paths {
		if real, err := filepath.EvalSymlinks(p.path); err == nil && strings.HasPrefix(real, prefix) {
			return p.what
		}
	}
	return ""
}

// SecretInfo implements ports.Secrets. Only regular files are ever
// protected by identity (they were read with ReadRegular), so anything
// else is answered without looking: extraction asks about every directory
// on the way.
func (s *Secrets) SecretInfo(fi fs.FileInfo) string {
	if fi == nil || (!fi.Mode().IsRegular() && !fi.IsDir()) {
		return ""
	}
	if fi.IsDir() {
		s.mu.RLock()
		trees := s.trees
		s.mu.RUnlock()
		if trees == 0 {
			return "" // extraction asks about every directory on the way
		}
	}
	r := s.resolver()
	if fi.IsDir() {
		// A protected tree, met as extraction enters the target.
		id, _ := idOf(fi)
		return r.tree(id)
	}
	return r.identity(fi)
}

// SecretFile implements ports.Secrets.
func (s *Secrets) SecretFile(f afero.File) string {
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	r := s.resolver()
	if why := r.identity(fi); why != "" {
		return why
	}
	id, ok := idOf(fi)
	if !ok || !fileOnProcfs(f, id.dev, r.procs) {
		return ""
	}
	// A procfs file: where is it? The kernel knows the path it was opened
	// by; judge that path.
	p, ok := openedPath(f)
	if !ok {
		return whyUnplaced
	}
	why, _ := r.walk(p, false)
	return why
}

// Hide implements ports.Secrets.
func (s *Secrets) Hide(dir string, entries []fs.FileInfo) []fs.FileInfo {
	r := s.resolver()
	why, at := r.walk(dir, true)
	if why != "" || at.name == "" {
		// A protected place, or a directory gone meanwhile.
		return entries[:0]
	}
	out := entries[:0]
	for _, fi := range entries {
		p := join(at.name, fi.Name())
		if r.identity(fi) != "" || r.proc(at, fi.Name(), fi, r.onProcfs(at, p, fi)) != "" {
			continue
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if why, _ := r.walk(p, true); why != "" {
				continue
			}
		}
		out = append(out, fi)
	}
	return out
}

// elem is one resolved element of a path: a real directory or file, no
// link.
type elem struct {
	name     string // absolute, clean
	dev      uint64
	proc     bool // on procfs
	procRoot bool // the root of a procfs mount
	dir      bool
}

// maxLinks bounds link resolution, as the kernel's ELOOP does.
const maxLinks = 40

const (
	whyProc     = "its /proc entries"
	whyUnplaced = "a /proc entry the daemon cannot place"
)

// walk resolves name element by element and returns why it is a secret
// (or "") and, when it resolved entirely, its last element.
func (r *resolver) walk(name string, follow bool) (string, elem) {
	if !strings.HasPrefix(name, "/") {
		wd, err := os.Getwd()
		if err != nil {
			return "", elem{}
		}
		name = wd + "/" + name
	}
	root := elem{name: "/", dir: true}
	if fi, err := os.Stat("/"); err == nil {
		id, _ := idOf(fi)
		root.dev = id.dev
	}
	stack := []elem{root}
	todo := split(name)
	links := 0
	for i := 0; i < len(todo); i++ {
		c := todo[i]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
			continue
		}
		parent := stack[len(stack)-1]
		p := join(parent.name, c)
		fi, err := os.Lstat(p)
		if err != nil {
			// Nothing there yet: what would be created must not land in
			// a protected tree.
			return r.underTree(path.Clean(p + "/" + strings.Join(todo[i+1:], "/"))), elem{}
		}
		onProc := r.onProcfs(parent, p, fi)
		if why := r.proc(parent, c, fi, onProc); why != "" {
			return why, elem{}
		}
		last := i == len(todo)-1
		if fi.Mode()&fs.ModeSymlink != 0 && (follow || !last) {
			if links++; links > maxLinks {
				return "", elem{}
			}
			target, err := os.Readlink(p)
			if err != nil {
				return "", elem{}
			}
			if strings.HasPrefix(target, "/") {
				stack = stack[:1]
			}
			todo = append(split(target), todo[i+1:]...)
			i = -1
			continue
		}
		if last {
			// Only the end is judged by identity: a protected file in the
			// middle of a path is a "not a directory" that opens nothing.
			if why := r.identity(fi); why != "" {
				return why, elem{}
			}
		}
		id, _ := idOf(fi)
		if why := r.tree(id); why != "" {
			return why, elem{}
		}
		stack = append(stack, elem{name: p, dev: id.dev, dir: fi.IsDir(), proc: onProc, procRoot: onProc && fi.IsDir() && id.ino == procRootIno})
	}
	return "", stack[len(stack)-1]
}

// tree is why the directory of identity id is a protected tree, or "".
func (r *resolver) tree(id fileID) string {
	for _, t := range r.trees {
		if t.id != (fileID{}) && t.id == id {
			return t.what
		}
	}
	return ""
}

// underTree is why the absolute clean path p, which does not exist, lies
// in a protected tree, or "".
func (r *resolver) underTree(p string) string {
	for _, t := range r.trees {
		for _, root := range []string{t.path, t.real} {
			if _, in := domain.RootRelative(root, p); root != "" && in {
				return t.what
			}
		}
	}
	return ""
}

// procRootIno is the inode of every procfs mount's root directory.
const procRootIno = 1

// identity is why fi is one of the protected files, or "".
func (r *resolver) identity(fi fs.FileInfo) string {
	id, ok := idOf(fi)
	if !ok {
		return ""
	}
	for _, s := range r.ids {
		if s.id == id {
			return s.what
		}
	}
	return ""
}

// proc is why the element name (lstat fi, on procfs when onProc) under
// parent is a protected /proc entry, or "".
func (r *resolver) proc(parent elem, name string, fi fs.FileInfo, onProc bool) string {
	id, ok := idOf(fi)
	if !ok || !onProc {
		return ""
	}
	if fi.IsDir() && id.ino == procRootIno {
		return "" // a procfs root
	}
	if parent.procRoot && parent.dev == id.dev {
		if pid, err := strconv.Atoi(name); err == nil && pid > 0 && r.protectedPID(pid) {
			return whyProc
		}
		return ""
	}
	if !parent.proc || parent.dev != id.dev {
		return whyUnplaced
	}
	return ""
}

// protectedPID reports whether pid is the daemon's, a helper's, or one of
// their threads.
func (r *resolver) protectedPID(pid int) bool {
	for _, p := range r.pids {
		if p == pid {
			return true
		}
	}
	for _, p := range r.pids {
		if _, err := os.Lstat(r.s.procRoot + "/" + strconv.Itoa(p) + "/task/" + strconv.Itoa(pid)); err == nil {
			return true
		}
	}
	return false
}

// onProcfs reports whether the element at p (lstat fi) under parent is on
// procfs, asking statfs once per device. A link is measured at its
// parent: statfs would follow it.
func (r *resolver) onProcfs(parent elem, p string, fi fs.FileInfo) bool {
	id, ok := idOf(fi)
	if !ok {
		return false
	}
	if v, ok := r.procs[id.dev]; ok {
		return v
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		p = parent.name
	}
	v := isProcfs(p)
	r.procs[id.dev] = v
	return v
}

func split(p string) []string { return strings.Split(p, "/") }

func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}
