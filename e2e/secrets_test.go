package e2e

// A secret is never data (issue 20): the daemon's token file, its policy
// modules and their configuration, its agents file and its own /proc are
// refused by every route that takes a path, under every name that leads
// there, whatever a policy grants; the token given in the environment is
// gone from /proc/<daemon>/environ; a variable holding a token reaches no
// agent or process; reloads cannot be turned against the daemon.

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// secretDaemon is the setup of docs/auth.md: the daemon started in home with
// --token-file tokens (relative, as docs/auth.md writes it) and the readonly
// example policy with its configuration next to it, plus an agents file.
// The admin token is admin-tok; the viewer's is viewer-tok.
func secretDaemon(t *testing.T, extra ...string) *harness.Daemon {
	t.Helper()
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "tokens"), "# admin\nadmin-tok\n")
	writeFile(t, filepath.Join(home, "readonly.json"), `{"tokens": {"viewer-tok": "viewer"}}`)
	writeFile(t, filepath.Join(home, "agents.json"), `{"agents":[{"id":"keyed","command":"/bin/true","env":{"API_KEY":"agent-key-1"}}]}`)
	args := append([]string{"--token-file", "tokens", "--agents-file", "agents.json",
		"--policy", policyWasm(t, "readonly") + ",config=readonly.json,timeout=2s"}, extra...)
	return harness.Start(t, harness.Options{Home: home, Args: args, Env: policyCacheEnv()})
}

// denied checks a 403 permission_denied naming the secret, and that no
// answer carries a secret's content.
func denied(t *testing.T, d *harness.Daemon, token, method, path string, body []byte, headers ...string) {
	t.Helper()
	st, h, b := d.Do(method, path, body, append(headers, "Authorization", "Bearer "+token)...)
	if st != 403 || !strings.Contains(string(b), "is one of the daemon's own secrets (") {
		t.Errorf("%s %s as %s: %d %.300s", method, path, token, st, b)
	}
	if h.Get("Content-Type") != "application/problem+json" {
		t.Errorf("%s %s: Content-Type %q", method, path, h.Get("Content-Type"))
	}
	leaked(t, method+" "+path, b)
}

// leaked fails when b holds a secret.
func leaked(t *testing.T, what string, b []byte) {
	t.Helper()
	for _, s := range []string{"admin-tok", "viewer-tok", "agent-key-1", "sandbox_agent_secret_env"} {
		if bytes.Contains(b, []byte(s)) {
			t.Errorf("%s: the answer holds %q: %.300s", what, s, b)
		}
	}
}

// daemonThreads lists the daemon's thread ids other than its pid.
func daemonThreads(t *testing.T, pid int) []string {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var tids []string
	for _, e := range ents {
		if e.Name() != strconv.Itoa(pid) {
			tids = append(tids, e.Name())
		}
	}
	if len(tids) == 0 {
		t.Fatal("the daemon has one thread")
	}
	return tids
}

