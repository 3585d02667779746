//go:build linux && (amd64 || arm64)

package process

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file is the code that runs in a forked copy of the supervisor
// (serve_linux.go) without exec: each tree's sub-supervisor, and the
// leader it forks before that execs the command.
//
// Why fork without exec: a tree needs a subreaper of its own (with one
// subreaper for every tree, an orphan cannot be told apart from another
// tree's: a double fork escapes lineage), and exec'ing the daemon's
// binary for each one costs ~6 ms of Go start-up per spawn, which is what
// this design removes. The supervisor is a small Go process, so a fork of
// it is cheap.
//
// What is safe in a forked child of a Go program is what the standard
// library's syscall.forkAndExecInChild1 does: only the forking thread
// exists in the child, so every lock another thread held stays held
// forever; signals are blocked around the fork (runtime_BeforeFork) so no
// Go signal handler runs in the child; the goroutine's stack guard is
// spoiled so any stack growth crashes loudly. Every function that runs in
// the child is therefore //go:nosplit (no stack check; the linker proves
// the chain fits), //go:norace and //go:nocheckptr (no instrumentation
// calls into the runtime), allocates nothing, writes no pointer (no write
// barrier), calls nothing but raw system calls (syscall.RawSyscall6 is
// nosplit assembly underneath) and never returns into normal Go code: it
// ends in execve or exit_group. Everything it reads is built before the
// fork in a forkSpec; everything it writes is plain memory in that spec.
//
// The sub-supervisor never unblocks a signal: it reads SIGCHLD and
// SIGUSR1 (the supervisor's go-ahead to reap the leader, see ackSignal)
// from a signalfd, and learns that the supervisor died when the death
// pipe's write end (held by the supervisor alone) closes.

// The linkname'd runtime hooks the standard library's fork uses (and, as
// the runtime's own comments say, other packages such as gVisor do too):
// block signals and spoil the stack guard before the fork, undo that in
// the parent after it, and in a child about to exec, reset the signal
// handlers the runtime installed and restore the signal mask.
//
//go:linkname runtime_BeforeFork syscall.runtime_BeforeFork
func runtime_BeforeFork()

//go:linkname runtime_AfterFork syscall.runtime_AfterFork
func runtime_AfterFork()

//go:linkname runtime_AfterForkInChild syscall.runtime_AfterForkInChild
func runtime_AfterForkInChild()

// Descriptors in a sub-supervisor, after it has moved its own to fixed
// numbers and closed every other one it inherited.
const (
	subNull   = 3 // /dev/null, for its own stdio
	subDeath  = 4 // read end of the death pipe: EOF/HUP when the supervisor is gone
	subReport = 5 // write end of the report pipe, shared by every sub-supervisor
	subIn     = 6 // the leader's stdin, stdout, stderr
	subOut    = 7
	subErr    = 8
	subSlots  = 6 // how many of the above
	subFirst  = 3
)

// forkSpec flags.
const (
	forkSetsid         = 1 << iota // new session (a terminal's leader)
	forkSetpgid                    // new process group
	forkCtty                       // fd 0 becomes the controlling terminal (with forkSetsid)
	forkCred                       // setgroups, setresgid, setresuid
	forkNofile                     // restore the soft RLIMIT_NOFILE
	forkNoChildrenFile             // find children by scanning /proc (no children files; tests)

	// forkRequestFlags are the flags a daemon's request may set.
	forkRequestFlags = forkSetsid | forkSetpgid | forkCtty | forkCred | forkNofile | forkNoChildrenFile
)

// Stages a leader can fail at, reported with the errno.
const (
	stageFork = iota + 1
	stageSession
	stageCred
	stageChdir
	stageStdio
	stageCtty
	stageExec
	stagePipe // the sub-supervisor's own setup
)

// Report kinds, sub-supervisor → supervisor.
const (
	repStarted = iota + 1 // val: the leader's pid
	repFailed             // val: stage<<16 | errno
	repExited             // val: the leader's wait status
	repDone               // the tree is gone; the sub-supervisor exits next
	repReady              // supervisor → daemon, once: set up (val: its pid)
)

// si_code values of a SIGCHLD siginfo (CLD_EXITED...).
const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)

// ackSignal is how the supervisor tells a sub-supervisor that the daemon
// has seen its leader exit and will not signal its group again, so the
// leader may be reaped (its pid, the group id, freed).
const ackSignal = syscall.SIGUSR1

