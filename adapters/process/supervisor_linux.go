//go:build linux && (amd64 || arm64)

package process

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SupervisorCommand is the hidden subcommand of the daemon's binary that
// runs ServeSupervisor.
const SupervisorCommand = "_supervisor"

// Supervisor is the daemon's end of its process supervisor: one process,
// started once (the daemon's binary re-executed with SupervisorCommand),
// that starts every agent and user process the daemon asks for, each
// under a sub-supervisor of its own forked without exec (see fork_linux.go
// and serve_linux.go). Nothing a tree starts survives its leader's exit,
// a kill, or the daemon's death, setsid children and double-forked
// daemons included.
//
// The daemon keeps the pids and signals process groups itself, as it
// would without a supervisor; the supervisor reports each leader's start,
// its exit status, and when its whole tree is gone. A sub-supervisor
// reaps its leader only after the daemon has seen the exit (the "ack"),
// so the daemon never signals a group id that could have been reused.
//
// If the supervisor dies, its sub-supervisors kill their trees, every
// tree's Wait returns (as killed), and the next start starts a new
// supervisor. Safe for concurrent use.
type Supervisor struct {
	exe  string
	args []string

	mu     sync.Mutex
	conn   *net.UnixConn // nil: not running
	proc   *os.Process   // the supervisor process, while running
	pid    int
	ended  chan struct{} // closed when the current supervisor's reader has finished
	trees  map[uint64]*tree
	nextID uint64
	closed bool

	wmu sync.Mutex // one request at a time, its frames together

	// scanProc makes sub-supervisors find their children by scanning
	// /proc, as they do where the kernel has no children files (tests).
	scanProc bool
	// slowKill makes sub-supervisors pause 50 ms between reading their
	// children and killing them, so a child can die in between (tests).
	slowKill bool

	// Protect, when set, is told the pid of each supervisor process
	// started, and the release it returns is called once that process has
	// ended: the daemon's secrets (fsys.Secrets.ProtectPID) then keep its
	// /proc, a part of the daemon, out of the API.
	Protect func(pid int) (release func())
}

// NewSupervisor returns a supervisor started from exe with args (which
// end in SupervisorCommand, or make exe run ServeSupervisor another way).
// Start starts it; a start of a process starts it too if it is not running.
func NewSupervisor(exe string, args ...string) *Supervisor {
	return &Supervisor{exe: exe, args: args, trees: map[uint64]*tree{}}
}

var errSupervisorClosed = errors.New("process supervisor: closed")

// Start starts the supervisor process unless it is running.
func (s *Supervisor) Start() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errSupervisorClosed
	}
	if s.conn != nil {
		return nil
	}
	return s.startLocked()
}

func (s *Supervisor) startLocked() error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("start process supervisor: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "supervisor"), os.NewFile(uintptr(fds[1]), "daemon")
	defer theirs.Close()
	c, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		theirs.Close()
		return fmt.Errorf("start process supervisor: %w", err)
	}
	conn := c.(*net.UnixConn)
	cmd := exec.Command(s.exe, s.args...)
	cmd.Env = supervisorEnv(os.Environ())
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = []*os.File{theirs}
	// Its own process group, so a terminal's ^C (or a signal to the
	// daemon's group) does not reach it; SIGKILL when the daemon dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	onLaunchThread(func() { err = cmd.Start() })
	if err != nil {
		conn.Close()
		return fmt.Errorf("start process supervisor: %w", err)
	}
	theirs.Close()
	if err := awaitReady(conn); err != nil {
		conn.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("start process supervisor: %w", err)
	}
	s.conn, s.proc, s.pid = conn, cmd.Process, cmd.Process.Pid
	s.ended = make(chan struct{})
	if s.Protect != nil {
		release, ended := s.Protect(s.pid), s.ended
		go func() { <-ended; release() }()
	}
	go s.read(conn, cmd, s.ended)
	return nil
}

// supervisorStart bounds how long the supervisor may take to be ready.
const supervisorStart = 10 * time.Second

// awaitReady reads the supervisor's first event, which says it is set up;
// it exits with its reason on stderr otherwise.
func awaitReady(conn *net.UnixConn) error {
	_ = conn.SetReadDeadline(time.Now().Add(supervisorStart))
	defer conn.SetReadDeadline(time.Time{}) //nolint:errcheck // best effort
	buf := make([]byte, eventBytes)
	n, err := conn.Read(buf)
	switch {
	case err != nil:
		return fmt.Errorf("not ready: %w", err)
	case n != eventBytes || binary.LittleEndian.Uint32(buf[8:]) != repReady:
		return errors.New("not ready: unexpected first message")
	}
	return nil
}

