package process

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Credential is a user to run processes as (--run-as): its uid, primary
// gid and supplementary groups.
type Credential struct {
	UID, GID uint32
	Groups   []uint32
}

// launch is one process to start, whichever way it is started.
type launch struct {
	path string // the executable, resolved
	argv []string
	env  []string
	dir  string // "": the daemon's
	// The child's ends of its standard streams; stdin nil is /dev/null.
	stdin, stdout, stderr *os.File
	// session: a session of its own with stdin (a PTY) as its controlling
	// terminal; else a process group of its own. Either way its pid is
	// the group id.
	session bool
	cred    *Credential
}

// group is a started process tree: its leader's pid (also its group id),
// a signal to the whole group, and the wait for all of it to be gone.
type group interface {
	PID() int
	// Signal signals the group; after the leader has exited it does
	// nothing (the group id may be reused).
	Signal(syscall.Signal) error
	// Wait returns the leader's status once the leader and what it left
	// are gone.
	Wait() (syscall.WaitStatus, error)
}

// startGroup starts l under sup, or with os/exec when sup is nil (the
// other platforms, and tests of that path).
func startGroup(ctx context.Context, sup *Supervisor, l *launch) (group, error) {
	if sup != nil {
		t, err := sup.spawn(ctx, l)
		if err != nil {
			return nil, err
		}
		return t, nil
	}
	g, err := startExec(l)
	if err != nil {
		return nil, err
	}
	return g, nil
}

// lookPath resolves a command as exec.Command does: a name without a
// slash is looked up in the daemon's PATH.
func lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	return exec.LookPath(name)
}

// execGroup is a group started with os/exec: the daemon is the leader's
// parent and kills what the leader left in its group when it exits. It
// cannot find what left the group (setsid); the supervisor can.
type execGroup struct {
	cmd     *exec.Cmd
	session bool

	mu   sync.Mutex // guards gone against signalling a reused pid
	gone bool
	done chan struct{}
	ws   syscall.WaitStatus
	err  error
}

func startExec(l *launch) (*execGroup, error) {
	cmd := &exec.Cmd{Path: l.path, Args: l.argv, Env: l.env, Dir: l.dir, Stdout: l.stdout, Stderr: l.stderr}
	if l.stdin != nil {
		cmd.Stdin = l.stdin
	}
	cmd.SysProcAttr = sysProcAttr(l.session, l.cred)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	g := &execGroup{cmd: cmd, session: l.session, done: make(chan struct{})}
	go g.wait()
	return g, nil
}

func (g *execGroup) PID() int { return g.cmd.Process.Pid }

func (g *execGroup) Signal(s syscall.Signal) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gone {
		return nil
	}
	// While gone is false the leader is not reaped (see wait), so the
	// group id still names our group and no other.
	if err := g.kill(s); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// kill sends s to the group and, for a session leader, to the other
// groups of its session (background jobs of a shell).
func (g *execGroup) kill(s syscall.Signal) error {
	pid := g.cmd.Process.Pid
	err := syscall.Kill(-pid, s)
	if g.session {
		for _, sg := range sessionGroups(pid) {
			_ = syscall.Kill(-sg, s)
		}
	}
	return err
}

func (g *execGroup) Wait() (syscall.WaitStatus, error) {
	<-g.done
	return g.ws, g.err
}

// wait reaps the leader, kills whatever it left in its group, and waits
// for the group to be gone. The group id cannot be reused while any member
// is alive, and a zombie leader keeps its pid, so signalling -pid before
// the leader is reaped is always safe; after, Signal sees gone.
func (g *execGroup) wait() {
	pid := g.cmd.Process.Pid
	// Wait for the leader to exit without reaping it, so its pid (the
	// group id) stays ours while the rest of the group is killed.
	waitExited(pid)
	g.mu.Lock()
	_ = g.kill(syscall.SIGKILL)
	g.gone = true
	g.mu.Unlock()
	err := g.cmd.Wait()
	if st := g.cmd.ProcessState; st != nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok {
			g.ws = ws
		}
	} else {
		g.err = err
	}
	waitGroupGone(pid)
	if g.session {
		// Jobs in other groups of the session: killed above, gone now (a
		// job forked meanwhile is caught by the next round).
		deadline := time.Now().Add(groupGoneWait)
		for groups := sessionGroups(pid); len(groups) > 0 && time.Now().Before(deadline); groups = sessionGroups(pid) {
			for _, sg := range groups {
				_ = syscall.Kill(-sg, syscall.SIGKILL)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	close(g.done)
}

// groupGoneWait bounds how long a wait polls for the rest of a process
// group to disappear after SIGKILL (zombies not reaped by init keep it
// "alive").
const groupGoneWait = time.Second

// waitGroupGone waits, boundedly, until no live member of group pgid is
// left (zombies reparented to init do not count).
func waitGroupGone(pgid int) {
	deadline := time.Now().Add(groupGoneWait)
	for time.Now().Before(deadline) && groupAlive(pgid) {
		time.Sleep(5 * time.Millisecond)
	}
}

// groupAlive reports whether any non-zombie process is still in group pgid.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	return groupHasLiveMember(pgid)
}