// report is one record on the report pipe: small enough (16 bytes, under
// PIPE_BUF) that writes from many sub-supervisors never interleave.
type report struct {
	id   uint64
	kind uint32
	val  int32
}

// pollFD is struct pollfd.
type pollFD struct {
	fd      int32
	events  int16
	revents int16
}

// forkSpec is everything a sub-supervisor and its leader need. The
// supervisor fills the first part before the fork; the children only read
// it, and write only the scratch part (no pointers there).
type forkSpec struct {
	id      uint64
	path    *byte  // resolved command, NUL-terminated
	argv    **byte // NULL-terminated
	envv    **byte // NULL-terminated
	dir     *byte  // nil: stay in the supervisor's directory
	groups  *uint32
	ngroups uintptr
	uid     uintptr
	gid     uintptr
	flags   uintptr
	nofile  [2]uint64 // soft and hard RLIMIT_NOFILE for the leader (forkNofile)
	// src are the supervisor's descriptors to move to subNull...subErr.
	src [subSlots]int32
	// maxFD bounds the descriptors to close where close_range is missing.
	maxFD int32

	// Scratch, written in the children.
	tmp     [subSlots]int32
	leader  int32
	self    int32
	parent  int32
	pipe    [2]int32
	fail    [2]int32 // stage, errno
	rec     report
	sigmask uint64
	pfd     [2]pollFD
	tick    [2]int64 // timespec: the kill phase's poll interval
	si      [128]byte
	name    [32]byte
	buf     [4096]byte
	stat    [512]byte
}

// childrenPath lists the calling thread's children (Linux 3.5+, with
// CONFIG_PROC_CHILDREN, which every major distribution enables).
var childrenPath = [...]byte{'/', 'p', 'r', 'o', 'c', '/', 't', 'h', 'r', 'e', 'a', 'd', '-', 's', 'e', 'l', 'f', '/', 'c', 'h', 'i', 'l', 'd', 'r', 'e', 'n', 0}

var procPath = [...]byte{'/', 'p', 'r', 'o', 'c', 0}

// forkTree forks a sub-supervisor for s and returns its pid in the
// supervisor. In the child it runs subSupervise, which never returns.
// The caller keeps s alive until forkTree has returned.
//
//go:noinline
//go:norace
//go:nocheckptr
func forkTree(s *forkSpec) (pid int, err syscall.Errno) {
	runtime_BeforeFork()
	r, _, e := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if e != 0 || r != 0 {
		runtime_AfterFork()
		return int(r), e
	}
	subSupervise(s)
	return 0, 0 // not reached
}

//go:nosplit
//go:norace
//go:nocheckptr
func rawExit(code uintptr) {
	for {
		syscall.RawSyscall6(syscall.SYS_EXIT_GROUP, code, 0, 0, 0, 0, 0)
	}
}

//go:nosplit
//go:norace
//go:nocheckptr
func rawClose(fd uintptr) {
	syscall.RawSyscall6(syscall.SYS_CLOSE, fd, 0, 0, 0, 0, 0)
}

// sendReport writes one record to the report pipe. A failed write (the
// supervisor is gone) is not retried: nobody would read it.
//
//go:nosplit
//go:norace
//go:nocheckptr
func sendReport(s *forkSpec, kind uint32, val int32) {
	s.rec.id = s.id
	s.rec.kind = kind
	s.rec.val = val
	for {
		_, _, e := syscall.RawSyscall6(syscall.SYS_WRITE, subReport, uintptr(unsafe.Pointer(&s.rec)), unsafe.Sizeof(s.rec), 0, 0, 0)
		if e != syscall.EINTR {
			return
		}
	}
}

