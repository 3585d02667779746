//go:build linux && (amd64 || arm64)

package process

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// TestSupervised runs the runner's and the starter's tests again with
// everything under the supervisor: same pids, statuses, pipes, terminals,
// errors and group semantics.
func TestSupervised(t *testing.T) {
	testSupervisor() // started now: its socket is not a descriptor a test leaked
	supervisedTests = true
	t.Cleanup(func() { supervisedTests = false })
	for name, test := range map[string]func(*testing.T){
		"RunnerContract":            TestRunnerContract,
		"WaitStatus":                TestWaitStatus,
		"StderrPiped":               TestStderrPiped,
		"StdinWriteDeadline":        TestStdinWriteDeadline,
		"AgentEnvironment":          TestAgentEnvironment,
		"StopKillsGroup":            TestStopKillsGroup,
		"GroupCleanedOnOwnExit":     TestGroupCleanedOnOwnExit,
		"StartFailureLeavesNothing": TestStartFailureLeavesNothing,
		"StarterContract":           TestStarterContract,
		"StarterKillsLeftovers":     TestStarterKillsWhatTheLeaderLeaves,
		"StarterTerminal":           TestStarterTerminal,
		"StarterStartErrors":        TestStarterStartErrors,
		"StarterTerminalJobsKilled": TestStarterTerminalJobsKilled,
	} {
		t.Run(name, test)
	}
}

// waitGone fails the test unless every pid is gone (or a zombie) within
// limit. Orphans reparented to init are reaped on init's schedule, so a
// zombie counts as gone.
func waitGone(t *testing.T, limit time.Duration, what string, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for _, p := range pids {
		for alive(p) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: pid %d still alive %v later (all: %v)", what, p, limit, pids)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// waitWithin is p.Wait, failing the test if it takes longer than limit
// (the tree's end was missed).
func waitWithin(t *testing.T, p ports.Process, limit time.Duration) domain.ExitStatus {
	t.Helper()
	type result struct {
		st  domain.ExitStatus
		err error
	}
	done := make(chan result, 1)
	go func() { st, err := p.Wait(); done <- result{st, err} }()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("Wait: %v", r.err)
		}
		return r.st
	case <-time.After(limit):
		t.Fatalf("Wait did not return within %v", limit)
	}
	return domain.ExitStatus{}
}

// firstPID reads the first decimal number the process writes (a
// terminal adds \r).
func firstPID(t *testing.T, r io.Reader) int {
	t.Helper()
	line, err := bufio.NewReader(r).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil || pid <= 0 {
		t.Fatalf("reading a pid: %q, %v", line, err)
	}
	return pid
}

// escaped waits until pid has left the leader's group and session (it
// leads a session of its own): a group signal cannot reach it then; only
// the supervisor can.
func escaped(t *testing.T, pid, leader int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		pgid, err1 := syscall.Getpgid(pid)
		sid, _, err2 := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(pid), 0, 0)
		if err1 != nil || err2 != 0 {
			t.Fatalf("pid %d: %v %v", pid, err1, err2)
		}
		if int(sid) == pid && pgid == pid && pgid != leader {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d is still in the leader's group or session (pgid %d, sid %d, leader %d)", pid, pgid, sid, leader)
		}
		time.Sleep(time.Millisecond)
	}
}

