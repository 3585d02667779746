package process

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSupervised runs the runner's tests again with every agent under a
// supervisor: same pids, statuses, pipes and group semantics.
func TestSupervised(t *testing.T) {
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
	} {
		t.Run(name, test)
	}
}

// A grandchild that called setsid has left the agent's process group and
// session; the supervisor still kills it, on Stop and on the agent's own
// exit.
func TestSupervisorKillsSetsidDescendants(t *testing.T) {
	supervisedTests = true
	t.Cleanup(func() { supervisedTests = false })
	t.Run("Stop", func(t *testing.T) {
		p, gc := startTree(t, "setsid", "child-ignore-term")
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		if alive(gc) {
			t.Errorf("setsid grandchild %d outlived Stop", gc)
		}
	})
	t.Run("own exit", func(t *testing.T) {
		p, gc := startTree(t, "exit", "setsid", "child-ignore-term")
		p.Stdin().Close() // the agent exits at EOF
		if st, err := p.Wait(); err != nil || !st.Success() {
			t.Fatalf("Wait = %+v, %v", st, err)
		}
		if alive(gc) {
			t.Errorf("setsid grandchild %d outlived its agent", gc)
		}
	})
}

// The daemon SIGKILLed: its supervisors get SIGTERM (Pdeathsig) and kill
// every descendant of their agent, setsid ones included, within 2 s.
func TestSupervisorOutlivesNothingWhenDaemonKilled(t *testing.T) {
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
	buf := make([]byte, 64)
	n, _ := out.Read(buf)
	fields := strings.Fields(string(buf[:n]))
	if len(fields) != 2 {
		_ = daemon.Process.Kill()
		t.Fatalf("stand-in daemon said %q", buf[:n])
	}
	var pids []int
	for _, f := range fields {
		p, err := strconv.Atoi(f)
		if err != nil || !alive(p) {
			t.Fatalf("pid %q not running", f)
		}
		pids = append(pids, p)
	}
	_ = daemon.Process.Signal(syscall.SIGKILL)
	_ = daemon.Wait()
	deadline := time.Now().Add(2 * time.Second)
	for _, p := range pids {
		for alive(p) {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d (agent %d, setsid grandchild %d) alive 2 s after the daemon was killed", p, pids[0], pids[1])
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
