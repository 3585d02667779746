package process

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// SuperviseCommand is the hidden subcommand of the daemon's binary that
// runs Supervise; Runner.Supervisor names the binary.
const SuperviseCommand = "_supervise-agent"

// superviseReportFD is where the supervisor reports to the daemon: first
// "pid N" (or "error MSG"), later "status N", the agent's raw wait status.
const superviseReportFD = 3

const prSetChildSubreaper = 36 // PR_SET_CHILD_SUBREAPER, linux/prctl.h

// Supervise is the per-agent supervisor, the process between the daemon and
// one agent. args is the agent's resolved path, then its argv.
//
// It exists so that nothing an agent starts can outlive it, even when the
// daemon is SIGKILLed: it is a child subreaper (PR_SET_CHILD_SUBREAPER), so
// every orphaned descendant of the agent, including ones that left the
// agent's process group with setsid, is reparented to it rather than to
// init; and it gets SIGTERM when the daemon dies (Pdeathsig, set by the
// daemon) or stops watching its parent. When the agent exits, or on that
// signal, it SIGKILLs every descendant still alive, reports the agent's wait
// status, and exits. The agent inherits the supervisor's stdio, which are
// the daemon's pipes, so no byte passes through the supervisor; it then
// points its own stdio at /dev/null so the pipes end when the agent's tree
// does.
func Supervise(args []string) int {
	report := os.NewFile(superviseReportFD, "report")
	syscall.CloseOnExec(superviseReportFD)
	fail := func(err error) int {
		fmt.Fprintf(report, "error %s\n", bytes.ReplaceAll([]byte(err.Error()), []byte("\n"), []byte(" ")))
		return 127
	}
	if len(args) < 2 {
		return fail(fmt.Errorf("usage: %s PATH ARGV0 [ARG...]", SuperviseCommand))
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		return fail(fmt.Errorf("PR_SET_CHILD_SUBREAPER: %w", e))
	}
	daemon := os.Getppid()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	wd, _ := os.Getwd()
	pid, err := syscall.ForkExec(args[0], args[1:], &syscall.ProcAttr{
		Dir:   wd,
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		// Its own group, as without a supervisor: the daemon signals -pid.
		Sys: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(report, "pid %d\n", pid)
	if null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
		for fd := range 3 {
			_ = syscall.Dup2(int(null.Fd()), fd)
		}
		null.Close()
	}

	// Reap every child: the agent, and each orphan reparented here.
	agentDone := make(chan syscall.WaitStatus, 1)
	go func() {
		for {
			var ws syscall.WaitStatus
			p, err := syscall.Wait4(-1, &ws, 0, nil)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				return // no children left
			}
			if p == pid {
				agentDone <- ws
			}
		}
	}()
	// Pdeathsig follows the thread that forked us, not the daemon process;
	// watching the parent pid covers the rare case where it misses.
	orphaned := time.NewTicker(250 * time.Millisecond)
	defer orphaned.Stop()
	var ws syscall.WaitStatus
wait:
	for {
		select {
		case ws = <-agentDone:
			break wait
		case <-sigs:
		case <-orphaned.C:
			if os.Getppid() == daemon {
				continue
			}
		}
		// The daemon is gone or wants everything gone now.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		killDescendants()
		select {
		case ws = <-agentDone:
		case <-time.After(2 * time.Second):
			ws = syscall.WaitStatus(syscall.SIGKILL)
		}
		break wait
	}
	killDescendants()
	fmt.Fprintf(report, "status %d\n", uint32(ws))
	if ws.Exited() {
		return ws.ExitStatus()
	}
	return 128 + int(ws.Signal())
}

// killDescendants SIGKILLs every live descendant of this process until none
// is left. A process being killed cannot fork, and its orphans are
// reparented here (the subreaper), so killing the live children, round
// after round, reaches every level of the tree; the reaper goroutine
// collects them.
func killDescendants() {
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids, ok := liveChildren()
		if !ok { // no /proc/<pid>/task/<tid>/children: walk all of /proc
			pids = liveDescendants(os.Getpid())
		}
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(time.Millisecond)
	}
}

// liveChildren lists this process's non-zombie children from
// /proc/self/task/*/children, which is cheap: no scan of every process.
func liveChildren() ([]int, bool) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, false
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			return nil, false
		}
		for _, f := range bytes.Fields(b) {
			pid, err := strconv.Atoi(string(f))
			if err == nil && !zombie(pid) {
				out = append(out, pid)
			}
		}
	}
	return out, true
}

// zombie reports whether pid has exited (or is gone).
func zombie(pid int) bool {
	p, ok := readStat(strconv.Itoa(pid))
	return !ok || p.dead
}

// liveDescendants walks /proc for the non-zombie descendants of root.
func liveDescendants(root int) []int {
	children := map[int][]int{}
	live := map[int]bool{}
	if !eachProcess(func(p procStat) bool {
		children[p.ppid] = append(children[p.ppid], p.pid)
		live[p.pid] = !p.dead
		return true
	}) {
		return nil
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if live[c] {
				out = append(out, c)
			}
			queue = append(queue, c)
		}
	}
	return out
}

// readReport reads one line of a supervisor's report.
func readReport(r *bufio.Reader) (kind, value string, err error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", "", err
	}
	kind, value, _ = strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	return kind, value, nil
}

const supervised = true