// TestSecretsNeverData is the reproduction and its variants: the
// viewer of that setup, then the admin (a grant of everything),
// ask for the token file and the daemon's /proc under every name.
func TestSecretsNeverData(t *testing.T) {
	t.Parallel()
	d := secretDaemon(t)
	home, pid := d.Home, d.Cmd.Process.Pid
	tokens := filepath.Join(home, "tokens")
	// Other names of the token file, made by a local user.
	if err := os.Link(tokens, filepath.Join(home, "hard")); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"sym": "tokens", "abs": tokens, "chain": "sym", "envlink": fmt.Sprintf("/proc/%d/environ", pid), "fdlink": "/dev/fd"} {
		if err := os.Symlink(target, filepath.Join(home, name)); err != nil {
			t.Fatal(err)
		}
	}

	// The listing the attacker starts from leaves the secrets out.
	for _, token := range []string{"viewer-tok", "admin-tok"} {
		st, _, b := d.Do("GET", "/v1/fs/entries?path=.", nil, "Authorization", "Bearer "+token)
		if st != 200 {
			t.Fatalf("list home: %d %s", st, b)
		}
		for _, name := range []string{`"tokens"`, `"hard"`, `"sym"`, `"abs"`, `"chain"`, `"readonly.json"`, `"agents.json"`, `"envlink"`, `"fdlink"`} {
			if bytes.Contains(b, []byte(`"name":`+name)) {
				t.Errorf("home listing shows %s: %s", name, b)
			}
		}
		st, _, b = d.Do("GET", "/v1/fs/entries?path=/proc", nil, "Authorization", "Bearer "+token)
		if st != 200 {
			t.Fatalf("list /proc: %d %.200s", st, b)
		}
		for _, name := range []string{strconv.Itoa(pid), "self", "thread-self"} {
			if bytes.Contains(b, []byte(`"name":"`+name+`"`)) {
				t.Errorf("/proc listing shows %s", name)
			}
		}
	}

	tid := daemonThreads(t, pid)[0]
	paths := []string{
		"tokens", tokens, "hard", "sym", "abs", "chain",
		"readonly.json", policyWasm(t, "readonly"), "agents.json",
		"/proc/self/environ", "/proc/self/cmdline", "/proc/self/mem", "/proc/self/maps", "/proc/self/status",
		fmt.Sprintf("/proc/%d/environ", pid), fmt.Sprintf("/proc/%d/cmdline", pid), fmt.Sprintf("/proc/%d/fd/0", pid),
		fmt.Sprintf("/proc/%d/task/%s/environ", pid, tid),
		"/proc/" + tid + "/environ", "/proc/" + tid + "/cmdline", // a thread id, not listed, still resolves
		"/proc/thread-self/environ", "/proc/net/tcp",
		"/dev/fd/0", "/dev/fd/1", "/dev/fd/3", "/dev/stdin", "/dev/stderr",
		"envlink", "fdlink/2",
	}
	for _, token := range []string{"viewer-tok", "admin-tok"} {
		for _, p := range paths {
			denied(t, d, token, "GET", "/v1/fs/file?path="+q(p), nil)
			denied(t, d, token, "GET", "/v1/fs/file?path="+q(p), nil, "Range", "bytes=0-3")
			denied(t, d, token, "GET", "/v1/fs/stat?path="+q(p), nil)
		}
		for _, p := range []string{"/proc/self", fmt.Sprintf("/proc/%d", pid), "/proc/self/fd", "/dev/fd", "/proc/" + tid, "fdlink"} {
			denied(t, d, token, "GET", "/v1/fs/entries?path="+q(p), nil)
		}
	}

	// A rename keeps the file (and its inode) in use until the next
	// reload; the file now at the configured path is read by the next
	// SIGHUP: both are protected, without any reload.
	if err := os.Rename(tokens, filepath.Join(home, "tokens.old")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, tokens, "next-tok\n")
	for _, p := range []string{"tokens.old", "tokens", "hard"} {
		denied(t, d, "viewer-tok", "GET", "/v1/fs/file?path="+q(p), nil)
	}
	if st, _, b := d.Do("GET", "/v1/fs/file?path=/proc/cpuinfo&x=1", nil, "Authorization", "Bearer viewer-tok"); st == 403 {
		t.Errorf("/proc/cpuinfo is not the daemon's: %d %s", st, b)
	}
	if st, _, _ := d.Do("GET", "/v1/health", nil, "Authorization", "Bearer admin-tok"); st != 200 {
		t.Errorf("the admin token stopped working: %d", st)
	}
}

