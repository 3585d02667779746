//go:build linux && (amd64 || arm64)

package process

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// supervisorFD is where the supervisor finds its end of the socketpair.
const supervisorFD = 3

// server is the supervisor process: one per daemon (see Supervisor). It
// forks a sub-supervisor per tree (forkTree), forwards what they report,
// and is itself a child subreaper, so that what a sub-supervisor killed by
// someone leaves behind comes here and is killed too (see killStrays).
type server struct {
	conn   *net.UnixConn
	null   int
	deathW *os.File // held only here: when this process dies, every sub-supervisor sees EOF
	deathR int
	report *os.File // read end; sub-supervisors share the write end
	repW   int
	// closeRange is false on kernels before 5.9; the sub-supervisors
	// then close descriptors one by one up to the highest open one.
	closeRange bool
	// nofile is the RLIMIT_NOFILE this process was started with, before
	// the Go runtime raised its soft limit: what the daemon's os/exec gives
	// a child, and so what leaders get (hasNofile: known).
	nofile    [2]uint64
	hasNofile bool
	// nproc is the RLIMIT_NPROC leaders get (hasNproc: lowered, see
	// childNproc).
	nproc    [2]uint64
	hasNproc bool
	// childrenFiles is false without /proc/<pid>/task/<tid>/children
	// (CONFIG_PROC_CHILDREN): children are then found by scanning /proc.
	childrenFiles bool

	wmu sync.Mutex // one event written at a time

	mu    sync.Mutex // trees; held across each fork, so a new tree is known before it can report
	trees map[uint64]*subTree
	byPID map[int]*subTree
}

// subTree is the supervisor's view of one sub-supervisor.
type subTree struct {
	id  uint64
	pid int
	// spec and stack are the sub-supervisor's memory: it shares this
	// process's, so both stay alive until it is reaped.
	spec    *forkSpec
	stack   []byte
	started bool // reported its leader's pid
	failed  bool // reported why its leader could not start
	exited  bool // its leader's exit was forwarded
	gone    bool // "gone" forwarded
	reaped  bool // the sub-supervisor itself was reaped
}

// ServeSupervisor is the supervisor process's main: the daemon's binary
// re-executed once, at daemon start, with the hidden SupervisorCommand and
// its socket on fd 3. It returns when the daemon is gone (its socket
// closes); every sub-supervisor then kills its tree.
func ServeSupervisor() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "sandbox-agent supervisor:", err)
		return 1
	}
	// The daemon stops its processes itself on SIGINT/SIGTERM (with a
	// grace period); a terminal's ^C reaching this process's group must
	// not kill every tree at once. They are caught and dropped, not
	// ignored: an ignored signal stays ignored across execve, and the
	// leaders would inherit that (one ignored when the daemon started,
	// under nohup say, stays so, as with os/exec).
	dropped := make(chan os.Signal, 4)
	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
		if !signal.Ignored(sig) {
			signal.Notify(dropped, sig)
		}
	}
	go func() {
		for range dropped {
		}
	}()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("PR_SET_CHILD_SUBREAPER: %w", err))
	}
	sock := os.NewFile(supervisorFD, "daemon")
	c, err := net.FileConn(sock)
	sock.Close()
	if err != nil {
		return fail(err)
	}
	conn, ok := c.(*net.UnixConn)
	if !ok {
		return fail(fmt.Errorf("fd %d is a %T, not a unix socket", supervisorFD, c))
	}
	sv := &server{conn: conn, trees: map[uint64]*subTree{}, byPID: map[int]*subTree{}}
	if sv.null, err = unix.Open(os.DevNull, unix.O_RDWR|unix.O_CLOEXEC, 0); err != nil {
		return fail(err)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return fail(err)
	}
	sv.deathR, sv.deathW = p[0], os.NewFile(uintptr(p[1]), "death")
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return fail(err)
	}
	sv.report, sv.repW = os.NewFile(uintptr(p[0]), "report"), p[1]
	sv.nofile, sv.hasNofile = startLimit()
	sv.nproc, sv.hasNproc = childNproc()
	sv.closeRange = unix.CloseRange(^uint(0)>>33, ^uint(0)>>33, 0) == nil
	_, err = os.Stat("/proc/thread-self/children")
	sv.childrenFiles = err == nil

	sigchld := make(chan os.Signal, 1)
	signal.Notify(sigchld, syscall.SIGCHLD)
	go sv.reap(sigchld)
	go sv.readReports()
	sv.send(0, repReady, int32(os.Getpid()))
	sv.serve()
	return 0
}