// A user process's shell double-forks a setsid sleep (out of its group
// and session, its parent gone at once), on pipes and on a terminal; kill,
// stop and the leader's own exit all take it down, and Wait returns only
// once it is gone.
func TestSupervisorProcessEscapees(t *testing.T) {
	s := &Starter{BaseEnv: os.Environ(), Supervisor: testSupervisor()}
	for _, tty := range []bool{false, true} {
		for _, end := range []string{"kill", "stop", "exit"} {
			name := end
			if tty {
				name += " tty"
			}
			t.Run(name, func(t *testing.T) {
				script := escapeScript
				if end == "exit" {
					script = `(setsid sleep 300 >/dev/null 2>&1 & echo $!); exit 3`
				}
				p, err := s.Start(context.Background(), domain.ProcessSpec{Command: "sh", Args: []string{"-c", script}, TTY: tty})
				if err != nil {
					t.Fatal(err)
				}
				defer p.IO().Stdout.Close()
				esc := firstPID(t, p.IO().Stdout)
				if end != "exit" {
					escaped(t, esc, p.PID())
				}
				switch end {
				case "kill":
					err = p.Signal(domain.SignalKill)
				case "stop":
					err = p.Signal(domain.SignalTerm)
				}
				if err != nil {
					t.Fatal(err)
				}
				st := waitWithin(t, p, 10*time.Second)
				if alive(esc) {
					t.Errorf("double-forked setsid child %d alive after Wait returned", esc)
				}
				want := map[string]string{"kill": "SIGKILL", "stop": "SIGTERM"}[end]
				if end == "exit" && (st.Code == nil || *st.Code != 3) || end != "exit" && st.Signal != want {
					t.Errorf("status %+v, want %s", st, map[bool]string{true: "code 3", false: want}[end == "exit"])
				}
			})
		}
	}
}

// An agent's setsid grandchild and double-forked grandchild go with it,
// on Stop and on its own exit.
func TestSupervisorAgentEscapees(t *testing.T) {
	supervisedTests = true
	t.Cleanup(func() { supervisedTests = false })
	for _, mode := range [][]string{{"tree", "setsid", "child-ignore-term"}, {"doublefork"}} {
		t.Run(mode[0]+" Stop", func(t *testing.T) {
			p, gc := startTree(t, mode[0], mode[1:]...)
			escaped(t, gc, p.PID())
			if err := p.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, err := p.Wait(); err != nil {
				t.Fatal(err)
			}
			if alive(gc) {
				t.Errorf("grandchild %d outlived Stop", gc)
			}
		})
		t.Run(mode[0]+" own exit", func(t *testing.T) {
			p, gc := startTree(t, mode[0], append([]string{"exit"}, mode[1:]...)...)
			p.Stdin().Close() // the agent exits at EOF
			if st, err := p.Wait(); err != nil || !st.Success() {
				t.Fatalf("Wait = %+v, %v", st, err)
			}
			if alive(gc) {
				t.Errorf("grandchild %d outlived its agent", gc)
			}
		})
	}
}

// The daemon SIGKILLed: its supervisor dies with it (Pdeathsig, and its
// socket closes), and every sub-supervisor kills its tree: the agent, its
// setsid grandchild, the process and its double-forked setsid child.
func TestSupervisorNothingOutlivesTheDaemon(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	daemon := exec.Command(exe, "daemon")
	daemon.Env = append(os.Environ(), agentEnv+"=1", "GORACE=atexit_sleep_ms=0")
	out, err := daemon.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = daemon.Process.Kill(); _ = daemon.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	fields := strings.Fields(line)
	if len(fields) != 5 {
		t.Fatalf("stand-in daemon said %q", line)
	}
	var pids []int
	for _, f := range fields {
		p, err := strconv.Atoi(f)
		if err != nil || !alive(p) {
			t.Fatalf("pid %q not running (%q)", f, line)
		}
		pids = append(pids, p)
	}
	escaped(t, pids[1], pids[0])
	escaped(t, pids[3], pids[2])
	_ = daemon.Process.Signal(syscall.SIGKILL)
	_ = daemon.Wait()
	waitGone(t, 5*time.Second, "after the daemon's SIGKILL (agent, grandchild, process, escapee, supervisor)", pids...)
}

