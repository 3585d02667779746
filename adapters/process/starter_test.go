package process

import (
	"bufio"
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

func TestStarterContract(t *testing.T) {
	porttest.ProcessStarterContract(t, testStarter(os.Environ()),
		domain.ProcessSpec{Command: "cat", Stdin: true},
		domain.ProcessSpec{Command: "sleep", Args: []string{"300"}})
}

// openFDs returns this process's descriptors, number → target.
func openFDs(t *testing.T) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc")
	}
	m := map[string]string{}
	for _, e := range ents {
		// One is the listing's own, closed by now: Readlink fails.
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			m[e.Name()] = target
		}
	}
	return m
}

// newFDs lists the descriptors open now that were not in before. Not a
// count: earlier tests may still be closing theirs (a count once went
// 27 → 10 during one test), which would hide a leak or, compared for
// equality, fail a test that leaked nothing.
func newFDs(t *testing.T, before map[string]string) []string {
	t.Helper()
	var leaked []string
	for fd, target := range openFDs(t) {
		if before[fd] != target && !strings.HasPrefix(target, "/proc/") {
			leaked = append(leaked, fd+" → "+target)
		}
	}
	return leaked
}

// A grandchild left behind by a leader that exits on its own is killed
// with the group, and Wait returns only once it is gone.
func TestStarterKillsWhatTheLeaderLeaves(t *testing.T) {
	s := testStarter(os.Environ())
	p, err := s.Start(context.Background(), domain.ProcessSpec{Command: "sh", Args: []string{"-c", "sleep 300 & echo $!"}})
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(p.IO().Stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(line))
	st, _ := p.Wait()
	if !st.Success() {
		t.Errorf("status %+v", st)
	}
	if err := syscall.Kill(child, 0); err == nil && groupHasLiveMember(p.PID()) {
		t.Errorf("grandchild %d outlived its leader", child)
	}
	p.IO().Stdout.Close()
	p.IO().Stderr.Close()
	if p.IO().Stdin != nil {
		t.Error("a spec without Stdin got a stdin pipe")
	}
}

// Closing a terminal's master unblocks a pending read (the master is
// non-blocking), and a start/exit cycle leaves no descriptor open.
func TestStarterTerminal(t *testing.T) {
	before := openFDs(t)
	s := testStarter(os.Environ())
	p, err := s.Start(context.Background(), domain.ProcessSpec{Command: "sh", TTY: true, Cols: 90, Rows: 30, Env: map[string]string{"PS1": "$ "}})
	if err != nil {
		t.Fatal(err)
	}
	pio := p.IO()
	if _, err := io.WriteString(pio.Stdin, "stty size; exit 5\n"); err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(pio.Stdout) // EIO once the shell is gone
	if !strings.Contains(string(out), "30 90") {
		t.Errorf("terminal output %q lacks the size 30 90", out)
	}
	st, _ := p.Wait()
	if st.Code == nil || *st.Code != 5 {
		t.Errorf("status %+v, want code 5", st)
	}
	pio.Stdout.Close()

	p, err = s.Start(context.Background(), domain.ProcessSpec{Command: "sleep", Args: []string{"300"}, TTY: true})
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := p.IO().Stdout.Read(make([]byte, 64))
		read <- err
	}()
	p.IO().Stdout.Close()
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("closing the master did not unblock a read")
	}
	_ = p.Signal(domain.SignalKill)
	// Closing the master hangs the terminal up (SIGHUP), unless the kill
	// came first.
	if st, _ := p.Wait(); st.Signal != "SIGKILL" && st.Signal != "SIGHUP" {
		t.Errorf("status %+v, want SIGHUP or SIGKILL", st)
	}
	if leaked := newFDs(t, before); len(leaked) > 0 {
		t.Errorf("descriptors left open: %v", leaked)
	}
}

// Start failures say what is wrong in the client's terms.
func TestStarterStartErrors(t *testing.T) {
	s := testStarter(os.Environ())
	plain := t.TempDir() + "/plain"
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := t.TempDir() + "/garbage"
	if err := os.WriteFile(script, []byte("\x00\x01\x02"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec domain.ProcessSpec
		want string
	}{
		{domain.ProcessSpec{Command: "no-such-command-xyz"}, "command not found: no-such-command-xyz"},
		{domain.ProcessSpec{Command: "/no/such/file"}, "no such file or directory"},
		{domain.ProcessSpec{Command: "true", Dir: "/no/such/dir"}, "working directory does not exist: /no/such/dir"},
		{domain.ProcessSpec{Command: plain}, "permission denied"},
		{domain.ProcessSpec{Command: script}, "not an executable"},
		{domain.ProcessSpec{Command: plain + "/x"}, "not a directory"},
	} {
		before := openFDs(t)
		_, err := s.Start(context.Background(), tc.spec)
		e, ok := domain.AsError(err)
		if !ok || e.Kind != domain.KindInvalidRequest || !strings.Contains(e.Msg, tc.want) {
			t.Errorf("%+v: %v, want invalid_request %q", tc.spec, err, tc.want)
		}
		if leaked := newFDs(t, before); len(leaked) > 0 {
			t.Errorf("%+v: descriptors left open: %v", tc.spec, leaked)
		}
	}
}

// A shell with job control puts background jobs in process groups of
// their own; a signal to a terminal process reaches them too, through its
// session.
func TestStarterTerminalJobsKilled(t *testing.T) {
	s := testStarter(os.Environ())
	p, err := s.Start(context.Background(), domain.ProcessSpec{Command: "sh", Args: []string{"-i"}, TTY: true, Env: map[string]string{"PS1": "$ "}})
	if err != nil {
		t.Fatal(err)
	}
	pio := p.IO()
	if _, err := io.WriteString(pio.Stdin, "set -m; sleep 300 & echo job=$!\n"); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(pio.Stdout)
	job := 0
	for job == 0 {
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the job's pid: %v", err)
		}
		if i := strings.Index(line, "job="); i >= 0 && !strings.Contains(line, "$!") {
			job, _ = strconv.Atoi(strings.TrimSpace(line[i+4:]))
		}
	}
	if pgid, _ := syscall.Getpgid(job); pgid == p.PID() {
		t.Logf("job %d shares the shell's group (no job control); the test proves less", job)
	}
	if err := p.Signal(domain.SignalKill); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	pio.Stdout.Close()
	if alive(job) {
		t.Errorf("background job %d outlived its terminal's kill", job)
	}
}

// TestStarterDropsSecrets: a process's environment loses every variable
// whose value holds a secret, the client's own included.
func TestStarterDropsSecrets(t *testing.T) {
	s := &Starter{BaseEnv: []string{"A=1", "AUTH=Bearer tok-9"}, Secret: func(v string) bool { return strings.Contains(v, "tok-9") }}
	p, err := s.Start(context.Background(), domain.ProcessSpec{Command: "env", Env: map[string]string{"MINE": "tok-9", "B": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	pio := p.IO()
	out, _ := io.ReadAll(pio.Stdout)
	pio.Stdout.Close()
	pio.Stderr.Close()
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "tok-9") || !strings.Contains(string(out), "A=1\n") || !strings.Contains(string(out), "B=2\n") {
		t.Errorf("env:\n%s", out)
	}
}
