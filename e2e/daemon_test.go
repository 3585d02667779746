package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/proc"
)

// daemonRig runs `sandbox-agent daemon ...` from a copy of the binary in a
// directory of its own, so every process it leaves is found by its
// executable's path; at cleanup the daemon is stopped and nothing may be
// left (what is, is killed and the test fails).
type daemonRig struct {
	t          *testing.T
	bins, home string
	bin        string
	port       string
	env        []string
}

func newDaemonRig(t *testing.T) *daemonRig {
	r := &daemonRig{t: t, bins: t.TempDir(), home: t.TempDir()}
	r.bin = copyBinary(t, r.bins)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.port = strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	r.env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + r.home,
		"SANDBOX_AGENT_ACP_REGISTRY_URL=http://127.0.0.1:9/registry.json",
	}
	t.Cleanup(func() {
		r.run(r.bin, "daemon", "stop", "-p", r.port)
		if left := proc.ExeUnder(r.bins); len(left) > 0 {
			t.Errorf("processes left behind: %v", left)
			proc.KillUnder(r.bins)
		}
	})
	return r
}

func (r *daemonRig) run(bin string, args ...string) cliResult {
	r.t.Helper()
	return runCLI(r.t, bin, r.env, -1, args...)
}

// daemon runs a daemon subcommand at the rig's port.
func (r *daemonRig) daemon(sub string, args ...string) cliResult {
	r.t.Helper()
	return r.run(r.bin, append([]string{"daemon", sub, "-p", r.port}, args...)...)
}

var pidLine = regexp.MustCompile(`pid:? (\d+)`)