// supervisorEnv is what the supervisor needs of the daemon's environment:
// only the Go runtime's settings, and one P unless GOMAXPROCS is set (its
// work is serial; fewer threads, less memory). Its children get their
// environment explicitly.
func supervisorEnv(env []string) []string {
	out := []string{}
	procs := false
	for _, kv := range env {
		if strings.HasPrefix(kv, "GO") {
			out = append(out, kv)
			procs = procs || strings.HasPrefix(kv, "GOMAXPROCS=")
		}
	}
	if !procs {
		out = append(out, "GOMAXPROCS=1")
	}
	return out
}

// launchThread runs functions on one OS thread that never exits: the
// supervisor is started there, because Pdeathsig fires when the thread
// that forked the child exits, and the runtime ends a thread whose locked
// goroutine returns. This goroutine never returns.
var launchThread struct {
	once sync.Once
	reqs chan func()
}

func onLaunchThread(f func()) {
	launchThread.once.Do(func() {
		launchThread.reqs = make(chan func())
		go func() {
			runtime.LockOSThread()
			for f := range launchThread.reqs {
				f()
			}
		}()
	})
	done := make(chan struct{})
	launchThread.reqs <- func() {
		defer close(done)
		f()
	}
	<-done
}

// supervisorPID is the supervisor process's pid, 0 when not running.
func (s *Supervisor) supervisorPID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid
}

// Close stops the supervisor: every tree still running is killed by its
// sub-supervisor, and every Wait returns. Idempotent.
func (s *Supervisor) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	s.closed = true
	conn, ended, proc := s.conn, s.ended, s.proc
	s.mu.Unlock()
	if conn == nil {
		return nil
	}
	conn.Close()
	// It exits at once when its socket closes; one that does not (stopped,
	// wedged) is killed, and its sub-supervisors then kill their trees.
	select {
	case <-ended:
	case <-time.After(closeWait):
		_ = proc.Kill()
		<-ended
	}
	return nil
}

// closeWait bounds how long Close waits for the supervisor to exit by
// itself.
const closeWait = 5 * time.Second

// read dispatches the supervisor's events until its socket closes, then
// ends every tree it had and reaps it.
func (s *Supervisor) read(conn *net.UnixConn, cmd *exec.Cmd, ended chan struct{}) {
	defer close(ended)
	buf := make([]byte, eventBytes)
	for {
		n, err := conn.Read(buf)
		if err != nil || n == 0 {
			break
		}
		if n != eventBytes {
			continue
		}
		id := binary.LittleEndian.Uint64(buf)
		kind := binary.LittleEndian.Uint32(buf[8:])
		val := int32(binary.LittleEndian.Uint32(buf[12:]))
		s.mu.Lock()
		t := s.trees[id]
		if t != nil && (kind == repDone || kind == repFailed) {
			delete(s.trees, id)
		}
		s.mu.Unlock()
		if t == nil {
			continue
		}
		switch kind {
		case repStarted:
			t.started(int(val), nil)
		case repFailed:
			t.started(0, t.failure(int(val>>16), syscall.Errno(val&0xffff)))
		case repExited:
			if t.exit(syscall.WaitStatus(val)) {
				go s.ack(conn, id)
			}
		case repDone:
			t.gone()
		}
	}
	conn.Close()
	s.mu.Lock()
	if s.conn == conn {
		s.conn, s.proc, s.pid = nil, nil, 0
	}
	var lost []*tree
	for id, t := range s.trees {
		if t.conn == conn {
			lost = append(lost, t)
			delete(s.trees, id)
		}
	}
	s.mu.Unlock()
	for _, t := range lost {
		t.started(0, errors.New("process supervisor exited"))
		t.exit(syscall.WaitStatus(syscall.SIGKILL))
		t.gone()
	}
	_ = cmd.Wait()
}

// ack tells the supervisor the daemon has seen tree id's leader exit.
func (s *Supervisor) ack(conn *net.UnixConn, id uint64) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, _ = conn.Write(frame(reqAck, id, nil))
}

// spawnWait bounds how long a start may wait for the supervisor's answer.
const spawnWait = 30 * time.Second