// subSupervise is a tree's sub-supervisor: a child subreaper that forks
// the leader, reports its pid (or why it failed), its exit status, and
// when nothing of its tree is left. Once the leader has exited, or the
// supervisor is gone, it SIGKILLs every child it has, round after round
// (orphans of the tree are reparented to it, the subreaper, as their
// parents die), until it has none.
//
//go:nosplit
//go:norace
//go:nocheckptr
func subSupervise(s *forkSpec) {
	var (
		r1       uintptr
		e        syscall.Errno
		i        int
		pid      int32
		exited   bool // the leader has exited (a zombie, or reaped)
		reaped   bool // the leader has been reaped
		acked    bool // the supervisor allows reaping the leader
		dying    bool // the supervisor is gone
		timeout  uintptr
		infinite bool
	)
	r1, _, _ = syscall.RawSyscall6(syscall.SYS_GETPID, 0, 0, 0, 0, 0, 0)
	s.self = int32(r1)
	r1, _, _ = syscall.RawSyscall6(syscall.SYS_GETPPID, 0, 0, 0, 0, 0, 0)
	s.parent = int32(r1)

	// Move the descriptors this tree needs to subNull..subErr, close
	// every other one (other trees' pipes, the daemon's socket, the
	// supervisor's own), and point stdio at /dev/null. The first pass
	// lifts them above the target range so the second cannot clobber a
	// source.
	for i = 0; i < subSlots; i++ {
		r1, _, e = syscall.RawSyscall6(syscall.SYS_FCNTL, uintptr(s.src[i]), syscall.F_DUPFD_CLOEXEC, subFirst+subSlots, 0, 0, 0)
		if e != 0 {
			rawExit(125)
		}
		s.tmp[i] = int32(r1)
	}
	for i = 0; i < subSlots; i++ {
		if _, _, e = syscall.RawSyscall6(syscall.SYS_DUP3, uintptr(s.tmp[i]), uintptr(subFirst+i), syscall.O_CLOEXEC, 0, 0, 0); e != 0 {
			rawExit(125)
		}
	}
	_, _, e = syscall.RawSyscall6(unix.SYS_CLOSE_RANGE, subFirst+subSlots, uintptr(^uint32(0)), 0, 0, 0, 0)
	if e != 0 {
		for i = subFirst + subSlots; i <= int(s.maxFD); i++ {
			rawClose(uintptr(i))
		}
	}
	for i = 0; i < 3; i++ {
		syscall.RawSyscall6(syscall.SYS_DUP3, subNull, uintptr(i), 0, 0, 0, 0)
	}

	// Nothing this tree starts outlives it: orphans come here, not to
	// the supervisor or init.
	if _, _, e = syscall.RawSyscall6(syscall.SYS_PRCTL, unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0, 0); e != 0 {
		sendReport(s, repFailed, stagePipe<<16|int32(e))
		rawExit(0)
	}
	// Every signal is blocked (runtime_BeforeFork); SIGCHLD and the ack
	// are read from a signalfd instead.
	s.sigmask = 1<<(syscall.SIGCHLD-1) | 1<<(ackSignal-1)
	r1, _, e = syscall.RawSyscall6(syscall.SYS_SIGNALFD4, ^uintptr(0), uintptr(unsafe.Pointer(&s.sigmask)), 8, syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0, 0)
	if e != 0 {
		sendReport(s, repFailed, stagePipe<<16|int32(e))
		rawExit(0)
	}
	s.pfd[0].fd = int32(r1)
	s.pfd[0].events = unix.POLLIN
	s.pfd[1].fd = subDeath
	s.pfd[1].events = unix.POLLIN

	if _, _, e = syscall.RawSyscall6(syscall.SYS_PIPE2, uintptr(unsafe.Pointer(&s.pipe)), syscall.O_CLOEXEC, 0, 0, 0, 0); e != 0 {
		sendReport(s, repFailed, stagePipe<<16|int32(e))
		rawExit(0)
	}
	r1, _, e = syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if e != 0 {
		sendReport(s, repFailed, stageFork<<16|int32(e))
		rawExit(0)
	}
	if r1 == 0 {
		leaderExec(s)
	}
	pid = int32(r1)
	s.leader = pid
	// The leader has its own copies; the tree's pipes must end when the
	// tree does, so this process keeps none.
	rawClose(uintptr(s.pipe[1]))
	rawClose(subIn)
	rawClose(subOut)
	rawClose(subErr)
	s.fail[0], s.fail[1] = 0, 0
	for {
		r1, _, e = syscall.RawSyscall6(syscall.SYS_READ, uintptr(s.pipe[0]), uintptr(unsafe.Pointer(&s.fail)), unsafe.Sizeof(s.fail), 0, 0, 0)
		if e != syscall.EINTR {
			break
		}
	}
	rawClose(uintptr(s.pipe[0]))
	if e == 0 && r1 == unsafe.Sizeof(s.fail) {
		// The leader failed before exec and exits 127; nothing else
		// of the tree can exist yet.
		syscall.RawSyscall6(syscall.SYS_WAIT4, uintptr(pid), 0, 0, 0, 0, 0)
		sendReport(s, repFailed, s.fail[0]<<16|s.fail[1])
		rawExit(0)
	}
	sendReport(s, repStarted, pid)

	for {
		// Signals: SIGCHLD wakes the reaping below; the ack counts only
		// from the supervisor.
		for {
			r1, _, e = syscall.RawSyscall6(syscall.SYS_READ, uintptr(s.pfd[0].fd), uintptr(unsafe.Pointer(&s.si)), uintptr(len(s.si)), 0, 0, 0)
			if e != 0 || r1 < uintptr(len(s.si)) {
				break
			}
			// struct signalfd_siginfo: ssi_signo at 0, ssi_pid at 12.
			if *(*uint32)(unsafe.Pointer(&s.si[0])) == uint32(ackSignal) && *(*int32)(unsafe.Pointer(&s.si[12])) == s.parent {
				acked = true
			}
		}

		// Reap. Until the daemon has acknowledged the leader's exit, the
		// leader must stay a zombie (its pid is the group id the daemon
		// signals), so children are first peeked at and only the others
		// reaped.
		for !reaped {
			for i = range s.si {
				s.si[i] = 0
			}
			_, _, e = syscall.RawSyscall6(syscall.SYS_WAITID, unix.P_ALL, 0, uintptr(unsafe.Pointer(&s.si)), unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, 0, 0)
			// siginfo_t for SIGCHLD: si_code at 8, si_pid at 16, si_status at 24.
			if e != 0 || *(*int32)(unsafe.Pointer(&s.si[16])) == 0 {
				break
			}
			if *(*int32)(unsafe.Pointer(&s.si[16])) != pid {
				syscall.RawSyscall6(syscall.SYS_WAIT4, uintptr(*(*int32)(unsafe.Pointer(&s.si[16]))), 0, syscall.WNOHANG, 0, 0, 0)
				continue
			}
			if !exited {
				exited = true
				sendReport(s, repExited, waitStatus(*(*int32)(unsafe.Pointer(&s.si[8])), *(*int32)(unsafe.Pointer(&s.si[24]))))
			}
			if !acked && !dying {
				break
			}
			syscall.RawSyscall6(syscall.SYS_WAIT4, uintptr(pid), 0, 0, 0, 0, 0)
			reaped = true
		}
		if reaped {
			for {
				r1, _, e = syscall.RawSyscall6(syscall.SYS_WAIT4, ^uintptr(0), 0, syscall.WNOHANG, 0, 0, 0)
				if e != syscall.EINTR && (e != 0 || r1 == 0) {
					break
				}
			}
			if e == syscall.ECHILD {
				break // nothing of the tree is left
			}
		}

		// Once the leader is gone (or nobody is left to ask for the
		// tree), everything it left goes.
		if exited || dying {
			killChildren(s, exited && !reaped)
		}

		// ppoll writes the time left back into its timeout.
		s.tick[0], s.tick[1] = 0, 20*1000*1000 // 20 ms
		timeout = uintptr(unsafe.Pointer(&s.tick))
		infinite = !exited && !dying
		if infinite {
			timeout = 0
		}
		s.pfd[0].revents, s.pfd[1].revents = 0, 0
		syscall.RawSyscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&s.pfd)), 2, timeout, 0, 0, 0)
		if s.pfd[1].revents != 0 {
			// EOF (or an error) on the death pipe: the supervisor, and
			// so the daemon, is gone.
			dying = true
			s.pfd[1].fd = -1
		}
	}
	sendReport(s, repDone, 0)
	rawExit(0)
}