// serve reads the daemon's requests until its socket closes.
func (sv *server) serve() {
	buf := make([]byte, frameMax+frameHeader)
	oob := make([]byte, unix.CmsgSpace(4*8))
	pending := map[uint64][]byte{}
	for {
		n, oobn, flags, _, err := sv.conn.ReadMsgUnix(buf, oob)
		fds := rights(oob[:oobn])
		if err != nil || n == 0 {
			closeFDs(fds)
			return
		}
		if n < frameHeader || flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
			closeFDs(fds)
			continue
		}
		typ, id, payload := buf[0], binary.LittleEndian.Uint64(buf[1:9]), buf[frameHeader:n]
		switch typ {
		case reqData:
			if len(pending[id])+len(payload) > spawnMax {
				delete(pending, id)
				pending[id] = nil // the final frame fails
				continue
			}
			pending[id] = append(pending[id], payload...)
			closeFDs(fds)
		case reqSpawn:
			body := append(pending[id], payload...)
			delete(pending, id)
			sv.spawn(id, body, fds)
			closeFDs(fds)
		case reqAck:
			sv.ack(id)
			closeFDs(fds)
		default:
			closeFDs(fds)
		}
	}
}

func rights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if f, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, f...)
		}
	}
	return fds
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// send writes one event to the daemon. It is never called with mu held,
// so a daemon slow to read cannot stall forks.
func (sv *server) send(id uint64, kind uint32, val int32) {
	sv.wmu.Lock()
	defer sv.wmu.Unlock()
	_, _ = sv.conn.Write(event(id, kind, val))
}

// spawn forks a sub-supervisor for one request. fds are the descriptors
// that came with it; the caller closes them after.
func (sv *server) spawn(id uint64, body []byte, fds []int) {
	r, err := decodeSpawn(body)
	if err != nil || r.path == "" || len(r.argv) == 0 {
		sv.send(id, repFailed, stagePipe<<16|int32(syscall.EINVAL))
		return
	}
	s := &forkSpec{id: id, flags: uintptr(r.flags) & forkRequestFlags, uid: uintptr(r.uid), gid: uintptr(r.gid)}
	s.src[0], s.src[1], s.src[2] = int32(sv.null), int32(sv.deathR), int32(sv.repW)
	for i, slot := range r.stdio {
		s.src[3+i] = int32(sv.null)
		if slot >= 0 {
			if int(slot) >= len(fds) {
				sv.send(id, repFailed, stagePipe<<16|int32(syscall.EBADF))
				return
			}
			s.src[3+i] = int32(fds[slot])
		}
	}
	path, err := syscall.BytePtrFromString(r.path)
	if err != nil {
		sv.send(id, repFailed, stagePipe<<16|int32(syscall.EINVAL))
		return
	}
	argv, err := syscall.SlicePtrFromStrings(r.argv)
	if err != nil {
		sv.send(id, repFailed, stagePipe<<16|int32(syscall.EINVAL))
		return
	}
	envv, err := syscall.SlicePtrFromStrings(r.env)
	if err != nil {
		sv.send(id, repFailed, stagePipe<<16|int32(syscall.EINVAL))
		return
	}
	s.path, s.argv, s.envv = path, &argv[0], &envv[0]
	if r.dir != "" {
		if s.dir, err = syscall.BytePtrFromString(r.dir); err != nil {
			sv.send(id, repFailed, stagePipe<<16|int32(syscall.EINVAL))
			return
		}
	}
	if len(r.groups) > 0 {
		s.groups, s.ngroups = &r.groups[0], uintptr(len(r.groups))
	}
	if !sv.closeRange {
		s.maxFD = int32(highestFD())
	}
	if !sv.childrenFiles {
		s.flags |= forkNoChildrenFile
	}
	if sv.hasNofile {
		s.flags |= forkNofile
		s.nofile = sv.nofile
	}
	if sv.hasNproc {
		s.flags |= forkNproc
		s.nproc = sv.nproc
	}

	stack, top, err := newStack()
	if err != nil {
		sv.send(id, repFailed, stageFork<<16|int32(errnoOf(err)))
		return
	}

	sv.mu.Lock()
	pid, errno := forkTree(s, top)
	if errno == 0 {
		t := &subTree{id: id, pid: pid, spec: s, stack: stack}
		sv.trees[id] = t
		sv.byPID[pid] = t
	}
	sv.mu.Unlock()
	// The spec's pointers keep the request's strings alive; the slices
	// themselves, until here.
	runtime.KeepAlive(argv)
	runtime.KeepAlive(envv)
	runtime.KeepAlive(r)
	if errno != 0 {
		_ = unix.Munmap(stack)
		sv.send(id, repFailed, stageFork<<16|int32(errno))
	}
}