// TestSecretsUnchangeable: the admin, granted everything, cannot write,
// move, delete, replace by upload, or configure in a secret, nor run a
// process in the daemon's /proc; the token file is as it was.
func TestSecretsUnchangeable(t *testing.T) {
	t.Parallel()
	d := secretDaemon(t)
	home, pid := d.Home, d.Cmd.Process.Pid
	tokens := filepath.Join(home, "tokens")
	if err := os.Link(tokens, filepath.Join(home, "hard")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(home, "notes"), "n")
	const admin = "admin-tok"
	json := []string{"Content-Type", "application/json"}
	for _, p := range []string{"tokens", "hard", "/proc/self/environ", fmt.Sprintf("/proc/%d/new", pid), "/dev/fd/1", "/dev/stdin", "/dev/stderr"} {
		denied(t, d, admin, "PUT", "/v1/fs/file?path="+q(p), []byte("mallory-tok\n"))
	}
	denied(t, d, admin, "DELETE", "/v1/fs/entry?path=tokens", nil)
	denied(t, d, admin, "DELETE", "/v1/fs/entry?path=hard", nil)
	denied(t, d, admin, "DELETE", "/v1/fs/entry?path="+q(home)+"&recursive=true", nil)
	denied(t, d, admin, "POST", "/v1/fs/mkdir?path="+q(fmt.Sprintf("/proc/%d/x", pid)), nil)
	denied(t, d, admin, "POST", "/v1/fs/move", []byte(`{"from":"tokens","to":"stolen"}`), json...)
	denied(t, d, admin, "POST", "/v1/fs/move", []byte(`{"from":"hard","to":"stolen"}`), json...)
	denied(t, d, admin, "POST", "/v1/fs/move", []byte(`{"from":"notes","to":"tokens","overwrite":true}`), json...)
	denied(t, d, admin, "POST", "/v1/fs/move", []byte(`{"from":"/proc/self/environ","to":"stolen"}`), json...)
	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	for _, name := range []string{"fine.txt", "tokens"} {
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: 12, Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte("mallory-tok\n"))
	}
	_ = tw.Close()
	denied(t, d, admin, "POST", "/v1/fs/upload-batch?path=.", archive.Bytes(), "Content-Type", "application/x-tar")
	denied(t, d, admin, "POST", "/v1/fs/upload-batch?path=/proc/self", archive.Bytes(), "Content-Type", "application/x-tar")
	for _, dir := range []string{"/proc/self", fmt.Sprintf("/proc/%d/fd", pid), "/dev/fd"} {
		denied(t, d, admin, "GET", "/v1/config/mcp?directory="+q(dir)+"&mcpName=m", nil)
		denied(t, d, admin, "PUT", "/v1/config/skills?directory="+q(dir)+"&skillName=s", []byte(`{"sources":[{"type":"github","source":"a/b"}]}`), json...)
		denied(t, d, admin, "DELETE", "/v1/config/mcp?directory="+q(dir)+"&mcpName=m", nil)
	}
	for _, body := range []string{
		`{"command":"cat","args":["environ"],"cwd":"/proc/self"}`,
		fmt.Sprintf(`{"command":"ls","cwd":"/proc/%d/fd"}`, pid),
		`{"command":"ls","cwd":"/dev/fd"}`,
		`{"command":"/proc/self/exe","args":["--version"]}`,
	} {
		denied(t, d, admin, "POST", "/v1/processes/run", []byte(body), json...)
		denied(t, d, admin, "POST", "/v1/processes", []byte(body), json...)
	}

	if b, err := os.ReadFile(tokens); err != nil || string(b) != "# admin\nadmin-tok\n" {
		t.Errorf("the token file is now %q, %v", b, err)
	}
	for _, p := range []string{"stolen", "fine.txt"} {
		if _, err := os.Lstat(filepath.Join(home, p)); err == nil {
			t.Errorf("%s exists", p)
		}
	}
	noStage(t, home)
	// What is not a secret is untouched by all this.
	if st, _, b := d.Do("PUT", "/v1/fs/file?path=notes", []byte("ok"), "Authorization", "Bearer "+admin); st != 200 {
		t.Errorf("write notes: %d %s", st, b)
	}
}

// TestSecretsEnvironHidden: SANDBOX_AGENT_TOKEN is gone from the
// environment the kernel shows for the daemon's pid (the one the harness
// started: the daemon re-executed itself, it did not fork), also when a
// process of the API reads it, and the token still authenticates.
func TestSecretsEnvironHidden(t *testing.T) {
	t.Parallel()
	const tok = "sandbox_agent_secret_env-7f3a"
	d := harness.Start(t, harness.Options{Env: []string{"SANDBOX_AGENT_TOKEN=" + tok, "KEEP_ME=1"}})
	pid := d.Cmd.Process.Pid
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(environ, []byte(tok)) || bytes.Contains(environ, []byte("SANDBOX_AGENT_TOKEN=")) {
		t.Errorf("/proc/%d/environ holds the token:\n%s", pid, bytes.ReplaceAll(environ, []byte{0}, []byte{'\n'}))
	}
	if !bytes.Contains(environ, []byte("KEEP_ME=1")) {
		t.Errorf("/proc/%d/environ lost the rest of the environment", pid)
	}
	if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); bytes.Contains(cmdline, []byte(tok)) {
		t.Errorf("the token is on the command line: %q", cmdline)
	}
	if st, _, _ := d.Do("GET", "/v1/health", nil); st != 401 {
		t.Errorf("without the token: %d", st)
	}
	// A process of the API reads the daemon's environ, as the did
	// with $PPID; the pid comes from the harness, since a process may have
	// another parent (a supervisor).
	script := fmt.Sprintf(`tr '\0' '\n' </proc/%d/environ`, pid)
	body, _ := json.Marshal(map[string]any{"command": "sh", "args": []string{"-c", script}})
	st, _, b := d.Do("POST", "/v1/processes/run", body, "Authorization", "Bearer "+tok, "Content-Type", "application/json")
	if st != 200 {
		t.Fatalf("run: %d %s", st, b)
	}
	var out runResult
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.Stdout, tok) || !strings.Contains(out.Stdout, "KEEP_ME=1") {
		t.Errorf("a process reads /proc/%d/environ:\n%s", pid, out.Stdout)
	}
}