// waitStatus encodes a waitid result as the wait status wait4 would give.
//
//go:nosplit
//go:norace
//go:nocheckptr
func waitStatus(code, status int32) int32 {
	switch code {
	case cldExited:
		return (status & 0xff) << 8
	case cldKilled:
		return status & 0x7f
	case cldDumped:
		return status&0x7f | 0x80
	}
	return status & 0x7f
}

// killChildren SIGKILLs every child of the sub-supervisor but a leader
// that has already exited (skipLeader). A child is never reaped here, so
// its pid cannot have been reused; killing a zombie is harmless.
//
//go:nosplit
//go:norace
//go:nocheckptr
func killChildren(s *forkSpec, skipLeader bool) {
	var (
		r1, fd uintptr
		e      syscall.Errno
		i      uintptr
		n      int32
		digits bool
	)
	if s.flags&forkNoChildrenFile == 0 {
		fd, _, e = syscall.RawSyscall6(syscall.SYS_OPENAT, ^uintptr(99), uintptr(unsafe.Pointer(&childrenPath[0])), syscall.O_RDONLY|syscall.O_CLOEXEC, 0, 0, 0)
	}
	if s.flags&forkNoChildrenFile != 0 || e != 0 {
		killChildrenScan(s, skipLeader)
		return
	}
	// "pid pid pid " in chunks; a number may span two reads.
	for {
		r1, _, e = syscall.RawSyscall6(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&s.buf)), uintptr(len(s.buf)), 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 || r1 == 0 {
			break
		}
		for i = 0; i < r1; i++ {
			c := s.buf[i]
			if c >= '0' && c <= '9' {
				n = n*10 + int32(c-'0')
				digits = true
				continue
			}
			if digits && !(skipLeader && n == s.leader) {
				syscall.RawSyscall6(syscall.SYS_KILL, uintptr(n), uintptr(syscall.SIGKILL), 0, 0, 0, 0)
			}
			n, digits = 0, false
		}
	}
	if digits && !(skipLeader && n == s.leader) {
		syscall.RawSyscall6(syscall.SYS_KILL, uintptr(n), uintptr(syscall.SIGKILL), 0, 0, 0, 0)
	}
	rawClose(fd)
}