// spawn starts l under the supervisor. It returns once the leader has
// exec'd, or why it could not; if ctx ends first (or the supervisor does
// not answer within spawnWait), the tree is abandoned: killed as soon as
// it reports its start.
func (s *Supervisor) spawn(ctx context.Context, l *launch) (*tree, error) {
	r := &spawnReq{path: l.path, dir: l.dir, argv: l.argv, env: l.env, stdio: [3]int32{-1, 1, 2}}
	files := []*os.File{l.stdin, l.stdout, l.stderr}
	if l.stdin != nil {
		r.stdio[0] = 0
	} else {
		files[0] = l.stdout // a placeholder: fd 0 is /dev/null
	}
	if l.session {
		r.flags |= forkSetsid | forkCtty
	} else {
		r.flags |= forkSetpgid
	}
	if l.cred != nil {
		r.flags |= forkCred
		r.uid, r.gid, r.groups = l.cred.UID, l.cred.GID, l.cred.Groups
	}
	if s.scanProc {
		r.flags |= forkNoChildrenFile
	}
	if s.slowKill {
		r.flags |= forkSlowKill
	}
	body, err := r.encode()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errSupervisorClosed
	}
	if s.conn == nil {
		if err := s.startLocked(); err != nil {
			s.mu.Unlock()
			return nil, err
		}
	}
	s.nextID++
	t := &tree{id: s.nextID, conn: s.conn, start: make(chan error, 1), done: make(chan struct{}), path: l.path, dir: l.dir, session: l.session}
	s.trees[t.id] = t
	s.mu.Unlock()

	if err := s.write(t.conn, t.id, body, files); err != nil {
		s.mu.Lock()
		delete(s.trees, t.id)
		s.mu.Unlock()
		return nil, fmt.Errorf("process supervisor: %w", err)
	}
	timer := time.NewTimer(spawnWait)
	defer timer.Stop()
	select {
	case err := <-t.start:
		if err != nil {
			return nil, err
		}
		return t, nil
	case <-ctx.Done():
		t.abandon()
		return nil, ctx.Err()
	case <-timer.C:
		t.abandon()
		return nil, fmt.Errorf("process supervisor: no answer within %v", spawnWait)
	}
}

// write sends one spawn request: its body in frames, the last carrying
// the descriptors.
func (s *Supervisor) write(conn *net.UnixConn, id uint64, body []byte, files []*os.File) error {
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for len(body) > frameMax {
		if _, err := conn.Write(frame(reqData, id, body[:frameMax])); err != nil {
			return err
		}
		body = body[frameMax:]
	}
	_, _, err := conn.WriteMsgUnix(frame(reqSpawn, id, body), unix.UnixRights(fds...), nil)
	runtime.KeepAlive(files)
	return err
}

// tree is one started process tree as the daemon sees it.
type tree struct {
	id    uint64
	conn  *net.UnixConn
	pid   int
	start chan error // the start's outcome, once

	mu        sync.Mutex
	startSet  bool
	abandoned bool // the start's caller gave up: kill it once started
	exited    bool // the leader has exited: its group is never signalled again
	status    syscall.WaitStatus
	goneSet   bool
	done      chan struct{} // closed once nothing of the tree is left
	path      string        // for errors
	dir       string
	session   bool // signal the session's job groups too
}

func (t *tree) started(pid int, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.startSet {
		return
	}
	t.startSet = true
	t.pid = pid
	t.start <- err
	if err == nil && t.abandoned {
		// Nobody waits for it: its group goes (the leader is not reaped
		// before the daemon's ack, so the id is still its), and with it,
		// through its sub-supervisor, the rest.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// abandon gives up on a start nobody waits for any more.
func (t *tree) abandon() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.abandoned = true
	if t.startSet && !t.exited && t.pid > 0 {
		select {
		case err := <-t.start: // started meanwhile: kill it
			if err == nil {
				_ = syscall.Kill(-t.pid, syscall.SIGKILL)
			}
		default:
		}
	}
}

// exit records the leader's exit; false if it was recorded already.
func (t *tree) exit(ws syscall.WaitStatus) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.exited {
		return false
	}
	t.exited, t.status = true, ws
	return true
}

func (t *tree) gone() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.goneSet {
		t.goneSet = true
		close(t.done)
	}
}

// failure is the error for a leader that could not start, shaped as
// os/exec's would be so callers map it the same way.
func (t *tree) failure(stage int, errno syscall.Errno) error {
	switch stage {
	case stageExec:
		return &os.PathError{Op: "fork/exec", Path: t.path, Err: errno}
	case stageChdir:
		return &os.PathError{Op: "chdir", Path: t.dir, Err: errno}
	case stageCred:
		return fmt.Errorf("set user and groups: %w", errno)
	case stageSession:
		return fmt.Errorf("new session or process group: %w", errno)
	case stageStdio, stageCtty:
		return fmt.Errorf("set up standard streams or terminal: %w", errno)
	case stageFork:
		return fmt.Errorf("fork: %w", errno)
	}
	return fmt.Errorf("process supervisor: %w", errno)
}

func (t *tree) PID() int { return t.pid }

// Signal sends sig to the leader's group (and, for a terminal's session,
// to its job groups) unless the leader has exited: its pid, the group id,
// is then about to be freed.
func (t *tree) Signal(sig syscall.Signal) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.exited {
		return nil
	}
	err := syscall.Kill(-t.pid, sig)
	if t.session {
		for _, g := range sessionGroups(t.pid) {
			_ = syscall.Kill(-g, sig)
		}
	}
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// Wait returns the leader's status once nothing of the tree is left.
func (t *tree) Wait() (syscall.WaitStatus, error) {
	<-t.done
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status, nil
}
