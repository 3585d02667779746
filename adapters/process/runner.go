package process

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// Runner starts agents as child processes in their own process groups.
type Runner struct {
	// BaseEnv is the environment every agent starts from (the daemon's own,
	// minus anything secret); a spec's Env is added on top.
	BaseEnv []string
	// Secret, when set, is asked about each variable's value when an agent
	// starts; a variable whose value holds a secret is not passed on
	// (DropSecrets).
	Secret func(value string) bool
	// Supervisor, when set (Linux only), is an executable whose
	// SuperviseCommand runs Supervise: the daemon's own binary. Each agent
	// then runs under a supervisor that leaves no descendant of the agent
	// alive, even when the daemon is SIGKILLed. See Supervise.
	Supervisor string
}

var _ ports.AgentRunner = (*Runner)(nil)

// FilterEnv returns env without the variables named in drop.
func FilterEnv(env []string, drop ...string) []string {
	out := make([]string, 0, len(env))
next:
	for _, kv := range env {
		for _, d := range drop {
			if strings.HasPrefix(kv, d+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

// DropSecrets returns env without the variables whose value secret says
// holds a secret: the one filter both starters apply to the final
// environment of what they start (the daemon's, the launch spec's and the
// client's variables alike), at start time, so a token reloaded since the
// daemon started is covered. A nil secret keeps env.
func DropSecrets(env []string, secret func(string) bool) []string {
	if secret == nil {
		return env
	}
	out := env[:0:0]
	for _, kv := range env {
		if _, v, _ := strings.Cut(kv, "="); v != "" && secret(v) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// Start implements ports.AgentRunner.
func (r *Runner) Start(ctx context.Context, spec domain.LaunchSpec) (ports.AgentProcess, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cmd := exec.Command(spec.Command, spec.Args...)
	useSupervisor := r.Supervisor != "" && supervised
	if useSupervisor {
		path := spec.Command
		if !strings.Contains(path, "/") {
			var err error
			if path, err = exec.LookPath(path); err != nil {
				return nil, fmt.Errorf("start %s: %w", spec.Command, err)
			}
		}
		cmd = exec.Command(r.Supervisor, append([]string{SuperviseCommand, path, spec.Command}, spec.Args...)...)
	}
	cmd.Dir = spec.Dir
	cmd.Env = DropSecrets(mergeEnv(r.BaseEnv, spec.Env), r.Secret)
	cmd.SysProcAttr = sysProcAttr(useSupervisor)

	var pipes stdio
	fail := func(err error) (ports.AgentProcess, error) {
		pipes.closeAll()
		return nil, fmt.Errorf("start %s: %w", spec.Command, err)
	}
	if err := pipes.open(cmd, true); err != nil {
		return fail(err)
	}
	var reportR, reportW *os.File
	if useSupervisor {
		var err error
		if reportR, reportW, err = pipes.pipe(); err != nil {
			return fail(err)
		}
		cmd.ExtraFiles = []*os.File{reportW}
	}
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	pipes.started()

	p := &proc{cmd: cmd, pid: cmd.Process.Pid, stdin: pipes.inW, stdout: pipes.outR, stderr: pipes.errR, done: make(chan struct{})}
	if useSupervisor {
		reportW.Close()
		p.report = bufio.NewReader(reportR)
		p.reportFile = reportR
		pid, err := p.agentPID()
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			reportR.Close()
			pipes.inW.Close()
			pipes.outR.Close()
			pipes.errR.Close()
			return nil, fmt.Errorf("start %s: %w", spec.Command, err)
		}
		p.pid = pid
	}
	go p.wait()
	return p, nil
}

// supervisorStart bounds how long a supervisor may take to start its agent.
const supervisorStart = 30 * time.Second

// agentPID reads the supervisor's first report: the agent's pid, or why it
// could not be started.
func (p *proc) agentPID() (int, error) {
	_ = p.reportFile.SetReadDeadline(time.Now().Add(supervisorStart))
	defer p.reportFile.SetReadDeadline(time.Time{}) //nolint:errcheck // best effort
	kind, value, err := readReport(p.report)
	switch {
	case err != nil:
		return 0, fmt.Errorf("supervisor: %w", err)
	case kind == "pid":
		return strconv.Atoi(value)
	case kind == "error":
		return 0, errors.New(value)
	}
	return 0, fmt.Errorf("supervisor said %q", kind+" "+value)
}

func mergeEnv(base []string, add map[string]string) []string {
	env := make([]string, 0, len(base)+len(add))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, overridden := add[k]; !overridden {
			env = append(env, kv)
		}
	}
	for k, v := range add {
		env = append(env, k+"="+v)
	}
	return env
}

type proc struct {
	cmd *exec.Cmd
	pid int // the agent's pid and process group; not cmd's with a supervisor
	// report is the supervisor's report pipe (nil without one).
	report     *bufio.Reader
	reportFile *os.File
	stdin      *os.File
	stdout     *os.File
	stderr     *os.File

	done   chan struct{} // closed when the process and its group are gone
	status domain.ExitStatus
	err    error

	stopOnce sync.Once
}

var _ ports.AgentProcess = (*proc)(nil)

// Stdin is an *os.File, so it also offers SetWriteDeadline.
func (p *proc) Stdin() io.WriteCloser { return p.stdin }
func (p *proc) Stdout() io.ReadCloser { return p.stdout }
func (p *proc) Stderr() io.ReadCloser { return p.stderr }
func (p *proc) PID() int              { return p.pid }

// groupGoneWait bounds how long Wait polls for the rest of the process group
// to disappear after SIGKILL (zombies not reaped by init keep it "alive").
const groupGoneWait = time.Second

func (p *proc) wait() {
	err := p.cmd.Wait()
	st := p.cmd.ProcessState
	var ws syscall.WaitStatus
	haveWS := false
	if st != nil {
		ws, haveWS = st.Sys().(syscall.WaitStatus)
	}
	if p.report != nil {
		// The supervisor reports the agent's own status; without a report
		// (the supervisor was killed) its own status is the best there is.
		if kind, value, rerr := readReport(p.report); rerr == nil && kind == "status" {
			if n, perr := strconv.ParseUint(value, 10, 32); perr == nil {
				ws, haveWS = syscall.WaitStatus(n), true
			}
		}
		p.reportFile.Close()
	}
	switch {
	case st == nil:
		p.err = err
	case haveWS && ws.Exited():
		code := ws.ExitStatus()
		p.status.Code = &code
	case haveWS && ws.Signaled():
		p.status.Signal = ws.Signal().String()
	case st.Exited():
		code := st.ExitCode()
		p.status.Code = &code
	}
	// The leader is gone; whatever it left in its group goes too, so an agent
	// exiting on its own leaks nothing either.
	pgid := p.pid
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	deadline := time.Now().Add(groupGoneWait)
	for time.Now().Before(deadline) && groupAlive(pgid) {
		time.Sleep(5 * time.Millisecond)
	}
	p.stdin.Close()
	close(p.done)
}

// groupAlive reports whether any non-zombie process is still in group pgid.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	return groupHasLiveMember(pgid)
}

func (p *proc) Wait() (domain.ExitStatus, error) {
	<-p.done
	return p.status, p.err
}

func (p *proc) Stop(ctx context.Context) error {
	p.stopOnce.Do(func() {
		p.stdin.Close()
		_ = syscall.Kill(-p.pid, syscall.SIGTERM)
	})
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	<-p.done
	return nil
}
