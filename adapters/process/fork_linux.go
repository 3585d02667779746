//go:build linux && (amd64 || arm64)

package process

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file is the code that runs in each tree's sub-supervisor and in
// its leader between fork and exec, without exec'ing anything of ours.
//
// Why no exec: a tree needs a subreaper of its own (with one subreaper for
// every tree, an orphan cannot be told apart from another tree's: a double
// fork escapes lineage), and exec'ing the daemon's binary for each one
// costs ~6 ms of Go start-up per spawn, which is what this design removes.
//
// How: the supervisor (serve_linux.go) starts a sub-supervisor with
// clone(CLONE_VM) on a stack of its own (cloneVM, in assembly): a separate
// process, with its own pid, descriptors and signal handlers, that shares
// the supervisor's memory, so its start copies no page tables and it holds
// no private copy of the supervisor's heap. The sub-supervisor starts the
// leader with vfork semantics (rawVfork: CLONE_VM|CLONE_VFORK), and the
// leader execs the command. Under the race detector the sub-supervisor is
// a fork instead (same code, a copy of the memory; see race_on.go).
//
// What is safe there is what the standard library's
// syscall.forkAndExecInChild1 allows a forked child, and stricter, since
// the memory is shared with a running Go runtime: only the code of this
// file runs; every function is //go:nosplit (no stack check; the linker
// proves the chain fits), //go:norace and //go:nocheckptr (no
// instrumentation calls), allocates nothing, writes no pointer, touches no
// runtime state (not even the g register), indexes buffers only after
// explicit bounds checks (a failed bounds check would run the runtime's
// panic path on a stack it does not own), calls nothing but raw system
// calls, and ends in exit_group or execve. It reads only its forkSpec,
// which the supervisor keeps alive until the sub-supervisor is reaped, and
// writes only the scratch part of it and its own stack. Signals stay
// blocked (runtime_BeforeFork blocks them on the cloning thread), so no Go
// signal handler ever runs there; a fault kills it (the kernel resets a
// blocked synchronous signal to its default).
//
// The sub-supervisor reads SIGCHLD and SIGUSR1 (the supervisor's go-ahead
// to reap the leader, see ackSignal) from a signalfd, and learns that the
// supervisor died when the death pipe's write end (held by the supervisor
// alone) closes.

// The linkname'd runtime hooks the standard library's fork uses (and, as
// the runtime's own comments say, other packages such as gVisor do too):
// block signals on the calling thread (and keep the goroutine on it)
// before the clone, and undo that after it.
//
//go:linkname runtime_BeforeFork syscall.runtime_BeforeFork
func runtime_BeforeFork()

//go:linkname runtime_AfterFork syscall.runtime_AfterFork
func runtime_AfterFork()

// cloneVM is clone(flags) with the child on a stack of its own, running
// subSupervise(s) there and never returning (clone_linux_*.s); keepg
// gives the child the goroutine register (a forked child only).
//
//go:noescape
func cloneVM(flags, stack uintptr, s *forkSpec, keepg uintptr) (pid uintptr, errno uintptr)

// rawVfork is clone(flags) for a CLONE_VM|CLONE_VFORK child, in assembly
// (vfork_linux_*.s) so the child cannot overwrite the return address the
// parent needs. A Go call to it is a direct call, with no ABI wrapper
// frame the child could clobber either.
//
//go:noescape
func rawVfork(flags uintptr) (pid uintptr, errno uintptr)

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
	forkNproc                      // lower the tree's RLIMIT_NPROC (childNproc)
	forkNoChildrenFile             // find children by scanning /proc (no children files; tests)
	forkSlowKill                   // pause between reading the children and killing them (tests)

	// forkRequestFlags are the flags a daemon's request may set.
	forkRequestFlags = forkSetsid | forkSetpgid | forkCtty | forkCred | forkNoChildrenFile | forkSlowKill
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
// supervisor fills the first part before the clone and never writes it
// again; the children only read it, and write only the scratch part (no
// pointers there).
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
	nproc   [2]uint64 // soft and hard RLIMIT_NPROC for the tree (forkNproc)
	// src are the supervisor's descriptors to move to subNull...subErr.
	src [subSlots]int32
	// maxFD bounds the descriptors to close where close_range is missing.
	maxFD int32

	// Scratch, written in the children.
	tmp     [subSlots]int32
	leader  int32
	self    int32
	parent  int32
	fail    [2]int32 // stage, errno, left by a leader that could not exec
	rec     report
	sigmask uint64
	pfd     [2]pollFD
	tick    [2]int64  // timespec: the kill phase's poll interval
	pause   [2]int64  // timespec: forkSlowKill's pause
	seen    int32     // children the last kill pass listed, an exited leader it skipped aside
	act     [4]uint64 // struct sigaction (handler, flags, restorer, mask)
	dfl     [4]uint64 // SIG_DFL, no flags: stays zero
	si      [128]byte
	name    [32]byte
	buf     [4096]byte
	stat    [512]byte
}

