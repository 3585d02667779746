package process

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// agentEnv makes the test binary act as an agent (see runAgent) instead of
// running the tests: the tests start real processes without depending on
// any program being installed.
const agentEnv = "SANDBOX_PROCESS_TEST_AGENT"

// agentVars is the environment of a test agent. Under -race a binary that
// exits with code 0 sleeps a second first (atexit_sleep_ms); agents here
// exit often, so that is turned off.
// A test binary built with -cover warns on stderr at exit without
// GOCOVERDIR, which the agents get here (TestMain sets it).
func agentVars() map[string]string {
	vars := map[string]string{agentEnv: "1", "GORACE": "atexit_sleep_ms=0"}
	if d := os.Getenv("GOCOVERDIR"); d != "" {
		vars["GOCOVERDIR"] = d
	}
	return vars
}

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == SupervisorCommand {
		os.Exit(ServeSupervisor())
	}
	if os.Getenv(agentEnv) == "1" {
		os.Exit(runAgent(os.Args[1], os.Args[2:]))
	}
	if testing.CoverMode() != "" && os.Getenv("GOCOVERDIR") == "" {
		dir, err := os.MkdirTemp("", "process-cover-")
		if err == nil {
			os.Setenv("GOCOVERDIR", dir)
			code := m.Run()
			os.RemoveAll(dir)
			os.Exit(code)
		}
	}
	os.Exit(m.Run())
}