// The supervisor killed: its sub-supervisors kill their trees, every Wait
// returns, and the next start starts a new supervisor.
func TestSupervisorCrash(t *testing.T) {
	sup := ownSupervisor(t)
	s := &Starter{BaseEnv: os.Environ(), Supervisor: sup}
	p, err := s.Start(context.Background(), domain.ProcessSpec{Command: "sh", Args: []string{"-c", escapeScript}})
	if err != nil {
		t.Fatal(err)
	}
	esc := firstPID(t, p.IO().Stdout)
	first := sup.supervisorPID()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if st := waitWithin(t, p, 10*time.Second); st.Signal != "SIGKILL" {
		t.Errorf("status %+v, want SIGKILL", st)
	}
	waitGone(t, 5*time.Second, "after the supervisor's SIGKILL", p.PID(), esc)
	closeIO(p)

	p, err = s.Start(context.Background(), domain.ProcessSpec{Command: "true"})
	if err != nil {
		t.Fatalf("start after the supervisor died: %v", err)
	}
	if st, _ := p.Wait(); !st.Success() {
		t.Errorf("status %+v", st)
	}
	closeIO(p)
	second := sup.supervisorPID()
	if second == first || second == 0 {
		t.Errorf("supervisor pid %d, then %d: not restarted", first, second)
	}
}

// The supervisor killed while many leaders still run: every
// sub-supervisor kills its leader, sees it go and exits. A leader that died
// between the kill and the sub-supervisor's next look used to be reaped
// behind its loop's back, which then waited for it for ever (found as
// sub-supervisors left polling after TestFaultNoSurvivorsOfProcesses under
// CPU load). Several rounds of many trees make that window likely.
func TestSubSupervisorsEndWithTheSupervisor(t *testing.T) {
	for round := range 4 {
		sup := ownSupervisor(t)
		s := &Starter{BaseEnv: os.Environ(), Supervisor: sup}
		var procs []ports.Process
		for range 25 {
			p, err := s.Start(context.Background(), domain.ProcessSpec{Command: "sleep", Args: []string{"1000"}})
			if err != nil {
				t.Fatal(err)
			}
			procs = append(procs, p)
		}
		first := sup.supervisorPID()
		var subs []int
		for _, c := range childrenOf(first) {
			if pid, err := strconv.Atoi(c); err == nil {
				subs = append(subs, pid)
			}
		}
		if len(subs) != len(procs) {
			t.Fatalf("round %d: %d sub-supervisors for %d processes", round, len(subs), len(procs))
		}
		if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for _, p := range procs {
			waitWithin(t, p, 10*time.Second)
			closeIO(p)
		}
		waitGone(t, 5*time.Second, fmt.Sprintf("round %d: sub-supervisors after the supervisor's SIGKILL", round), subs...)
	}
}

// ownSupervisor starts a supervisor of the test's own (one it may kill),
// closed when the test ends.
func ownSupervisor(t *testing.T) *Supervisor {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sup := NewSupervisor(exe, SupervisorCommand)
	if err := sup.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Close() })
	return sup
}

func closeIO(p ports.Process) {
	closeAll(p.IO().Stdin, p.IO().Stdout, p.IO().Stderr)
}

func closeAll(cs ...io.Closer) {
	for _, c := range cs {
		if c != nil {
			_ = c.Close()
		}
	}
}