// newStack maps a sub-supervisor's stack: subStack bytes above a guard
// page, so an overflow faults (and kills only the sub-supervisor) instead
// of writing into this process's memory. It returns the mapping and its
// top, 16-byte aligned.
func newStack() ([]byte, uintptr, error) {
	page := os.Getpagesize()
	b, err := unix.Mmap(-1, 0, subStack+page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_STACK)
	if err != nil {
		return nil, 0, err
	}
	if err := unix.Mprotect(b[:page], unix.PROT_NONE); err != nil {
		_ = unix.Munmap(b)
		return nil, 0, err
	}
	top := uintptr(unsafe.Pointer(unsafe.SliceData(b))) + uintptr(len(b))
	return b, top &^ 15, nil
}

func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}

// startLimit finds the RLIMIT_NOFILE this process started with. The Go
// runtime raises its own soft limit at start and restores the original in
// the children it starts (os/exec, syscall.ForkExec), but keeps the
// original to itself; the leaders, forked here without the standard
// library, would get the raised one, which breaks programs that use
// select(2) or close every descriptor up to the limit. So a child is
// started with syscall.ForkExec, stopped at its exec by ptrace before any
// of its code runs, and its limit (the original) read. Where ptrace is not
// allowed (seccomp, Yama), the limit is left as it is.
func startLimit() ([2]uint64, bool) {
	exe, err := os.Executable()
	if err != nil {
		return [2]uint64{}, false
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return [2]uint64{}, false
	}
	defer null.Close()
	fd := null.Fd()
	pid, err := syscall.ForkExec(exe, []string{exe, "--version"}, &syscall.ProcAttr{
		Files: []uintptr{fd, fd, fd},
		Sys:   &syscall.SysProcAttr{Ptrace: true, Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return [2]uint64{}, false
	}
	defer func() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(pid, &ws, syscall.WALL, nil); err != syscall.EINTR {
				return
			}
		}
	}()
	var ws syscall.WaitStatus
	for {
		_, err = syscall.Wait4(pid, &ws, syscall.WALL|syscall.WUNTRACED, nil)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil || !ws.Stopped() {
		return [2]uint64{}, false
	}
	var lim unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &lim); err != nil {
		return [2]uint64{}, false
	}
	return [2]uint64{lim.Cur, lim.Max}, true
}

// childNproc is the RLIMIT_NPROC for leaders: the supervisor's own (the
// daemon's) less a reserve, soft and hard alike, so that what they start
// cannot raise it again. RLIMIT_NPROC counts every process and thread of
// a user; when the daemon and what it starts are one user (a daemon not
// run as root), a fork bomb in a process used to take every slot, and the
// daemon's next thread could not be made: the Go runtime aborts then
// ("pthread_create failed: Resource temporarily unavailable"), and the
// daemon died with everything it ran. With the reserve, the bomb's forks
// fail while the daemon and the supervisor still have that many threads
// to make, and a start past it fails with EAGAIN (503, exhausted). The
// reserve is a quarter of the limit, from 16 to 256 threads, at most half
// of it. No limit, or a limit so small that half of it is nothing: left
// as it is (false). Root ignores the limit, so for a root daemon it only
// matters to what runs as --run-as.
func childNproc() ([2]uint64, bool) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY || rl.Cur < 2 {
		return [2]uint64{}, false
	}
	return [2]uint64{childNprocOf(rl.Cur), childNprocOf(rl.Cur)}, true
}

// childNprocOf is childNproc's arithmetic: limit less its reserve.
func childNprocOf(limit uint64) uint64 {
	reserve := min(max(limit/4, 16), 256, limit/2)
	return limit - reserve
}