func pidOf(t *testing.T, out string) int {
	t.Helper()
	m := pidLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no pid in %q", out)
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

func (r *daemonRig) stateFile(ext string) string {
	return filepath.Join(r.home, ".local", "state", "sandbox-agent", "daemon", "daemon-127-0-0-1-"+r.port+ext)
}

func (r *daemonRig) health(token string) int {
	r.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+r.port+"/v1/health", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestDaemonLifecycle: status before anything, start, start again (no
// second daemon), status, stop, status after; the exit statuses a script
// reads.
func TestDaemonLifecycle(t *testing.T) {
	r := newDaemonRig(t)
	if res := r.daemon("status"); res.code != 3 || !strings.Contains(res.stdout, "status: not running") {
		t.Fatalf("status before start: %+v", res)
	}
	res := r.daemon("start")
	if res.code != 0 || !strings.HasPrefix(res.stdout, "daemon started: pid ") || !strings.Contains(res.stderr, "starting the daemon at http://127.0.0.1:"+r.port) {
		t.Fatalf("start: %+v", res)
	}
	pid := pidOf(t, res.stdout)
	if r.health("") != 200 {
		t.Fatal("the daemon does not answer /v1/health")
	}
	if s, err := proc.ReadStat(pid); err != nil || s.PGRP != pid {
		t.Errorf("the daemon is not its own process group leader: %+v %v", s, err)
	}
	if b, err := os.ReadFile(r.stateFile(".pid")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(pid) {
		t.Errorf("pid file: %q %v", b, err)
	}
	if b, err := os.ReadFile(r.stateFile(".log")); err != nil || !strings.Contains(string(b), "sandbox-agent listening") {
		t.Errorf("log: %q %v", b, err)
	}

	res = r.daemon("start")
	if res.code != 0 || pidOf(t, res.stdout) != pid || !strings.HasPrefix(res.stdout, "daemon already running") {
		t.Fatalf("second start: %+v", res)
	}
	if n := len(servers(proc.ExeUnder(r.bins))); n != 1 {
		t.Errorf("%d daemons after two starts", n)
	}

	res = r.daemon("status")
	want := "status: running\npid: " + strconv.Itoa(pid) + "\nurl: http://127.0.0.1:" + r.port + "\nversion: 0.4.2\nhealth: ok\nlog: " + r.stateFile(".log") + "\n"
	if res.code != 0 || res.stdout != want {
		t.Fatalf("status: %+v\nwant %q", res, want)
	}

	res = r.daemon("stop")
	if res.code != 0 || res.stdout != "daemon stopped: pid "+strconv.Itoa(pid)+"\n" {
		t.Fatalf("stop: %+v", res)
	}
	if proc.Alive(pid) || r.health("") != 0 {
		t.Error("the daemon still runs after stop")
	}
	if _, err := os.Stat(r.stateFile(".pid")); err == nil {
		t.Error("the pid file is left after stop")
	}
	if res := r.daemon("status"); res.code != 3 {
		t.Errorf("status after stop: %+v", res)
	}
	if res := r.daemon("stop"); res.code != 0 || !strings.Contains(res.stdout, "not running") {
		t.Errorf("stop when stopped: %+v", res)
	}
	// A state directory that cannot be made: status cannot tell (1).
	r.env = append(r.env, "XDG_STATE_HOME="+filepath.Join(r.stateFile(".log"), "not-a-dir"))
	if res := r.daemon("status"); res.code != 1 || !strings.Contains(res.stderr, "state directory") {
		t.Errorf("status without a state directory: %+v", res)
	}
}

// TestDaemonToken: the token reaches the daemon through its environment
// (or --token-file), never its command line; status without the token
// exits 4 (the daemon answers 401), with it 0.
func TestDaemonToken(t *testing.T) {
	r := newDaemonRig(t)
	const secret = "s3cret-daemon-token"
	res := r.daemon("start", "-t", secret)
	if res.code != 0 {
		t.Fatalf("start: %+v", res)
	}
	pid := pidOf(t, res.stdout)
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if strings.Contains(string(cmdline), secret) {
		t.Errorf("the token is on the daemon's command line: %q", cmdline)
	}
	if r.health("") != 401 || r.health(secret) != 200 {
		t.Errorf("the daemon does not require the token: %d %d", r.health(""), r.health(secret))
	}
	if res := r.daemon("status"); res.code != 4 || !strings.Contains(res.stdout, "health: the daemon wants a token") {
		t.Errorf("status without the token: %+v", res)
	}
	if res := r.daemon("status", "-t", secret); res.code != 0 {
		t.Errorf("status with the token: %+v", res)
	}
	if res := r.daemon("stop"); res.code != 0 {
		t.Fatalf("stop: %+v", res)
	}

	file := filepath.Join(r.home, "tokens")
	must(t, os.WriteFile(file, []byte("# tokens\n"+secret+"\n"), 0o600))
	res = r.daemon("start", "--token-file", file)
	if res.code != 0 {
		t.Fatalf("start --token-file: %+v", res)
	}
	pid = pidOf(t, res.stdout)
	cmdline, _ = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if strings.Contains(string(cmdline), secret) || !strings.Contains(string(cmdline), "--token-file\x00"+file) {
		t.Errorf("command line %q", cmdline)
	}
	if r.health(secret) != 200 || r.health("") != 401 {
		t.Error("the token file is not in force")
	}
}

// TestDaemonUpgrade: a daemon of an older version (this binary built with
// -X main.version=0.0.1) is left alone by start and replaced by start
// --upgrade.
func TestDaemonUpgrade(t *testing.T) {
	r := newDaemonRig(t)
	old := filepath.Join(r.bins, "sandbox-agent-old")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-ldflags", "-X main.version=0.0.1", "-o", old, "github.com/sandbox-agent-go/sandbox-agent/cmd/sandbox-agent")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	res := r.run(old, "daemon", "start", "-p", r.port)
	if res.code != 0 || !strings.Contains(res.stdout, "version 0.0.1") {
		t.Fatalf("old start: %+v", res)
	}
	oldPID := pidOf(t, res.stdout)

	res = r.daemon("start")
	if res.code != 0 || pidOf(t, res.stdout) != oldPID || !strings.Contains(res.stdout, "version 0.0.1") || !strings.Contains(res.stderr, "daemon start --upgrade") {
		t.Fatalf("start without --upgrade: %+v", res)
	}
	if res := r.daemon("status"); res.code != 0 || !strings.Contains(res.stdout, "version: 0.0.1") || !strings.Contains(res.stdout, "daemon start --upgrade") {
		t.Errorf("status of the old daemon: %+v", res)
	}

	res = r.daemon("start", "--upgrade")
	if res.code != 0 || !strings.HasPrefix(res.stdout, "daemon upgraded: pid ") || !strings.Contains(res.stdout, "version 0.4.2 (was 0.0.1)") {
		t.Fatalf("start --upgrade: %+v", res)
	}
	newPID := pidOf(t, res.stdout)
	if newPID == oldPID || proc.Alive(oldPID) {
		t.Errorf("old pid %d alive %v, new %d", oldPID, proc.Alive(oldPID), newPID)
	}
	if res := r.daemon("status"); res.code != 0 || !strings.Contains(res.stdout, "version: 0.4.2") {
		t.Errorf("status after the upgrade: %+v", res)
	}
	if res := r.daemon("start", "--upgrade"); res.code != 0 || pidOf(t, res.stdout) != newPID {
		t.Errorf("--upgrade again: %+v", res)
	}
}

// TestDaemonStalePidFile: a pid file whose process is gone, or whose pid
// is another live process (here: the record edited to name a sleep of
// this test), is reported stale and never signalled; start takes over.
func TestDaemonStalePidFile(t *testing.T) {
	r := newDaemonRig(t)
	res := r.daemon("start")
	if res.code != 0 {
		t.Fatalf("start: %+v", res)
	}
	pid := pidOf(t, res.stdout)
	p, _ := os.FindProcess(pid)
	must(t, p.Kill())
	// A killed multi-threaded daemon is a zombie leader while its other
	// threads exit (they still hold its socket); status counts it running
	// until they have, so wait for what status says rather than for /proc.
	harness.Eventually(t, 10*time.Second, "status to call the killed daemon stale", func() bool {
		res = r.daemon("status")
		return res.code == 3
	})
	if !strings.Contains(res.stdout, "stale: pid "+strconv.Itoa(pid)+" is gone") {
		t.Fatalf("status of a dead pid: %+v", res)
	}

	// The pid is now a live process that is not the daemon.
	sleeper := exec.Command("sleep", "300")
	must(t, sleeper.Start())
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	var rec map[string]any
	b, err := os.ReadFile(r.stateFile(".json"))
	must(t, err)
	must(t, json.Unmarshal(b, &rec))
	rec["pid"] = sleeper.Process.Pid
	b, _ = json.Marshal(rec)
	must(t, os.WriteFile(r.stateFile(".json"), b, 0o600))
	must(t, os.WriteFile(r.stateFile(".pid"), []byte(strconv.Itoa(sleeper.Process.Pid)+"\n"), 0o600))

	res = r.daemon("status")
	if res.code != 3 || !strings.Contains(res.stdout, "belongs to another process") {
		t.Fatalf("status of a reused pid: %+v", res)
	}
	res = r.daemon("stop")
	if res.code != 0 || !strings.Contains(res.stderr, "removed a stale pid file") {
		t.Fatalf("stop of a reused pid: %+v", res)
	}
	if !proc.Alive(sleeper.Process.Pid) {
		t.Fatal("stop signalled a process that is not the daemon")
	}
	// And start over a stale file starts a daemon.
	must(t, os.WriteFile(r.stateFile(".json"), b, 0o600))
	res = r.daemon("start")
	if res.code != 0 || !strings.Contains(res.stderr, "removed a stale pid file") || !strings.HasPrefix(res.stdout, "daemon started") {
		t.Fatalf("start over a stale pid file: %+v", res)
	}
	if !proc.Alive(sleeper.Process.Pid) {
		t.Fatal("start signalled a process that is not the daemon")
	}
}

// TestDaemonStartFails: another process on the port: start fails, saying
// so, and leaves nothing running; a daemon that exits at once (here a bad
// setting in its environment) fails start with the end of its log.
func TestDaemonStartFails(t *testing.T) {
	r := newDaemonRig(t)
	ln, err := net.Listen("tcp", "127.0.0.1:"+r.port)
	must(t, err)
	res := r.daemon("start")
	ln.Close()
	if res.code != 1 || !strings.Contains(res.stderr, "127.0.0.1:"+r.port+" is already in use by another process") {
		t.Fatalf("start on a taken port: %+v", res)
	}
	if left := proc.ExeUnder(r.bins); len(left) > 0 {
		t.Fatalf("started anyway: %v", left)
	}

	r.env = append(r.env, "SANDBOX_AGENT_ACP_REQUEST_TIMEOUT_MS=bogus")
	res = r.daemon("start")
	if res.code != 1 || !strings.Contains(res.stderr, "the daemon exited while starting") || !strings.Contains(res.stderr, "the end of "+r.stateFile(".log")) {
		t.Fatalf("start of a daemon that exits: %+v", res)
	}
	if _, err := os.Stat(r.stateFile(".pid")); err == nil {
		t.Error("a pid file is left")
	}
}

// TestCompatCLIFlags: every flag the reference's credentials and daemon
// commands take (short and long name), and the address defaults, are ours
// too; but the reference's global -t/-n on the credentials commands,
// which use no token.
func TestCompatCLIFlags(t *testing.T) {
	ref := referenceCLI(t)
	flag := regexp.MustCompile(`(?m)^\s+(?:(-\w), )?(--[\w-]+)`)
	for _, cmd := range [][]string{
		{"credentials", "extract"}, {"credentials", "extract-env"},
		{"daemon", "start"}, {"daemon", "stop"}, {"daemon", "status"},
	} {
		want := runCLI(t, ref, []string{"PATH=/usr/bin:/bin"}, -1, append(cmd, "--help")...)
		got := runCLI(t, harness.Binary, []string{"PATH=/usr/bin:/bin"}, -1, append(cmd, "--help")...)
		if want.code != 0 || got.code != 0 {
			t.Fatalf("%q --help: %+v %+v", cmd, want, got)
		}
		for _, m := range flag.FindAllStringSubmatch(want.stdout, -1) {
			short, long := m[1], m[2]
			if long == "--help" || cmd[0] == "credentials" && (long == "--token" || long == "--no-token") {
				continue
			}
			spelled := long
			if short != "" {
				spelled = short + ", " + long
			}
			if !strings.Contains(got.stdout, spelled+" ") {
				t.Errorf("%q: no %s in\n%s", cmd, spelled, got.stdout)
			}
		}
		if cmd[0] == "daemon" && (!strings.Contains(got.stdout, `(default "127.0.0.1")`) || !strings.Contains(got.stdout, `(default "2468")`)) {
			t.Errorf("%q: defaults differ from the reference's 127.0.0.1:2468:\n%s", cmd, got.stdout)
		}
	}
}

// servers are the pids running "sandbox-agent server": a daemon, not the
// process supervisor each daemon starts from the same binary.
func servers(pids []int) []int {
	var out []int
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if args := strings.Split(string(b), "\x00"); err == nil && len(args) > 1 && args[1] == "server" {
			out = append(out, pid)
		}
	}
	return out
}

// TestDaemonStartKeepsNoInheritedDescriptor: a descriptor the caller of
// `daemon start` inherited (a harness's pipe, a shell's 3>file) does not
// reach the daemon. It did: the daemon held the pipe's write end for its
// whole life, so whatever waited for EOF on it (a harness collecting a
// command's output) hung until the daemon was stopped.
func TestDaemonStartKeepsNoInheritedDescriptor(t *testing.T) {
	r := newDaemonRig(t)
	pr, pw, err := os.Pipe()
	must(t, err)
	defer pr.Close()
	cmd := exec.Command(r.bin, "daemon", "start", "-p", r.port)
	cmd.Env, cmd.Dir = r.env, "/"
	cmd.ExtraFiles = []*os.File{pw} // fd 3 of the CLI, not close-on-exec
	out, err := cmd.Output()
	pw.Close()
	if err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	pid := pidOf(t, string(out))
	var st syscall.Stat_t
	must(t, syscall.Fstat(int(pr.Fd()), &st))
	pipe := "pipe:[" + strconv.FormatUint(st.Ino, 10) + "]"
	fds, err := proc.FDs(pid)
	must(t, err)
	for _, fd := range fds {
		if fd.Target == pipe {
			t.Errorf("the daemon holds its starter's pipe as fd %s", fd.Num)
		}
	}
}