// Many starts, failed ones included, leave the supervisor with no
// sub-supervisor and no descriptor it did not have: it closes what each
// request brought.
func TestSupervisorLeavesNothingBehind(t *testing.T) {
	sup := ownSupervisor(t)
	pid := sup.supervisorPID()
	fdsOf := func() map[string]string {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
		ents, _ := os.ReadDir(dir)
		m := map[string]string{}
		for _, e := range ents {
			m[e.Name()], _ = os.Readlink(dir + e.Name())
		}
		return m
	}
	before := fdsOf()
	s := &Starter{BaseEnv: os.Environ(), Supervisor: sup}
	for i := range 30 {
		spec := domain.ProcessSpec{Command: "true", Stdin: i%2 == 0, TTY: i%3 == 0}
		if i%5 == 0 {
			spec.Command = "/no/such/command"
		}
		p, err := s.Start(context.Background(), spec)
		if err != nil {
			continue
		}
		p.Wait()
		closeIO(p)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(childrenOf(pid)) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if left := childrenOf(pid); len(left) > 0 {
		t.Errorf("sub-supervisors left: %v", left)
	}
	after := fdsOf()
	for fd, target := range after {
		if before[fd] != target {
			t.Errorf("supervisor descriptor %s → %s is new", fd, target)
		}
	}
}

// childrenOf lists pid's children.
func childrenOf(pid int) []string {
	var out []string
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	for _, task := range tasks {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/children")
		out = append(out, strings.Fields(string(b))...)
	}
	return out
}

// Where the kernel has no children files, the sub-supervisor finds its
// children by scanning /proc; the escapees go all the same.
func TestSupervisorWithoutChildrenFiles(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sup := NewSupervisor(exe, SupervisorCommand)
	sup.scanProc = true
	defer sup.Close()
	s := &Starter{BaseEnv: os.Environ(), Supervisor: sup}
	p, err := s.Start(context.Background(), domain.ProcessSpec{Command: "sh", Args: []string{"-c", escapeScript}})
	if err != nil {
		t.Fatal(err)
	}
	esc := firstPID(t, p.IO().Stdout)
	escaped(t, esc, p.PID())
	if err := p.Signal(domain.SignalKill); err != nil {
		t.Fatal(err)
	}
	waitWithin(t, p, 10*time.Second)
	closeIO(p)
	if alive(esc) {
		t.Errorf("escapee %d alive after Wait", esc)
	}
}

// A process under the supervisor gets the open-files limit os/exec gives
// (the one the daemon started with), not the one the Go runtime raised
// for itself.
func TestSupervisorOpenFileLimit(t *testing.T) {
	spec := domain.ProcessSpec{Command: "sh", Args: []string{"-c", "ulimit -Sn; ulimit -Hn"}}
	var got [2]string
	for i, s := range []*Starter{{BaseEnv: os.Environ()}, {BaseEnv: os.Environ(), Supervisor: testSupervisor()}} {
		p, err := s.Start(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p.IO().Stdout)
		waitWithin(t, p, 10*time.Second)
		closeIO(p)
		got[i] = string(b)
	}
	if got[0] != got[1] {
		t.Errorf("limits with os/exec %q, under the supervisor %q", got[0], got[1])
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		t.Logf("os/exec %q, supervised %q, this process %d/%d", got[0], got[1], lim.Cur, lim.Max)
	}
}

// nobody is an unprivileged uid and gid every Linux has.
const nobody = 65534

// Processes and agents run as another user: its uid, gid and groups, in
// both ways of starting them; the process cannot read the supervisor's
// /proc; a directory the user cannot enter is refused as such.
func TestRunAs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running as another user needs root (CI runs the tests as root)")
	}
	cred := &Credential{UID: nobody, GID: nobody, Groups: []uint32{nobody, 4242}}
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/"}
	sup := testSupervisor()
	supPID := strconv.Itoa(sup.supervisorPID())
	script := "id -u; id -g; id -G; cat /proc/" + supPID + "/environ >/dev/null 2>&1 && echo readable || echo unreadable"
	want := "65534\n65534\n65534 4242\nunreadable\n"
	for _, supervised := range []bool{false, true} {
		s := &Starter{BaseEnv: env, Cred: cred}
		r := &Runner{BaseEnv: env, Cred: cred, DefaultDir: "/"}
		if supervised {
			s.Supervisor, r.Supervisor = sup, sup
		}
		t.Run(fmt.Sprintf("process supervised=%v", supervised), func(t *testing.T) {
			for _, tty := range []bool{false, true} {
				p, err := s.Start(context.Background(), domain.ProcessSpec{Command: "sh", Args: []string{"-c", script}, TTY: tty})
				if err != nil {
					t.Fatal(err)
				}
				out, _ := io.ReadAll(p.IO().Stdout)
				waitWithin(t, p, 10*time.Second)
				closeIO(p)
				if got := strings.ReplaceAll(string(out), "\r\n", "\n"); got != want {
					t.Errorf("tty=%v: %q, want %q", tty, got, want)
				}
			}
		})
		t.Run(fmt.Sprintf("agent supervised=%v", supervised), func(t *testing.T) {
			p, err := r.Start(context.Background(), domain.LaunchSpec{Command: "/bin/sh", Args: []string{"-c", script}})
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(p.Stdout())
			if st, err := p.Wait(); err != nil || !st.Success() {
				t.Fatalf("Wait = %+v, %v", st, err)
			}
			if string(out) != want {
				t.Errorf("%q, want %q", out, want)
			}
		})
		if !supervised {
			continue // os/exec reports a chdir failure as its exec's
		}
		t.Run("closed directory", func(t *testing.T) {
			dir := t.TempDir() // 0700, root's
			_, err := s.Start(context.Background(), domain.ProcessSpec{Command: "true", Dir: dir})
			e, ok := domain.AsError(err)
			if !ok || !strings.Contains(e.Msg, "cannot enter working directory "+dir+": permission denied") {
				t.Errorf("start in a directory closed to the user: %v", err)
			}
		})
	}
}