// killChildrenScan is killChildren without /proc/<pid>/task/<tid>/children:
// every /proc/<pid>/stat is read for its parent pid.
//
//go:nosplit
//go:norace
//go:nocheckptr
func killChildrenScan(s *forkSpec, skipLeader bool) {
	var (
		dir, fd, r1, n1 uintptr
		off, j          uintptr
		e               syscall.Errno
		pid, ppid, n    int32
		reclen          uint16
		k               int
		paren           int
	)
	dir, _, e = syscall.RawSyscall6(syscall.SYS_OPENAT, ^uintptr(99), uintptr(unsafe.Pointer(&procPath[0])), syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0, 0, 0)
	if e != 0 {
		return
	}
	for {
		r1, _, e = syscall.RawSyscall6(syscall.SYS_GETDENTS64, dir, uintptr(unsafe.Pointer(&s.buf)), uintptr(len(s.buf)), 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 || r1 == 0 {
			break
		}
		// struct linux_dirent64: d_ino 8, d_off 8, d_reclen 2, d_type 1, d_name.
		for off = 0; off+19 < r1; off += uintptr(reclen) {
			reclen = *(*uint16)(unsafe.Pointer(&s.buf[off+16]))
			if reclen == 0 {
				break
			}
			// "/proc/" + name + "/stat", if the name is a pid.
			pid = 0
			k = 0
			s.name[k], s.name[k+1], s.name[k+2], s.name[k+3], s.name[k+4], s.name[k+5] = '/', 'p', 'r', 'o', 'c', '/'
			k = 6
			for j = off + 19; j < off+uintptr(reclen) && s.buf[j] != 0 && k < len(s.name)-7; j++ {
				if s.buf[j] < '0' || s.buf[j] > '9' {
					pid = -1
					break
				}
				pid = pid*10 + int32(s.buf[j]-'0')
				s.name[k] = s.buf[j]
				k++
			}
			if pid <= 0 || pid == s.self || (skipLeader && pid == s.leader) {
				continue
			}
			s.name[k], s.name[k+1], s.name[k+2], s.name[k+3], s.name[k+4], s.name[k+5] = '/', 's', 't', 'a', 't', 0
			fd, _, e = syscall.RawSyscall6(syscall.SYS_OPENAT, ^uintptr(99), uintptr(unsafe.Pointer(&s.name[0])), syscall.O_RDONLY|syscall.O_CLOEXEC, 0, 0, 0)
			if e != 0 {
				continue
			}
			n1, _, e = syscall.RawSyscall6(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&s.stat)), uintptr(len(s.stat)), 0, 0, 0)
			rawClose(fd)
			if e != 0 {
				continue
			}
			// "pid (comm) S ppid ...": the command may hold ')', so
			// the last one ends it.
			paren = -1
			for k = 0; k < int(n1); k++ {
				if s.stat[k] == ')' {
					paren = k
				}
			}
			if paren < 0 || paren+4 >= int(n1) {
				continue
			}
			ppid, n = 0, 0
			for k = paren + 4; k < int(n1) && s.stat[k] >= '0' && s.stat[k] <= '9'; k++ {
				ppid = ppid*10 + int32(s.stat[k]-'0')
				n++
			}
			if n > 0 && ppid == s.self {
				syscall.RawSyscall6(syscall.SYS_KILL, uintptr(pid), uintptr(syscall.SIGKILL), 0, 0, 0, 0)
			}
		}
	}
	rawClose(dir)
}