// highestFD is the highest descriptor open in this process.
func highestFD() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 1 << 16
	}
	high := 0
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n > high {
			high = n
		}
	}
	return high + 64 // descriptors opened meanwhile by the runtime
}

// ack lets tree id's sub-supervisor reap its leader. Its pid is still
// ours (we reap it), so the signal cannot reach another process.
func (sv *server) ack(id uint64) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if t := sv.trees[id]; t != nil && !t.reaped {
		_ = syscall.Kill(t.pid, ackSignal)
	}
}

// readReports forwards the sub-supervisors' records to the daemon.
func (sv *server) readReports() {
	rec := make([]byte, eventBytes)
	for {
		if _, err := io.ReadFull(sv.report, rec); err != nil {
			return
		}
		id := binary.LittleEndian.Uint64(rec)
		kind := binary.LittleEndian.Uint32(rec[8:])
		val := int32(binary.LittleEndian.Uint32(rec[12:]))
		sv.mu.Lock()
		t := sv.trees[id]
		forward := t != nil
		if forward {
			switch kind {
			case repStarted:
				t.started = true
			case repFailed:
				t.failed = true
			case repExited:
				forward = !t.exited
				t.exited = true
			case repDone:
				forward = !t.gone
				t.gone = true
			}
			sv.forget(t)
		}
		sv.mu.Unlock()
		if forward {
			sv.send(id, kind, val)
		}
	}
}

// forget drops a tree once its sub-supervisor is reaped and the daemon
// has heard the end. Called with mu held.
func (sv *server) forget(t *subTree) {
	if t.reaped && (t.gone || t.failed) {
		delete(sv.trees, t.id)
		delete(sv.byPID, t.pid)
	}
}

// reap collects exited children: sub-supervisors, and strays (what a
// killed sub-supervisor left, reparented here).
func (sv *server) reap(sigchld <-chan os.Signal) {
	for range sigchld {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if err == syscall.EINTR {
				continue
			}
			if err != nil || pid <= 0 {
				break
			}
			sv.reaped(pid, ws)
		}
	}
}

func (sv *server) reaped(pid int, ws syscall.WaitStatus) {
	sv.mu.Lock()
	t := sv.byPID[pid]
	if t == nil {
		// A stray died: there may be more where it came from.
		sv.killStrays()
		sv.mu.Unlock()
		return
	}
	t.reaped = true
	// Nothing runs on its stack or reads its spec any more.
	_ = unix.Munmap(t.stack)
	t.stack, t.spec = nil, nil
	var events [][2]int64
	if !(ws.Exited() && ws.ExitStatus() == 0) {
		// The sub-supervisor did not finish its work (killed, or its
		// setup failed): its tree's rest is a stray now. Say what the
		// daemon is still waiting for.
		sv.killStrays()
		switch {
		case !t.started && !t.failed:
			t.failed = true
			events = append(events, [2]int64{repFailed, stagePipe<<16 | int64(syscall.EIO)})
		case t.started:
			if !t.exited {
				t.exited = true
				events = append(events, [2]int64{repExited, int64(syscall.SIGKILL)})
			}
			if !t.gone {
				t.gone = true
				events = append(events, [2]int64{repDone, 0})
			}
		}
	}
	sv.forget(t)
	sv.mu.Unlock()
	for _, e := range events {
		sv.send(t.id, uint32(e[0]), int32(e[1]))
	}
}

// killStrays SIGKILLs every child of the supervisor that is not a live
// sub-supervisor. Called with mu held, so no fork is half registered.
func (sv *server) killStrays() {
	for _, pid := range sv.children() {
		if t := sv.byPID[pid]; t == nil || t.reaped {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// children lists this process's children, from every thread's children
// file (an orphan is reparented to any thread of a subreaper), or by
// scanning /proc.
func (sv *server) children() []int {
	self := os.Getpid()
	var out []int
	if !sv.childrenFiles {
		eachProcess(func(p procStat) bool {
			if p.ppid == self {
				out = append(out, p.pid)
			}
			return true
		})
		return out
	}
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		b, _ := os.ReadFile("/proc/self/task/" + t.Name() + "/children") // a thread may be gone
		for _, f := range bytes.Fields(b) {
			if pid, err := strconv.Atoi(string(f)); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}