// TestSecretsCmdlineHidden: a token given as --token (the way the
// reference's docs start a server) is gone from the command line the
// kernel shows for the daemon's pid, which every local user and every
// agent can read, --run-as or not; the flags around it stay, and the
// token still authenticates, as a flag's (no --no-token override).
func TestSecretsCmdlineHidden(t *testing.T) {
	t.Parallel()
	const tok = "sandbox_agent_secret_flag-4b1e"
	for name, args := range map[string][]string{
		"long":  {"--token", tok, "--max-instances", "7"},
		"equal": {"--token=" + tok, "--max-instances", "7"},
		"group": {"-nt", tok, "--max-instances", "7"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := harness.Start(t, harness.Options{Args: args})
			pid := d.Cmd.Process.Pid
			cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(cmdline, []byte(tok)) {
				t.Errorf("the token is on the command line: %q", cmdline)
			}
			if !bytes.Contains(cmdline, []byte("--max-instances\x007")) {
				t.Errorf("the other flags were lost: %q", cmdline)
			}
			if st, _, _ := d.Do("GET", "/v1/health", nil); st != 401 {
				t.Errorf("without the token: %d", st)
			}
			// A process of the API (as an agent would) reads it too.
			script := fmt.Sprintf(`tr '\0' ' ' </proc/%d/cmdline`, pid)
			body, _ := json.Marshal(map[string]any{"command": "sh", "args": []string{"-c", script}})
			st, _, b := d.Do("POST", "/v1/processes/run", body, "Authorization", "Bearer "+tok, "Content-Type", "application/json")
			if st != 200 {
				t.Fatalf("run with the token: %d %s", st, b)
			}
			var out runResult
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out.Stdout, tok) || !strings.Contains(out.Stdout, "server") {
				t.Errorf("a process reads /proc/%d/cmdline: %q", pid, out.Stdout)
			}
		})
	}
}

// TestSecretsEnvFilter: no variable holding the token reaches an agent
// or a process: not one of the daemon's own (its value the token, or
// "Bearer <token>"), not one of the agents file, not one a client asks
// for.
func TestSecretsEnvFilter(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	const tok = "sandbox_agent_secret_env-91c2"
	dump := `env > "$HOME/agent-env"; exec ` + harness.Binary + ` mock-agent-process`
	doc := fmt.Sprintf(`{"agents":[{"id":"envdump","command":"/bin/sh","args":["-c",%q],"env":{"FROM_FILE":"x%sx","OK_FILE":"1"}}]}`, dump, tok)
	writeFile(t, filepath.Join(home, "agents.json"), doc)
	d := harness.Start(t, harness.Options{Home: home, Args: []string{"--agents-file", "agents.json"},
		Env: []string{"SANDBOX_AGENT_TOKEN=" + tok, "COPY_OF_TOKEN=" + tok, "AUTH_HEADER=Bearer " + tok, "KEEP_ME=1"}})
	body, _ := json.Marshal(map[string]any{"command": "env", "env": map[string]string{"MINE": "url?t=" + tok, "OK_MINE": "1"}})
	st, _, b := d.Do("POST", "/v1/processes/run", body, "Authorization", "Bearer "+tok, "Content-Type", "application/json")
	if st != 200 {
		t.Fatalf("run: %d %s", st, b)
	}
	var out runResult
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.Stdout, tok) || !strings.Contains(out.Stdout, "KEEP_ME=1") || !strings.Contains(out.Stdout, "OK_MINE=1") {
		t.Errorf("a process's environment:\n%s", out.Stdout)
	}
	if st, msg := acpPost(d, tok, "/v1/acp/e?agent=envdump", policyInit); st != 200 {
		t.Fatalf("start: %d %s", st, msg)
	}
	agentEnv, err := os.ReadFile(filepath.Join(home, "agent-env"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(agentEnv, []byte(tok)) || bytes.Contains(agentEnv, []byte("SANDBOX_AGENT_TOKEN")) ||
		!bytes.Contains(agentEnv, []byte("KEEP_ME=1")) || !bytes.Contains(agentEnv, []byte("OK_FILE=1")) {
		t.Errorf("the agent's environment:\n%s", agentEnv)
	}
}

// TestSecretsEnvFollowsReload: the environment filter uses the tokens of
// the moment a process starts: a variable that holds a token only after a
// reload stops being passed on then.
func TestSecretsEnvFollowsReload(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "tokens"), "first-tok\n")
	d := harness.Start(t, harness.Options{Home: home, Args: []string{"--token-file", "tokens"}, Env: []string{"LATER=xx-second-tok-xx"}})
	envOf := func(token string) string {
		t.Helper()
		st, _, b := d.Do("POST", "/v1/processes/run", []byte(`{"command":"env"}`), "Authorization", "Bearer "+token, "Content-Type", "application/json")
		if st != 200 {
			t.Fatalf("run: %d %s", st, b)
		}
		var out runResult
		_ = json.Unmarshal(b, &out)
		return out.Stdout
	}
	if env := envOf("first-tok"); !strings.Contains(env, "LATER=xx-second-tok-xx") {
		t.Fatalf("before the reload, LATER is not a token:\n%s", env)
	}
	writeFile(t, filepath.Join(home, "tokens"), "second-tok\n")
	if err := d.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, d, "token file reloaded")
	if env := envOf("second-tok"); strings.Contains(env, "second-tok") {
		t.Errorf("after the reload a process still gets the token:\n%s", env)
	}
}