// A start whose caller gives up (its context ends while the supervisor
// does not answer: here, stopped) leaves nothing running once the
// supervisor goes on: the tree is killed as soon as it reports its start.
func TestSupervisorAbandonedStart(t *testing.T) {
	sup := ownSupervisor(t)
	pid := sup.supervisorPID()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	s := &Starter{BaseEnv: os.Environ(), Supervisor: sup}
	arg := strconv.Itoa(5_000_000 + os.Getpid()%1_000_000)
	if p, err := s.Start(ctx, domain.ProcessSpec{Command: "sleep", Args: []string{arg}}); err == nil {
		closeIO(p)
		t.Fatal("a start past its context succeeded")
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// The sub-supervisor starts the sleep, is told to kill it, and goes.
	deadline := time.Now().Add(10 * time.Second)
	for len(childrenOf(pid)) > 0 || len(sleepersOf(arg)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("left running: sub-supervisors %v, sleep %v", childrenOf(pid), sleepersOf(arg))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sleepersOf lists the live processes running "sleep arg".
func sleepersOf(arg string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && string(b) == "sleep\x00"+arg+"\x00" && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// The leader and a child of its group die of the same SIGTERM, the child
// a moment later, and that child has a setsid child of its own. The
// sub-supervisor lists its children (the leader's zombie, the dying
// child), and the dying child hands it its orphan only as it exits; a kill
// pass that then reaped the child and counted nothing left reported the
// tree gone, and Wait returned with the orphan alive (seen once in a full
// run of the suite, under load). slowKill pauses each pass between its
// list and its kills, so the child mostly dies in between here.
func TestSupervisorOrphanOfAChildDyingWithTheLeader(t *testing.T) {
	sup := ownSupervisor(t)
	sup.slowKill = true
	s := &Starter{BaseEnv: os.Environ(), Supervisor: sup}
	// The child: TERM runs its handler a moment later (the trap waits for
	// its sleep 0.02 to end), then it exits; its setsid child stays.
	script := `(trap 'exit 0' TERM; setsid sleep 300 >/dev/null 2>&1 & echo $!; while :; do sleep 0.02; done) & exec sleep 300`
	for i := range 10 {
		p, err := s.Start(context.Background(), domain.ProcessSpec{Command: "sh", Args: []string{"-c", script}})
		if err != nil {
			t.Fatal(err)
		}
		esc := firstPID(t, p.IO().Stdout)
		escaped(t, esc, p.PID())
		if err := p.Signal(domain.SignalTerm); err != nil {
			t.Fatal(err)
		}
		waitWithin(t, p, 10*time.Second)
		p.IO().Stdout.Close()
		if alive(esc) {
			_ = syscall.Kill(esc, syscall.SIGKILL)
			t.Fatalf("tree %d: the orphan %d of a child that died with the leader is alive after Wait returned", i, esc)
		}
	}
}