// childrenPath lists the calling thread's children (Linux 3.5+, with
// CONFIG_PROC_CHILDREN, which every major distribution enables).
var childrenPath = [...]byte{'/', 'p', 'r', 'o', 'c', '/', 't', 'h', 'r', 'e', 'a', 'd', '-', 's', 'e', 'l', 'f', '/', 'c', 'h', 'i', 'l', 'd', 'r', 'e', 'n', 0}

var procPath = [...]byte{'/', 'p', 'r', 'o', 'c', 0}

// subStack is the size of a sub-supervisor's stack (its leader runs on it
// too until exec); the linker bounds the chain of nosplit frames far below.
const subStack = 32 << 10

// forkTree starts a sub-supervisor for s on stack (the top of a region of
// subStack bytes the caller keeps mapped, as it keeps s, until the
// sub-supervisor is reaped) and returns its pid.
func forkTree(s *forkSpec, stack uintptr) (pid int, err syscall.Errno) {
	flags, keepg := uintptr(syscall.SIGCHLD|syscall.CLONE_VM), uintptr(0)
	if raceBuild {
		flags, keepg = uintptr(syscall.SIGCHLD), 1
	}
	runtime_BeforeFork()
	r, e := cloneVM(flags, stack, s, keepg)
	runtime_AfterFork()
	return int(r), syscall.Errno(e)
}

// subEntry is how cloneVM's child calls subSupervise: through a func
// value, in the register ABI, with no wrapper in between.
var subEntry = subSupervise