// TestReloadHostile: token files and policy configs replaced by a FIFO
// that never gets a writer, a link to /dev/zero, a file past the cap: each
// reload fails at once, keeps the tokens and policies in use, says why and
// counts in /metrics; memory stays flat; a good file later reloads; and
// SIGTERM during all this exits within --stop-grace plus a bound.
func TestReloadHostile(t *testing.T) {
	t.Parallel()
	d := secretDaemon(t, "--stop-grace", "1s", "--metrics-public")
	home := d.Home
	tokens, cfg := filepath.Join(home, "tokens"), filepath.Join(home, "readonly.json")
	replace := func(p, how string) {
		t.Helper()
		_ = os.Remove(p)
		var err error
		switch how {
		case "fifo":
			err = syscall.Mkfifo(p, 0o600)
		case "zero":
			err = os.Symlink("/dev/zero", p)
		case "big":
			err = os.WriteFile(p, bytes.Repeat([]byte("a"), 5<<20), 0o600)
		default:
			err = os.WriteFile(p, []byte(how), 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	failed := func(what string) float64 {
		return d.Metrics()[`sandbox_agent_reloads_total{what="`+what+`",result="failed"}`]
	}
	ok := func(what string) float64 {
		return d.Metrics()[`sandbox_agent_reloads_total{what="`+what+`",result="ok"}`]
	}
	hup := func() {
		t.Helper()
		if err := d.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	waitCount := func(what string, get func(string) float64, want float64) {
		t.Helper()
		if !harness.WaitUntil(10*time.Second, func() bool { return get(what) >= want }) {
			t.Fatalf("reloads of %s: %v, want %v\n%s", what, get(what), want, harness.Tail(d.Logs(), 20))
		}
	}

	n := 0.0
	for _, how := range []string{"fifo", "zero", "big"} {
		replace(tokens, how)
		replace(cfg, how)
		hup()
		n++
		waitCount("tokens", failed, n)
		waitCount("policies", failed, n)
		// The tokens and the policy in use still decide.
		check(t, d, []policyCheck{
			{name: how + ": admin", token: "admin-tok", method: "GET", path: "/v1/health", status: 200},
			{name: how + ": viewer reads", token: "viewer-tok", method: "GET", path: "/v1/health", status: 200},
			{name: how + ": viewer may not write", token: "viewer-tok", method: "PUT", path: "/v1/fs/file?path=x", body: "x", status: 403},
		})
	}
	for _, want := range []string{"not a regular file (a FIFO)", "not a regular file (a character device)", "file too large"} {
		if !strings.Contains(d.Logs(), want) {
			t.Errorf("the log does not say %q", want)
		}
	}
	rss := peakRSS(t, d)
	t.Logf("peak RSS after the hostile reloads: %d KiB", rss)
	if rss > 256<<10 {
		t.Errorf("peak RSS %d KiB: a reload read what it should have refused", rss)
	}

	// A good file reloads: the old admin token is revoked, the new one
	// and the new viewer work.
	replace(tokens, "new-admin\n")
	replace(cfg, `{"tokens": {"new-viewer": "viewer"}}`)
	hup()
	waitCount("tokens", ok, 1)
	waitCount("policies", ok, 1)
	check(t, d, []policyCheck{
		{name: "revoked", token: "admin-tok", method: "GET", path: "/v1/health", status: 401},
		{name: "new admin", token: "new-admin", method: "GET", path: "/v1/health", status: 200},
		{name: "new viewer", token: "new-viewer", method: "GET", path: "/v1/health", status: 200},
		{name: "old viewer", token: "viewer-tok", method: "GET", path: "/v1/health", status: 401},
	})

	// SIGTERM while the files are FIFOs again and a reload was asked for.
	replace(tokens, "fifo")
	replace(cfg, "fifo")
	hup()
	start := time.Now()
	if err := d.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.Done():
		t.Logf("exited %v after SIGTERM", time.Since(start))
	case <-time.After(1*time.Second + 5*time.Second):
		t.Fatalf("still running %v after SIGTERM (--stop-grace 1s)", time.Since(start))
	}
}

// TestSecretsPolicyCache: the policy compilation cache holds machine code
// the daemon maps at its next start, checked by nothing but a CRC; a
// client able to write there ran its code in the daemon, past every
// policy. It is protected as the token file is: no write, mkdir, move,
// delete, upload-batch or config write reaches it, through a link
// neither, and a listing of its parent leaves it out.
func TestSecretsPolicyCache(t *testing.T) {
	t.Parallel()
	cache := filepath.Join(t.TempDir(), "xdg", "wasm")
	d := secretDaemon(t, "--policy-cache", cache)
	var compiled string // one file the daemon wrote in the cache
	_ = filepath.WalkDir(cache, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			compiled = p
		}
		return nil
	})
	if compiled == "" {
		t.Fatal("the daemon cached nothing")
	}
	before, err := os.ReadFile(compiled)
	if err != nil {
		t.Fatal(err)
	}
	parent := filepath.Dir(cache)
	link := filepath.Join(d.Home, "cachelink")
	if err := os.Symlink(cache, link); err != nil {
		t.Fatal(err)
	}
	json := []string{"Content-Type", "application/json"}
	tarBody := tarOf(t, dirEntry("wasm/"), tarHeader{h: tar.Header{Name: "wasm/planted", Typeflag: tar.TypeReg}, body: "code"})
	for _, c := range []struct {
		method, path string
		body         []byte
		headers      []string
	}{
		{"PUT", "/v1/fs/file?path=" + q(compiled), []byte("code"), nil},
		{"PUT", "/v1/fs/file?path=" + q(cache+"/new/planted"), []byte("code"), nil},
		{"PUT", "/v1/fs/file?path=" + q(link+"/planted"), []byte("code"), nil},
		{"POST", "/v1/fs/mkdir?path=" + q(cache+"/d"), nil, nil},
		{"DELETE", "/v1/fs/entry?path=" + q(parent) + "&recursive=true", nil, nil},
		{"POST", "/v1/fs/move", []byte(`{"from":` + strconv.Quote(parent) + `,"to":` + strconv.Quote(parent+"-old") + `}`), json},
		{"POST", "/v1/fs/upload-batch?path=" + q(parent), tarBody, []string{"Content-Type", "application/x-tar"}},
		{"PUT", "/v1/config/mcp?directory=" + q(cache) + "&mcpName=m", []byte(`{"type":"local","command":"c"}`), json},
		{"GET", "/v1/fs/file?path=" + q(compiled), nil, nil},
	} {
		denied(t, d, "admin-tok", c.method, c.path, c.body, c.headers...)
	}
	if after, err := os.ReadFile(compiled); err != nil || !bytes.Equal(after, before) {
		t.Fatalf("the compiled module changed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cache, "planted")); err == nil {
		t.Fatal("upload-batch planted a file in the cache")
	}
	st, _, b := d.Do("GET", "/v1/fs/entries?path="+q(parent), nil, "Authorization", "Bearer admin-tok")
	if st != 200 || strings.Contains(string(b), `"wasm"`) {
		t.Fatalf("listing of the cache's parent: %d %s", st, b)
	}
}
