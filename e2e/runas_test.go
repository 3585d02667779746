package e2e

import (
	"encoding/json"
	"fmt"

	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// runAsUser is a user made for the --run-as tests: an unprivileged system
// user with a home of its own (nobody's, /nonexistent on Debian, would do
// for processes but not for installs).
type runAsUser struct {
	name     string
	uid, gid int
	home     string
}

// newRunAsUser creates the user (useradd, as on any Debian or Ubuntu CI
// machine) and removes it at the end of the test. It skips unless the
// tests run as root.
func newRunAsUser(t *testing.T) runAsUser {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("--run-as needs a root daemon: run the tests as root (CI does)")
	}
	if _, err := exec.LookPath("useradd"); err != nil {
		t.Skip("no useradd to create a test user")
	}
	base := openDir(t)
	u := runAsUser{name: fmt.Sprintf("sae2e%06d", rand.IntN(1_000_000)), home: filepath.Join(base, "home")}
	out, err := exec.Command("useradd", "--system", "--user-group", "--no-create-home", "--home-dir", u.home, "--shell", "/bin/sh", u.name).CombinedOutput()
	if err != nil {
		t.Skipf("useradd: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("userdel", u.name).Run() })
	for _, f := range []struct {
		flag string
		dst  *int
	}{{"-u", &u.uid}, {"-g", &u.gid}} {
		b, err := exec.Command("id", f.flag, u.name).Output()
		if err != nil {
			t.Fatal(err)
		}
		*f.dst, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if err := os.Mkdir(u.home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(u.home, u.uid, u.gid); err != nil {
		t.Fatal(err)
	}
	return u
}

// openDir is a fresh directory every user may traverse (t.TempDir's, and
// its parent, are 0700).
func openDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// copyExe copies an executable into dir (so a user other than root may
// run it: the build directory is 0700).
func copyExe(t *testing.T, src, dir string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

func ownerOf(t *testing.T, p string) int {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return int(st.Uid)
}

// uidOf reads the real uid of a running process.
func uidOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			n, _ := strconv.Atoi(strings.Fields(rest)[0])
			return n
		}
	}
	t.Fatalf("no Uid in /proc/%d/status", pid)
	return -1
}

// --run-as: processes and agents run as the user (uid, groups, HOME, cwd),
// cannot read the daemon's /proc, files the API writes are the user's,
// and an agent installed from a registry archive runs as the user.
func TestRunAs(t *testing.T) {
	u := newRunAsUser(t)
	bin := openDir(t)
	daemon := copyExe(t, harness.Binary, bin)
	// An operator agent reporting who it runs as, in its initialize result.
	whoami := `read -r line; printf '{"jsonrpc":"2.0","id":1,"result":{"uid":"%s","home":"%s","pwd":"%s"}}\n' "$(id -u)" "$HOME" "$(pwd)"; cat >/dev/null`
	agentsFile := filepath.Join(bin, "agents.json")
	doc, _ := json.Marshal(map[string]any{"agents": []map[string]any{{"id": "whoami", "command": "/bin/sh", "args": []string{"-c", whoami}}}})
	if err := os.WriteFile(agentsFile, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	reg := newACPRegistry(t, "")
	reg.files["shell-agent-linux.tar.gz"] = shellAgentTarGz(t)
	target := `{"archive":"` + reg.URL + `/files/shell-agent-linux.tar.gz","cmd":"./bin/shell-agent"}`
	entries := `{"id":"shell-agent","version":"0.9.0","distribution":{"binary":{"linux-x86_64":` + target + `,"linux-aarch64":` + target + `}}}`
	// An npm package too, where npm is at hand: npm then runs as the user.
	_, npmErr := exec.LookPath("npm")
	if npmErr == nil {
		entries += "," + npxEntry("codex-acp", copyExe(t, fixturePackage(t), bin))
	}
	reg.doc = `{"agents":[` + entries + `]}`
	d := harness.Start(t, harness.Options{Binary: daemon, Env: reg.env(), Args: []string{"--run-as", u.name, "--agents-file", agentsFile, "--log-level", "info"}})
	uid := strconv.Itoa(u.uid)

	t.Run("process", func(t *testing.T) {
		var r runResult
		script := `id -u; id -g; echo "$HOME"; pwd; cat /proc/` + strconv.Itoa(d.Cmd.Process.Pid) + `/environ >/dev/null && echo READ`
		if st, b := d.JSONDo("POST", "/v1/processes/run", map[string]any{"command": "sh", "args": []string{"-c", script}}, &r); st != 200 {
			t.Fatalf("run: %d %s", st, b)
		}
		want := fmt.Sprintf("%d\n%d\n%s\n%s\n", u.uid, u.gid, u.home, u.home)
		if r.Stdout != want || !strings.Contains(r.Stderr, "Permission denied") {
			t.Errorf("stdout %q (want %q), stderr %q: want the daemon's environ unreadable", r.Stdout, want, r.Stderr)
		}
		p := createProcess(t, d, map[string]any{"command": "sleep", "args": []string{"300"}, "tty": true})
		if got := uidOf(t, *p.PID); got != u.uid {
			t.Errorf("managed process runs as uid %d", got)
		}
		d.JSONDo("POST", "/v1/processes/"+p.ID+"/kill?waitMs=5000", nil, nil)
	})

	t.Run("agent", func(t *testing.T) {
		st, b := d.Post("/v1/acp/who?agent=whoami", initMsg)
		var m struct{ Result map[string]string }
		if st != 200 || json.Unmarshal(b, &m) != nil {
			t.Fatalf("initialize: %d %s", st, b)
		}
		if m.Result["uid"] != uid || m.Result["home"] != u.home || m.Result["pwd"] != u.home {
			t.Errorf("agent runs as %v, want uid %s in %s", m.Result, uid, u.home)
		}
		// The built-in mock too (this binary, run as the user).
		if st, b := d.Post("/v1/acp/m?agent=mock", initMsg); st != 200 {
			t.Fatalf("mock: %d %s", st, b)
		}
		if got := uidOf(t, d.Server("m").PID); got != u.uid {
			t.Errorf("mock runs as uid %d", got)
		}
	})

	t.Run("files", func(t *testing.T) {
		work := filepath.Join(u.home, "work")
		if st, _, b := d.Do("PUT", "/v1/fs/file?path="+q(work+"/a/new.txt"), []byte("x"), "Content-Type", "application/octet-stream"); st != 200 {
			t.Fatalf("PUT: %d %s", st, b)
		}
		if st, _, b := d.Do("POST", "/v1/fs/mkdir?path="+q(work+"/made"), nil); st != 200 {
			t.Fatalf("mkdir: %d %s", st, b)
		}
		if st, _, b := d.Do("POST", "/v1/fs/move", []byte(`{"from":`+jsonString(work+"/a/new.txt")+`,"to":`+jsonString(work+"/b/moved.txt")+`}`), "Content-Type", "application/json"); st != 200 {
			t.Fatalf("move: %d %s", st, b)
		}
		if st, _, b := d.Do("POST", "/v1/fs/upload-batch?path="+q(work+"/up"), tarball(t, [3]string{"d/f.txt", "y", ""}), "Content-Type", "application/x-tar"); st != 200 {
			t.Fatalf("upload-batch: %d %s", st, b)
		}
		if st, _, b := d.Do("PUT", "/v1/config/mcp?directory="+q(work+"/proj")+"&mcpName=m", []byte(`{"type":"local","command":["x"]}`), "Content-Type", "application/json"); st != 204 {
			t.Fatalf("config: %d %s", st, b)
		}
		for _, p := range []string{"a", "b", "b/moved.txt", "made", "up", "up/d", "up/d/f.txt", "proj/.sandbox-agent/config/mcp.json"} {
			if got := ownerOf(t, filepath.Join(work, p)); got != u.uid {
				t.Errorf("%s owned by %d, want %d", p, got, u.uid)
			}
		}
		// A write the user could not make is refused, not made as root.
		if st, _, _ := d.Do("PUT", "/v1/fs/file?path="+q(filepath.Join(bin, "root-only.txt")), []byte("x"), "Content-Type", "application/octet-stream"); st < 400 {
			t.Errorf("PUT into a root-owned directory: %d", st)
		}
		if _, err := os.Stat(filepath.Join(bin, "root-only.txt")); err == nil {
			t.Error("the file was written")
		}
	})

	t.Run("installed agent", func(t *testing.T) {
		st, _, b := d.Do(http.MethodPost, "/v1/agents/shell-agent/install", []byte("{}"), "Content-Type", "application/json")
		if st != 200 {
			t.Fatalf("install: %d %s", st, b)
		}
		launcher := filepath.Join(u.home, ".local/share/sandbox-agent/bin/agent_processes/shell-agent-acp")
		if got := ownerOf(t, launcher); got != u.uid {
			t.Errorf("launcher %s owned by %d", launcher, got)
		}
		if st, body := d.Post("/v1/acp/sh?agent=shell-agent", initialize); st != 200 || !strings.Contains(string(body), "shell-agent") {
			t.Fatalf("installed agent: %d %s", st, body)
		}
		if got := uidOf(t, d.Server("sh").PID); got != u.uid {
			t.Errorf("installed agent runs as uid %d", got)
		}
		if npmErr != nil {
			t.Log("no npm: the npm install as the user is not tested")
			return
		}
		if st, _, b := d.Do(http.MethodPost, "/v1/agents/codex/install", []byte("{}"), "Content-Type", "application/json"); st != 200 {
			t.Fatalf("npm install as the user: %d %s", st, b)
		}
		pkgs := filepath.Join(u.home, ".local/share/sandbox-agent/bin/packages/codex")
		_ = filepath.Walk(pkgs, func(p string, fi os.FileInfo, err error) error {
			if err == nil && ownerOf(t, p) != u.uid && p != pkgs {
				t.Errorf("%s owned by %d", p, ownerOf(t, p))
			}
			return nil
		})
		if st, body := d.Post("/v1/acp/npx?agent=codex", initialize); st != 200 || !strings.Contains(string(body), "fixture-agent") {
			t.Fatalf("npm-installed agent: %d %s", st, body)
		}
		if got := uidOf(t, d.Server("npx").PID); got != u.uid {
			t.Errorf("npm-installed agent runs as uid %d", got)
		}
	})
}

// --run-as is refused clearly: for root, for an unknown user, and when the
// daemon is not root.
func TestRunAsRefused(t *testing.T) {
	u := newRunAsUser(t)
	bin := copyExe(t, harness.Binary, openDir(t))
	run := func(cred *syscall.Credential, args ...string) (int, string) {
		cmd := exec.Command(bin, append([]string{"server", "--port", "0"}, args...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Env = append(os.Environ(), "HOME="+u.home)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, string(out)
	}
	for _, tc := range []struct {
		name string
		cred *syscall.Credential
		args []string
		want string
	}{
		{"root", nil, []string{"--run-as", "root"}, "names root"},
		{"uid 0", nil, []string{"--run-as", "0"}, "names root"},
		{"unknown", nil, []string{"--run-as", "no-such-user-sae2e"}, "no such user"},
		{"not root", &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid)}, []string{"--run-as", u.name}, "needs the daemon to run as root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := run(tc.cred, tc.args...)
			if code != 2 || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, %q; want 2 and %q", code, firstLines(out), tc.want)
			}
		})
	}
}

func firstLines(s string) string {
	lines := strings.SplitN(s, "\n", 3)
	return strings.Join(lines[:min(2, len(lines))], "\n")
}
