package process

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// alive reports whether pid is a live (not zombie) process. Orphans are
// reaped by whatever init the machine has, which may be slow or absent, so
// a zombie counts as gone.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// startTree starts an agent with a grandchild in its process group and
// returns both pids once the grandchild is ready.
func startTree(t *testing.T, mode string, opts ...string) (p ports.AgentProcess, grandchild int) {
	t.Helper()
	proc := start(t, agentSpec(t, mode, opts...))
	line := readLine(t, proc)
	gc, err := strconv.Atoi(line)
	if err != nil {
		t.Fatalf("agent said %q", line)
	}
	if !alive(gc) {
		t.Fatalf("grandchild %d not running", gc)
	}
	return proc, gc
}

func TestStopKillsGroup(t *testing.T) {
	tests := []struct {
		name     string
		opts     []string
		signal   string
		deadline bool // Stop had to escalate to SIGKILL at its ctx deadline
	}{
		{"SIGTERM reaches the grandchild", nil, "terminated", false},
		{"grandchild ignoring SIGTERM is killed when the agent dies", []string{"child-ignore-term"}, "terminated", false},
		{"SIGKILL after the deadline", []string{"ignore-term", "child-ignore-term"}, "killed", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, gc := startTree(t, "tree", tt.opts...)
			timeout := 30 * time.Second
			if tt.deadline {
				timeout = 300 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if err := p.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if escalated := ctx.Err() != nil; escalated != tt.deadline {
				t.Errorf("escalated to SIGKILL: %v, want %v", escalated, tt.deadline)
			}
			st, _ := p.Wait()
			if st.Signal != tt.signal || st.Code != nil {
				t.Errorf("status %+v, want signal %q", st, tt.signal)
			}
			if alive(p.PID()) || alive(gc) {
				t.Errorf("after Stop: agent alive %v, grandchild alive %v", alive(p.PID()), alive(gc))
			}
		})
	}
}

// An agent that exits on its own takes its process group with it: Wait
// returns only once the grandchild it left behind is gone.
func TestGroupCleanedOnOwnExit(t *testing.T) {
	p, gc := startTree(t, "tree", "exit", "child-ignore-term")
	p.Stdin().Close() // the agent exits at EOF
	st, err := p.Wait()
	if err != nil || !st.Success() {
		t.Fatalf("Wait = %+v, %v", st, err)
	}
	if alive(gc) {
		t.Errorf("grandchild %d outlived its agent", gc)
	}
}

// A start that fails leaves nothing behind: no process, no open pipe.
func TestStartFailureLeavesNothing(t *testing.T) {
	before := openFDs(t)
	for _, cmd := range []string{"/nonexistent/agent-acp", "no-such-agent-acp-in-path", t.TempDir()} {
		r := testRunner()
		r.BaseEnv = []string{"PATH=/nonexistent"}
		p, err := r.Start(context.Background(), domain.LaunchSpec{Command: cmd})
		if err == nil || p != nil {
			t.Fatalf("Start(%q) = %v, %v", cmd, p, err)
		}
		if !bytes.Contains([]byte(err.Error()), []byte(cmd)) {
			t.Errorf("error %q does not name the command", err)
		}
	}
	if leaked := newFDs(t, before); len(leaked) > 0 {
		t.Errorf("descriptors left open by failed starts: %v", leaked)
	}
}