// leaderExec is the leader between its fork and exec: its session or
// group, credentials, directory, stdio and terminal, then execve. A
// failure is written (stage, errno) to the sub-supervisor's pipe, and the
// leader exits 127.
//
//go:nosplit
//go:norace
//go:nocheckptr
func leaderExec(s *forkSpec) {
	var (
		e     syscall.Errno
		r1    uintptr
		stage int32
	)
	stage = stageSession
	if s.flags&forkSetsid != 0 {
		_, _, e = syscall.RawSyscall6(syscall.SYS_SETSID, 0, 0, 0, 0, 0, 0)
	} else if s.flags&forkSetpgid != 0 {
		_, _, e = syscall.RawSyscall6(syscall.SYS_SETPGID, 0, 0, 0, 0, 0, 0)
	}
	if e != 0 {
		goto fail
	}
	if s.flags&forkCred != 0 {
		stage = stageCred
		if _, _, e = syscall.RawSyscall6(syscall.SYS_SETGROUPS, s.ngroups, uintptr(unsafe.Pointer(s.groups)), 0, 0, 0, 0); e != 0 {
			goto fail
		}
		if _, _, e = syscall.RawSyscall6(syscall.SYS_SETRESGID, s.gid, s.gid, s.gid, 0, 0, 0); e != 0 {
			goto fail
		}
		if _, _, e = syscall.RawSyscall6(syscall.SYS_SETRESUID, s.uid, s.uid, s.uid, 0, 0, 0); e != 0 {
			goto fail
		}
	}
	if s.dir != nil {
		stage = stageChdir
		if _, _, e = syscall.RawSyscall6(syscall.SYS_CHDIR, uintptr(unsafe.Pointer(s.dir)), 0, 0, 0, 0, 0); e != 0 {
			goto fail
		}
	}
	// Killed with its sub-supervisor (set after the credentials, which
	// clear it); the check covers a sub-supervisor that died already.
	syscall.RawSyscall6(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0, 0)
	r1, _, _ = syscall.RawSyscall6(syscall.SYS_GETPPID, 0, 0, 0, 0, 0, 0)
	if int32(r1) != s.self {
		rawExit(127)
	}
	stage = stageStdio
	if _, _, e = syscall.RawSyscall6(syscall.SYS_DUP3, subIn, 0, 0, 0, 0, 0); e != 0 {
		goto fail
	}
	if _, _, e = syscall.RawSyscall6(syscall.SYS_DUP3, subOut, 1, 0, 0, 0, 0); e != 0 {
		goto fail
	}
	if _, _, e = syscall.RawSyscall6(syscall.SYS_DUP3, subErr, 2, 0, 0, 0, 0); e != 0 {
		goto fail
	}
	if s.flags&forkCtty != 0 {
		stage = stageCtty
		if _, _, e = syscall.RawSyscall6(syscall.SYS_IOCTL, 0, syscall.TIOCSCTTY, 1, 0, 0, 0); e != 0 {
			goto fail
		}
	}
	if s.flags&forkNofile != 0 {
		syscall.RawSyscall6(syscall.SYS_PRLIMIT64, 0, syscall.RLIMIT_NOFILE, uintptr(unsafe.Pointer(&s.nofile)), 0, 0, 0)
	}
	// The runtime's handlers go back to the defaults (execve would do it,
	// but a signal may come first) and the signal mask is restored.
	runtime_AfterForkInChild()
	stage = stageExec
	_, _, e = syscall.RawSyscall6(syscall.SYS_EXECVE, uintptr(unsafe.Pointer(s.path)), uintptr(unsafe.Pointer(s.argv)), uintptr(unsafe.Pointer(s.envv)), 0, 0, 0)
fail:
	s.fail[0], s.fail[1] = stage, int32(e)
	syscall.RawSyscall6(syscall.SYS_WRITE, uintptr(s.pipe[1]), uintptr(unsafe.Pointer(&s.fail)), unsafe.Sizeof(s.fail), 0, 0, 0)
	rawExit(127)
}