// runAgent is the agent side. Options: "ignore-term" ignores SIGTERM.
// Modes:
//
//	cat            copy stdin to stdout, exit 0 at its end
//	exit N         write "bye" to stderr and exit with N
//	selfkill       die of SIGKILL
//	env            print the environment as a JSON array and exit 0
//	sleep          print "ready" and sleep, never reading stdin
//	tree [exit] [child-ignore-term] [setsid]
//	               start a grandchild ("sleep", in the same group, or in a
//	               session of its own), wait until it is ready, print its
//	               pid, then sleep (or exit 0 at the end of stdin)
//	doublefork [exit]
//	               as tree, the grandchild double-forked and setsid
//	daemon         a stand-in daemon, see below
func runAgent(mode string, opts []string) int {
	if slices.Contains(opts, "ignore-term") {
		signal.Ignore(syscall.SIGTERM)
	}
	switch mode {
	case "cat":
		_, _ = io.Copy(os.Stdout, os.Stdin)
		return 0
	case "exit":
		fmt.Fprintln(os.Stderr, "bye")
		code, _ := strconv.Atoi(opts[0])
		return code
	case "selfkill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Hour)
	case "env":
		_ = json.NewEncoder(os.Stdout).Encode(os.Environ())
		return 0
	case "sleep":
		fmt.Println("ready")
		time.Sleep(time.Hour)
	case "daemon":
		// A stand-in for the daemon: under one supervisor it starts an
		// agent tree with a setsid grandchild and a process whose shell
		// double-forks a setsid child, prints "AGENT GRANDCHILD PROCESS
		// ESCAPEE SUPERVISOR", and waits to be killed.
		exe, _ := os.Executable()
		sup := NewSupervisor(exe, SupervisorCommand)
		spec := domain.LaunchSpec{Command: exe, Args: []string{"tree", "setsid", "child-ignore-term"}, Env: agentVars()}
		p, err := (&Runner{Supervisor: sup}).Start(context.Background(), spec)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		gc, _ := bufio.NewReader(p.Stdout()).ReadString('\n')
		up, err := (&Starter{BaseEnv: os.Environ(), Supervisor: sup}).Start(context.Background(), domain.ProcessSpec{Command: "sh", Args: []string{"-c", escapeScript}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		esc, _ := bufio.NewReader(up.IO().Stdout).ReadString('\n')
		supPID := sup.supervisorPID()
		fmt.Println(p.PID(), strings.TrimSpace(gc), up.PID(), strings.TrimSpace(esc), supPID)
		time.Sleep(time.Hour)
	case "doublefork":
		// Like tree, but the grandchild is double-forked and setsid: its
		// parent exits at once, and it is in no group or session of ours.
		cmd := exec.Command("/bin/sh", "-c", `(setsid "$0" sleep ignore-term >/dev/null 2>&1 & echo $!)`, os.Args[0])
		cmd.Env = append(os.Environ(), "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
		out, err := cmd.Output()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Print(string(out))
		if slices.Contains(opts, "exit") {
			_, _ = io.Copy(io.Discard, os.Stdin)
			return 0
		}
		time.Sleep(time.Hour)
	case "tree":
		args := []string{"sleep"}
		if slices.Contains(opts, "child-ignore-term") {
			args = append(args, "ignore-term")
		}
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = []string{agentEnv + "=1", "GORACE=atexit_sleep_ms=0"}
		if slices.Contains(opts, "setsid") {
			// Leaves the agent's process group and session: only the
			// supervisor can still find it.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		}
		out, err := cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
			return 2
		}
		fmt.Println(cmd.Process.Pid)
		if slices.Contains(opts, "exit") {
			// Exit once the test has seen the grandchild alive and
			// closed stdin, so the check cannot race the cleanup.
			_, _ = io.Copy(io.Discard, os.Stdin)
			return 0
		}
		time.Sleep(time.Hour)
	}
	return 3
}

// escapeScript double-forks a setsid sleep out of the shell's group and
// session, prints its pid, and execs a sleep of its own.
const escapeScript = `(setsid sleep 300 >/dev/null 2>&1 & echo $!); exec sleep 300`

// supervisedTests makes testRunner and testStarter start everything under
// the supervisor (the test binary again, see TestMain); TestSupervised
// sets it.
var supervisedTests bool

// testSupervisor is the test binary's one supervisor, started on first use.
var testSupervisor = sync.OnceValue(func() *Supervisor {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	s := NewSupervisor(exe, SupervisorCommand)
	if err := s.Start(); err != nil {
		panic(err)
	}
	return s
})

func testRunner() *Runner {
	if supervisedTests {
		return &Runner{Supervisor: testSupervisor()}
	}
	return &Runner{}
}

func testStarter(env []string) *Starter {
	if supervisedTests {
		return &Starter{BaseEnv: env, Supervisor: testSupervisor()}
	}
	return &Starter{BaseEnv: env}
}

// agentSpec is a launch spec running the test binary as an agent.
func agentSpec(t testing.TB, mode string, opts ...string) domain.LaunchSpec {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return domain.LaunchSpec{Agent: "test", Command: exe, Args: append([]string{mode}, opts...), Env: agentVars()}
}

// start starts spec and stops it at the end of the test.
func start(t *testing.T, spec domain.LaunchSpec) ports.AgentProcess {
	t.Helper()
	p, err := testRunner().Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Stop(ctx)
	})
	return p
}

// readLine reads one line of the agent's stdout.
func readLine(t *testing.T, p ports.AgentProcess) string {
	t.Helper()
	line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
	if err != nil {
		t.Fatalf("reading agent stdout: %q, %v", line, err)
	}
	return strings.TrimSuffix(line, "\n")
}

func TestRunnerContract(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	porttest.RunnerContract(t, testRunner(), domain.LaunchSpec{Agent: "cat", Command: exe, Args: []string{"cat"}, Env: agentVars()})
}

func TestWaitStatus(t *testing.T) {
	code := func(n int) *int { return &n }
	tests := []struct {
		name   string
		spec   domain.LaunchSpec
		stop   bool
		code   *int
		signal string
	}{
		{"exit 0", agentSpec(t, "exit", "0"), false, code(0), ""},
		{"exit 3", agentSpec(t, "exit", "3"), false, code(3), ""},
		{"exit 255", agentSpec(t, "exit", "255"), false, code(255), ""},
		{"killed by a signal", agentSpec(t, "selfkill"), false, nil, "killed"},
		{"terminated by Stop", agentSpec(t, "sleep"), true, nil, "terminated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := start(t, tt.spec)
			if tt.stop {
				if got := readLine(t, p); got != "ready" {
					t.Fatalf("agent said %q", got)
				}
				if err := p.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			st, err := p.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(codeOf(st)) != fmt.Sprint(codeOf(domain.ExitStatus{Code: tt.code})) || st.Signal != tt.signal {
				t.Errorf("status code=%v signal=%q, want code=%v signal=%q", codeOf(st), st.Signal, codeOf(domain.ExitStatus{Code: tt.code}), tt.signal)
			}
			if st.Success() != (tt.code != nil && *tt.code == 0) {
				t.Errorf("Success() = %v", st.Success())
			}
		})
	}
}

func codeOf(st domain.ExitStatus) any {
	if st.Code == nil {
		return nil
	}
	return *st.Code
}

func TestStderrPiped(t *testing.T) {
	p := start(t, agentSpec(t, "exit", "1"))
	b, err := io.ReadAll(p.Stderr())
	if err != nil || string(b) != "bye\n" {
		t.Errorf("stderr %q, %v", b, err)
	}
}

// A write to an agent that does not read gives up at the deadline instead
// of blocking the writer forever.
func TestStdinWriteDeadline(t *testing.T) {
	p := start(t, agentSpec(t, "sleep"))
	if got := readLine(t, p); got != "ready" {
		t.Fatalf("agent said %q", got)
	}
	d, ok := p.Stdin().(interface{ SetWriteDeadline(time.Time) error })
	if !ok {
		t.Fatalf("stdin %T has no SetWriteDeadline", p.Stdin())
	}
	if err := d.SetWriteDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	n, err := p.Stdin().Write(make([]byte, 4<<20)) // far more than a pipe holds
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write of 4 MiB: n=%d err=%v, want a deadline error", n, err)
	}
	if n >= 4<<20 {
		t.Errorf("wrote everything (%d bytes) to an agent that does not read", n)
	}
}