// at is &b[i] for a byte buffer, without a bounds check: callers check i
// against the buffer's length themselves.
//
//go:nosplit
//go:norace
//go:nocheckptr
func at(b *byte, i uintptr) *byte {
	return (*byte)(unsafe.Add(unsafe.Pointer(b), i))
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

// subSupervise is a tree's sub-supervisor: a child subreaper that starts
// the leader, reports its pid (or why it failed), its exit status, and
// when nothing of its tree is left. Once the leader has exited, or the
// supervisor is gone, it SIGKILLs every child it has, round after round
// (orphans of the tree are reparented to it, the subreaper, as their
// parents die), until it has none. It runs on its own stack (cloneVM) and
// never returns.
//
//go:nosplit
//go:norace
//go:nocheckptr
func subSupervise(s *forkSpec) {
	var (
		r1      uintptr
		e       syscall.Errno
		i       uintptr
		pid     int32
		exited  bool // the leader has exited (a zombie, or reaped)
		reaped  bool // the leader has been reaped
		done    bool // repDone sent: nothing but the leader's zombie is left
		acked   bool // the supervisor allows reaping the leader
		dying   bool // the supervisor is gone
		timeout uintptr
	)
	r1, _, _ = syscall.RawSyscall6(syscall.SYS_GETPID, 0, 0, 0, 0, 0, 0)
	s.self = int32(r1)
	r1, _, _ = syscall.RawSyscall6(syscall.SYS_GETPPID, 0, 0, 0, 0, 0, 0)
	s.parent = int32(r1)

	// Move the descriptors this tree needs to subNull..subErr, close
	// every other one (other trees' pipes, the daemon's socket, the
	// supervisor's own: this process has a copy of the supervisor's
	// descriptor table), and point stdio at /dev/null. The first pass
	// lifts them above the target range so the second cannot clobber a
	// source.
	for i = 0; i < subSlots; i++ {
		r1, _, e = syscall.RawSyscall6(syscall.SYS_FCNTL, uintptr(*(*int32)(unsafe.Add(unsafe.Pointer(&s.src), 4*i))), syscall.F_DUPFD_CLOEXEC, subFirst+subSlots, 0, 0, 0)
		if e != 0 {
			rawExit(125)
		}
		*(*int32)(unsafe.Add(unsafe.Pointer(&s.tmp), 4*i)) = int32(r1)
	}
	for i = 0; i < subSlots; i++ {
		if _, _, e = syscall.RawSyscall6(syscall.SYS_DUP3, uintptr(*(*int32)(unsafe.Add(unsafe.Pointer(&s.tmp), 4*i))), subFirst+i, syscall.O_CLOEXEC, 0, 0, 0); e != 0 {
			rawExit(125)
		}
	}
	_, _, e = syscall.RawSyscall6(unix.SYS_CLOSE_RANGE, subFirst+subSlots, uintptr(^uint32(0)), 0, 0, 0, 0)
	if e != 0 {
		for i = subFirst + subSlots; i <= uintptr(s.maxFD); i++ {
			rawClose(i)
		}
	}
	for i = 0; i < 3; i++ {
		syscall.RawSyscall6(syscall.SYS_DUP3, subNull, i, 0, 0, 0, 0)
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

	// The leader: vfork semantics, so this resumes once it has exec'd
	// (s.fail still zero) or failed (s.fail says where and why).
	s.fail[0], s.fail[1] = 0, 0
	// The tree's limit on processes (childNproc), set here, before the
	// leader is forked: the fork itself is then refused (EAGAIN) once
	// the user has that many, as a start past it must be, or the starts
	// would eat the daemon's reserve one by one; the leader inherits it,
	// and a leader changing user is held to it at setresuid and execve.
	if s.flags&forkNproc != 0 {
		syscall.RawSyscall6(syscall.SYS_PRLIMIT64, 0, unix.RLIMIT_NPROC, uintptr(unsafe.Pointer(&s.nproc)), 0, 0, 0)
	}
	r1, e = vforkLeader(s)
	if e != 0 {
		sendReport(s, repFailed, stageFork<<16|int32(e))
		rawExit(0)
	}
	pid = int32(r1)
	s.leader = pid
	// The leader has its own copies; the tree's pipes must end when the
	// tree does, so this process keeps none.
	rawClose(subIn)
	rawClose(subOut)
	rawClose(subErr)
	if s.fail[0] != 0 {
		// The leader failed before exec and has exited 127; nothing
		// else of the tree can exist yet.
		syscall.RawSyscall6(syscall.SYS_WAIT4, uintptr(pid), 0, 0, 0, 0, 0)
		sendReport(s, repFailed, s.fail[0]<<16|s.fail[1])
		rawExit(0)
	}
	sendReport(s, repStarted, pid)

	for {
		// Signals: SIGCHLD wakes the reaping below; the ack counts only
		// from the supervisor.
		for {
			r1, _, e = syscall.RawSyscall6(syscall.SYS_READ, uintptr(s.pfd[0].fd), uintptr(unsafe.Pointer(&s.si)), unsafe.Sizeof(s.si), 0, 0, 0)
			if e != 0 || r1 < unsafe.Sizeof(s.si) {
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
			s.si = [128]byte{}
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
		// The tree is gone as soon as nothing but the leader's zombie is
		// left: the daemon's wait ends then, without waiting for its ack
		// (which only lets the zombie be reaped).
		if exited || dying {
			for killChildren(s, exited && !reaped) == 0 {
				if s.seen == 0 {
					if exited && !done {
						sendReport(s, repDone, 0)
						done = true
					}
					break
				}
				// Every child the pass listed is reaped, but a child
				// that died during the pass handed its own children
				// to this process after the list was read: only a
				// list with nothing in it says the tree is gone.
			}
		}

		// While killing, look again every 20 ms (an orphan reparented
		// here raises no signal); else sleep until a signal or the
		// death pipe. ppoll writes the time left back into its timeout.
		timeout = 0
		if exited || dying {
			s.tick[0], s.tick[1] = 0, 20*1000*1000
			timeout = uintptr(unsafe.Pointer(&s.tick))
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
	if !done {
		sendReport(s, repDone, 0)
	}
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
// that has exited and is not reaped yet (skipLeader), reaps those already
// gone, and returns how many are left; s.seen is how many it listed. A
// child's pid is ours until we reap it, so it cannot have been reused;
// killing a zombie is harmless. A pass that left none but listed some is
// not the end: a child that died during it may have handed this process
// children of its own after the list was read.
//
//go:nosplit
//go:norace
//go:nocheckptr
func killChildren(s *forkSpec, skipLeader bool) int {
	var (
		r1, fd, i uintptr
		e         syscall.Errno
		n         int32
		c         byte
		digits    bool
		left      int
	)
	s.seen = 0
	if s.flags&forkNoChildrenFile != 0 {
		return killChildrenScan(s, skipLeader)
	}
	fd, _, e = syscall.RawSyscall6(syscall.SYS_OPENAT, ^uintptr(99), uintptr(unsafe.Pointer(&childrenPath[0])), syscall.O_RDONLY|syscall.O_CLOEXEC, 0, 0, 0)
	if e != 0 {
		return killChildrenScan(s, skipLeader)
	}
	// "pid pid pid " in chunks; a number may span two reads.
	for {
		r1, _, e = syscall.RawSyscall6(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&s.buf)), unsafe.Sizeof(s.buf), 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 || r1 == 0 || r1 > unsafe.Sizeof(s.buf) {
			break
		}
		if s.flags&forkSlowKill != 0 {
			s.pause[0], s.pause[1] = 0, 50*1000*1000
			syscall.RawSyscall6(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&s.pause)), 0, 0, 0, 0, 0)
		}
		for i = 0; i < r1; i++ {
			c = *at(&s.buf[0], i)
			if c >= '0' && c <= '9' {
				n = n*10 + int32(c-'0')
				digits = true
				continue
			}
			if digits {
				left += killOne(s, n, skipLeader)
			}
			n, digits = 0, false
		}
	}
	if digits {
		left += killOne(s, n, skipLeader)
	}
	rawClose(fd)
	return left
}

// killOne SIGKILLs one child of the tree. The leader is only signalled,
// never reaped here: subSupervise's loop reaps it, reports its exit and
// learns from that that it is gone; reaped behind its back, the loop would
// wait for it for ever (a sub-supervisor left polling every 20 ms after
// its supervisor died, when the leader died between this kill and a
// WNOHANG wait). With skipLeader, an exited leader waiting for the
// daemon's ack is not even signalled, nor counted in s.seen. It returns how
// many are left (0 or 1).
//
//go:nosplit
//go:norace
//go:nocheckptr
func killOne(s *forkSpec, pid int32, skipLeader bool) int {
	if pid != s.leader {
		s.seen++
		return killChild(pid)
	}
	if skipLeader {
		return 0
	}
	s.seen++
	syscall.RawSyscall6(syscall.SYS_KILL, uintptr(pid), uintptr(syscall.SIGKILL), 0, 0, 0, 0)
	return 1
}

// killChild SIGKILLs one child and reaps it if it is gone already: 0 if
// it was reaped, 1 if it is still there.
//
//go:nosplit
//go:norace
//go:nocheckptr
func killChild(pid int32) int {
	syscall.RawSyscall6(syscall.SYS_KILL, uintptr(pid), uintptr(syscall.SIGKILL), 0, 0, 0, 0)
	r1, _, e := syscall.RawSyscall6(syscall.SYS_WAIT4, uintptr(pid), 0, syscall.WNOHANG, 0, 0, 0)
	if e == 0 && int32(r1) == pid {
		return 0
	}
	if e == syscall.ECHILD {
		return 0 // not ours (any more)
	}
	return 1
}

// killChildrenScan is killChildren without /proc/<pid>/task/<tid>/children:
// every /proc/<pid>/stat is read for its parent pid.
//
//go:nosplit
//go:norace
//go:nocheckptr
func killChildrenScan(s *forkSpec, skipLeader bool) int {
	var (
		dir, fd, r1, n1 uintptr
		off, j, k       uintptr
		paren           uintptr
		e               syscall.Errno
		pid, ppid, n    int32
		reclen          uintptr
		c               byte
		left            int
	)
	dir, _, e = syscall.RawSyscall6(syscall.SYS_OPENAT, ^uintptr(99), uintptr(unsafe.Pointer(&procPath[0])), syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0, 0, 0)
	if e != 0 {
		return 1 // cannot tell: not gone
	}
	for {
		r1, _, e = syscall.RawSyscall6(syscall.SYS_GETDENTS64, dir, uintptr(unsafe.Pointer(&s.buf)), unsafe.Sizeof(s.buf), 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 || r1 == 0 || r1 > unsafe.Sizeof(s.buf) {
			break
		}
		// struct linux_dirent64: d_ino 8, d_off 8, d_reclen 2, d_type 1,
		// d_name; each record lies within what was read.
		for off = 0; off+19 < r1; off += reclen {
			reclen = uintptr(*(*uint16)(unsafe.Pointer(at(&s.buf[0], off+16))))
			if reclen < 20 || off+reclen > r1 {
				break
			}
			// "/proc/" + name + "/stat", if the name is a pid.
			s.name[0], s.name[1], s.name[2], s.name[3], s.name[4], s.name[5] = '/', 'p', 'r', 'o', 'c', '/'
			pid, k = 0, 6
			for j = off + 19; j < off+reclen; j++ {
				c = *at(&s.buf[0], j)
				if c == 0 {
					break
				}
				if c < '0' || c > '9' || k >= unsafe.Sizeof(s.name)-6 {
					pid = -1
					break
				}
				pid = pid*10 + int32(c-'0')
				*at(&s.name[0], k) = c
				k++
			}
			if pid <= 0 || pid == s.self || (skipLeader && pid == s.leader) {
				continue
			}
			// k <= len(name)-6 here, so the suffix fits.
			*at(&s.name[0], k) = '/'
			*at(&s.name[0], k+1) = 's'
			*at(&s.name[0], k+2) = 't'
			*at(&s.name[0], k+3) = 'a'
			*at(&s.name[0], k+4) = 't'
			*at(&s.name[0], k+5) = 0
			fd, _, e = syscall.RawSyscall6(syscall.SYS_OPENAT, ^uintptr(99), uintptr(unsafe.Pointer(&s.name[0])), syscall.O_RDONLY|syscall.O_CLOEXEC, 0, 0, 0)
			if e != 0 {
				continue
			}
			n1, _, e = syscall.RawSyscall6(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&s.stat)), unsafe.Sizeof(s.stat), 0, 0, 0)
			rawClose(fd)
			if e != 0 || n1 > unsafe.Sizeof(s.stat) {
				continue
			}
			// "pid (comm) S ppid ...": the command may hold ')', so
			// the last one ends it.
			paren = n1
			for k = 0; k < n1; k++ {
				if *at(&s.stat[0], k) == ')' {
					paren = k
				}
			}
			if paren == n1 || paren+4 >= n1 {
				continue
			}
			ppid, n = 0, 0
			for k = paren + 4; k < n1; k++ {
				c = *at(&s.stat[0], k)
				if c < '0' || c > '9' {
					break
				}
				ppid = ppid*10 + int32(c-'0')
				n++
			}
			if n > 0 && ppid == s.self {
				left += killOne(s, pid, skipLeader)
			}
		}
	}
	rawClose(dir)
	return left
}

// vforkLeader starts the leader with vfork semantics (CLONE_VM |
// CLONE_VFORK): this process resumes only once the leader has exec'd or
// exited. As in the standard library, the child continues in this frame
// and never returns from it, while the parent returns at once: the
// child's calls use the stack below this frame, and the parent's results
// are written after the child is gone.
//
//go:noinline
//go:nosplit
//go:norace
//go:nocheckptr
func vforkLeader(s *forkSpec) (pid uintptr, err syscall.Errno) {
	var e uintptr
	pid, e = rawVfork(syscall.CLONE_VM | syscall.CLONE_VFORK | uintptr(syscall.SIGCHLD))
	if e != 0 || pid != 0 {
		return pid, syscall.Errno(e)
	}
	leaderExec(s)
	return 0, 0
}

// leaderExec is the leader between its start and exec: its session or
// group, credentials, directory, stdio and terminal, its signal handlers
// back to the defaults and its signal mask emptied, then execve. It runs
// in the sub-supervisor's memory (vfork): a failure is left (stage, errno)
// in s.fail, and the leader exits 127.
//
//go:nosplit
//go:norace
//go:nocheckptr
func leaderExec(s *forkSpec) {
	var (
		e     syscall.Errno
		r1    uintptr
		sig   uintptr
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
	// The supervisor's signal handlers go back to the defaults (execve
	// would do it, but a signal may come first, and they must not run
	// here); ignored signals stay ignored, as they would across execve.
	// Then the mask is emptied.
	for sig = 1; sig <= 64; sig++ {
		if sig == uintptr(syscall.SIGKILL) || sig == uintptr(syscall.SIGSTOP) {
			continue
		}
		if _, _, e = syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, sig, 0, uintptr(unsafe.Pointer(&s.act)), 8, 0, 0); e != 0 {
			continue
		}
		if s.act[0] != 0 && s.act[0] != 1 { // neither SIG_DFL nor SIG_IGN
			syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, sig, uintptr(unsafe.Pointer(&s.dfl)), 0, 8, 0, 0)
		}
	}
	s.act[0] = 0
	syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&s.act)), 0, 8, 0, 0)
	stage = stageExec
	_, _, e = syscall.RawSyscall6(syscall.SYS_EXECVE, uintptr(unsafe.Pointer(s.path)), uintptr(unsafe.Pointer(s.argv)), uintptr(unsafe.Pointer(s.envv)), 0, 0, 0)
fail:
	// Shared memory with the suspended sub-supervisor (vfork).
	s.fail[0], s.fail[1] = stage, int32(e)
	rawExit(127)
}