// The agent gets exactly BaseEnv plus the spec's variables, the spec
// winning on conflicts; nothing else of the daemon's environment leaks.
func TestAgentEnvironment(t *testing.T) {
	spec := agentSpec(t, "env")
	spec.Env["B"] = "from spec"
	spec.Env["C"] = "3"
	r := testRunner()
	r.BaseEnv = []string{"A=1", "B=from base", "PATH=/nowhere"}
	p, err := r.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	if err := json.NewDecoder(p.Stdout()).Decode(&env); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(env)
	want := []string{"A=1", "B=from spec", "C=3", "PATH=/nowhere"}
	for k, v := range agentVars() {
		want = append(want, k+"="+v)
	}
	slices.Sort(want)
	if !slices.Equal(env, want) {
		t.Errorf("agent env %q, want %q", env, want)
	}
}

func TestFilterEnv(t *testing.T) {
	env := []string{"A=1", "TOKEN=secret", "TOKENS=keep", "X_TOKEN=keep", "B=TOKEN=x", "SANDBOX_AGENT_TOKEN=s", "TOKEN="}
	got := FilterEnv(env, "TOKEN", "SANDBOX_AGENT_TOKEN")
	want := []string{"A=1", "TOKENS=keep", "X_TOKEN=keep", "B=TOKEN=x"}
	if !slices.Equal(got, want) {
		t.Errorf("FilterEnv = %q, want %q", got, want)
	}
	if got := FilterEnv(env); !slices.Equal(got, env) {
		t.Errorf("FilterEnv without names changed the env: %q", got)
	}
	if env[1] != "TOKEN=secret" {
		t.Errorf("FilterEnv modified its input")
	}
}

func TestMergeEnv(t *testing.T) {
	tests := []struct {
		base []string
		add  map[string]string
		want []string
	}{
		{nil, nil, []string{}},
		{[]string{"A=1"}, nil, []string{"A=1"}},
		{nil, map[string]string{"A": "1"}, []string{"A=1"}},
		{[]string{"A=1", "B=2", "C=3=3"}, map[string]string{"B": "", "D": "4"}, []string{"A=1", "B=", "C=3=3", "D=4"}},
		{[]string{"A=1", "A=2"}, map[string]string{"A": "3"}, []string{"A=3"}},
	}
	for _, tt := range tests {
		got := mergeEnv(tt.base, tt.add)
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("mergeEnv(%q, %v) = %q, want %q", tt.base, tt.add, got, tt.want)
		}
	}
}

// TestDropSecrets: a variable goes when its value holds a secret
// anywhere; its name does not matter.
func TestDropSecrets(t *testing.T) {
	secret := func(v string) bool { return strings.Contains(v, "admin-tok") }
	env := []string{"A=1", "TOK=admin-tok", "AUTH=Bearer admin-tok", "URL=http://h/?t=admin-tok&x", "B=admin", "EMPTY=", "NOEQ"}
	got := DropSecrets(env, secret)
	want := []string{"A=1", "B=admin", "EMPTY=", "NOEQ"}
	if !slices.Equal(got, want) {
		t.Errorf("DropSecrets = %q, want %q", got, want)
	}
	if !slices.Equal(DropSecrets(env, nil), env) {
		t.Error("a nil judge dropped something")
	}
	if env[1] != "TOK=admin-tok" {
		t.Error("DropSecrets modified its input")
	}
}

// TestAgentEnvironmentDropsSecrets: the filter applies to the final
// environment of each start (base and spec alike), with the secrets as
// they are at that start.
func TestAgentEnvironmentDropsSecrets(t *testing.T) {
	current := "first-tok"
	r := testRunner()
	r.BaseEnv = []string{"A=1", "BASE=Bearer first-tok", "LATER=second-tok"}
	r.Secret = func(v string) bool { return strings.Contains(v, current) }
	envOf := func() []string {
		spec := agentSpec(t, "env")
		spec.Env["SPEC"] = "x-first-tok-y"
		p, err := r.Start(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		var env []string
		if err := json.NewDecoder(p.Stdout()).Decode(&env); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		return env
	}
	env := envOf()
	if !slices.Contains(env, "A=1") || !slices.Contains(env, "LATER=second-tok") {
		t.Errorf("lost what is not secret: %q", env)
	}
	for _, kv := range env {
		if strings.Contains(kv, "first-tok") {
			t.Errorf("the agent got %q", kv)
		}
	}
	current = "second-tok" // a reload
	env = envOf()
	if slices.Contains(env, "LATER=second-tok") || !slices.Contains(env, "BASE=Bearer first-tok") {
		t.Errorf("after the reload: %q", env)
	}
}
