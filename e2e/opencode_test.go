package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// OpenCode's clients against /opencode: its TypeScript SDK (1.2.24, the
// version the reference's own tests pin, and the newest), its CLI (one
// 1.2 release and the newest) in "run --attach" and as the TUI, each
// pinned in e2e/package.json. The SDK flows run against the reference
// binary too, in the same test, and every difference in shape from native
// OpenCode (e2e/js/opencode-shapes.mjs) is named here.

// openCodeDaemon starts the daemon with the operator agent "test": the
// scripted ACP agent of e2e/testagent (-acp, with session/load over a
// state directory), for tool calls with input and output, questions and
// session/load, which the mock does not do.
func openCodeDaemon(t *testing.T, o harness.Options) *harness.Daemon {
	t.Helper()
	if o.Home == "" {
		o.Home = t.TempDir()
	}
	// In the daemon's home, so a restarted daemon's agent finds the
	// sessions the first one's created.
	state := filepath.Join(o.Home, "testagent")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "agents.json")
	doc, _ := json.Marshal(map[string]any{"agents": []any{map[string]any{"id": "test", "command": harness.TestAgent, "args": []string{"-acp", state}}}})
	if err := os.WriteFile(f, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	o.Args = append([]string{"--agents-file", f}, o.Args...)
	return harness.Start(t, o)
}

// referenceDaemon runs the reference server (npm
// @sandbox-agent/cli-linux-x64@0.4.2, installed with e2e's packages) on a
// free loopback port, in a home of its own.
func referenceDaemon(t *testing.T) string {
	t.Helper()
	return referenceDaemonIn(t, t.TempDir())
}

// referenceDaemonIn is referenceDaemon in the home given, with env added
// to its environment.
func referenceDaemonIn(t *testing.T, home string, env ...string) string {
	t.Helper()
	requireNodeModules(t)
	bin, err := filepath.Abs("node_modules/@sandbox-agent/cli-linux-x64/bin/sandbox-agent")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the reference binary is not installed (%v): run npm ci in e2e/", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	cmd := exec.Command(bin, "server", "--no-telemetry", "-H", "127.0.0.1", "-p", port)
	cmd.Dir = home
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, ".local", "share"), "SANDBOX_AGENT_LOG_STDOUT=1")
	cmd.Env = append(cmd.Env, env...)
	var logs harness.LockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		// The reference hangs on SIGTERM while an agent lives (a known
		// defect of 0.4.2): its whole group is killed.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("reference logs:\n%s", harness.Tail(logs.String(), 60))
		}
	})
	url := "http://127.0.0.1:" + port
	if !harness.WaitUntil(20*time.Second, func() bool {
		resp, err := http.Get(url + "/v1/health")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	}) {
		t.Fatalf("the reference did not start:\n%s", logs.String())
	}
	return url
}

// sdkResult is what e2e/js/opencode-sdk.mjs reports.
type sdkResult struct {
	Flows map[string]map[string]any `json:"flows"`
	Diffs []string                  `json:"diffs"`
}

func runOpenCodeSDK(t *testing.T, base, sdk, api, agent string, env ...string) sdkResult {
	t.Helper()
	out := runNode(t, "opencode-sdk.mjs", 3*time.Minute, append([]string{"BASE_URL=" + base, "SDK=" + sdk, "API=" + api, "AGENT=" + agent}, env...)...)
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			var r sdkResult
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	t.Fatalf("no RESULT line:\n%s", out)
	return sdkResult{}
}

func flowOK(t *testing.T, r sdkResult, name string) map[string]any {
	t.Helper()
	f := r.Flows[name]
	if f == nil || f["ok"] != true {
		t.Errorf("flow %s: %v", name, f)
		return map[string]any{}
	}
	return f
}

// referenceShapeDiffs are how the reference 0.4.2's answers differ from
// native OpenCode's (measured with this test): its models lack the Model
// fields of /config/providers, its sessions and user messages carry keys
// native ones do not, its part events carry messageID.
var referenceShapeDiffs = []string{
	"event:message.part.updated: extra messageID",
	"model: missing api.id", "model: missing api.npm", "model: missing api.url",
	"model: missing capabilities.attachment", "model: missing capabilities.input", "model: missing capabilities.output",
	"model: missing capabilities.reasoning", "model: missing capabilities.temperature", "model: missing capabilities.toolcall",
	"model: missing cost.cache.read", "model: missing cost.cache.write", "model: missing cost.input", "model: missing cost.output",
	"model: missing headers", "model: missing providerID", "model: missing status",
	"session: extra agent", "session: extra model", "session: extra providerID",
	"userMessage: extra time.completed",
}

// TestOpenCodeSDK drives /opencode with @opencode-ai/sdk: create, a
// prompt (async) and its events in order, the message list, a tool call
// through its states, a permission answered, a question answered (the
// newer API), abort, providers; on this daemon and on the reference.
func TestOpenCodeSDK(t *testing.T) {
	requireNodeModules(t)
	ours := openCodeDaemon(t, harness.Options{Args: []string{"--token", "s3cret"}})
	ref := referenceDaemon(t)
	for _, c := range []struct{ sdk, api string }{{"1.2", "v1"}, {"1.2", "v2"}, {"latest", "v2"}} {
		t.Run("ours/sdk-"+c.sdk+"/"+c.api, func(t *testing.T) {
			r := runOpenCodeSDK(t, ours.URL, c.sdk, c.api, "test", "TOKEN=s3cret", "PERMISSION_AGENT=test")
			if len(r.Diffs) > 0 {
				t.Errorf("shapes differ from native OpenCode's: %v", r.Diffs)
			}
			if p := flowOK(t, r, "providers"); !slices.Contains(anyStrings(p["providers"]), "mock") {
				t.Errorf("providers %v", p)
			}
			flowOK(t, r, "create")
			p := flowOK(t, r, "prompt")
			if p["reply"] != "mock: hello" || p["deltas"] != "mock: hello" || p["final"] != "mock: hello" || p["finalHasEnd"] != true {
				t.Errorf("prompt: %v (the reply streams with delta, is never doubled, and ends with time.end)", p)
			}
			wantOrder := []string{"session.created", "session.updated", "message.updated", "message.part.updated", "session.updated", "session.status",
				"message.updated", "message.part.updated", "message.part.updated", "message.part.updated", "message.part.updated", "message.updated",
				"session.status", "session.idle"}
			if got := anyStrings(p["order"]); !slices.Equal(got, wantOrder) {
				t.Errorf("events\n got %v\nwant %v", got, wantOrder)
			}
			tool := flowOK(t, r, "tool")
			if fmt.Sprint(tool["states"]) != "[pending running completed]" || fmt.Sprint(tool["names"]) != "[bash]" ||
				fmt.Sprint(tool["inputs"]) != `[{"command":"echo hi"}]` || tool["output"] != "hi" {
				t.Errorf("tool: %v", tool)
			}
			if perm := flowOK(t, r, "permission"); perm["reply"] != "permission: selected yes" {
				t.Errorf("permission: %v", perm)
			}
			if c.api == "v2" {
				if q := flowOK(t, r, "question"); q["reply"] != `answer: {"color":"green"}` || q["listed"] != float64(1) {
					t.Errorf("question: %v", q)
				}
			}
			if ab := flowOK(t, r, "abort"); ab["error"] != "MessageAbortedError" {
				t.Errorf("abort: %v", ab)
			}
		})
		t.Run("reference/sdk-"+c.sdk+"/"+c.api, func(t *testing.T) {
			r := runOpenCodeSDK(t, ref, c.sdk, c.api, "mock")
			t.Logf("reference flows: %v", r.Flows)
			if d := r.Diffs; !slices.Equal(sorted(d), sorted(referenceShapeDiffs)) {
				t.Errorf("the reference's differences from native OpenCode changed:\n got %q\nwant %q", sorted(d), sorted(referenceShapeDiffs))
			}
			// What the reference does not do, and this daemon does: its text
			// parts carry no delta and never end (time.end), which is what
			// OpenCode's CLI waits for before it prints a reply; its tool
			// parts skip pending and running.
			p := flowOK(t, r, "prompt")
			if p["deltas"] != "" || p["finalHasEnd"] != false {
				t.Errorf("reference prompt: %v", p)
			}
			if tool := flowOK(t, r, "tool"); fmt.Sprint(tool["states"]) != "[completed]" {
				t.Errorf("reference tool: %v", tool)
			}
		})
	}
}

func anyStrings(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, x := range l {
			out = append(out, fmt.Sprint(x))
		}
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// openCodeCLI is the path of a pinned OpenCode CLI ("1.2" or "latest").
func openCodeCLI(t *testing.T, which string) string {
	t.Helper()
	requireNodeModules(t)
	p, err := filepath.Abs(filepath.Join("node_modules", "opencode-cli-"+which, "bin", "opencode"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the OpenCode CLI %s is not installed (%v): it is an optional npm dependency for linux-x64 (run npm ci in e2e/)", which, err)
	}
	return p
}

// openCodeEnv isolates the OpenCode CLI: its own home, config and state,
// and nothing fetched from the internet (models.dev, updates, sharing).
func openCodeEnv(t *testing.T) []string {
	home := t.TempDir()
	return append(os.Environ(),
		"HOME="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_DATA_HOME="+filepath.Join(home, ".local", "share"),
		"XDG_CACHE_HOME="+filepath.Join(home, ".cache"),
		"XDG_STATE_HOME="+filepath.Join(home, ".local", "state"),
		"OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_SHARE=1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
	)
}

// runOpenCode runs "opencode run --attach" and returns its stdout.
func runOpenCode(t *testing.T, bin, base string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"run", "--attach", base + "/opencode"}, args...)...)
	cmd.Env = openCodeEnv(t)
	cmd.Dir = t.TempDir()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	t.Logf("opencode %v: stdout:\n%s\nstderr:\n%s", args, out.String(), harness.Tail(errb.String(), 20))
	return out.String(), err
}

// textEvents are the texts "opencode run --format json" printed.
func textEvents(out string) []string {
	var texts []string
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			Type string `json:"type"`
			Part struct {
				Text string `json:"text"`
			} `json:"part"`
		}
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Type == "text" {
			texts = append(texts, e.Part.Text)
		}
	}
	return texts
}

// TestOpenCodeCLIRun: "opencode run --attach URL/opencode" prints the
// mock's reply, in JSON and as text, with and without a password, with a
// 1.2 release and the newest. The reference prints no reply (its text
// parts never carry time.end, which the CLI prints on).
func TestOpenCodeCLIRun(t *testing.T) {
	ours := openCodeDaemon(t, harness.Options{})
	locked := openCodeDaemon(t, harness.Options{Args: []string{"--token", "pw"}})
	ref := referenceDaemon(t)
	for _, which := range []string{"1.2", "latest"} {
		bin := openCodeCLI(t, which)
		t.Run(which+"/json", func(t *testing.T) {
			out, err := runOpenCode(t, bin, ours.URL, "--format", "json", "hello there")
			if err != nil {
				t.Fatal(err)
			}
			if got := textEvents(out); len(got) != 1 || !strings.Contains(got[0], "mock: ") || !strings.Contains(got[0], "hello there") {
				t.Errorf("texts %q, want the mock's reply", got)
			}
		})
		t.Run(which+"/text", func(t *testing.T) {
			out, err := runOpenCode(t, bin, ours.URL, "say hi")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "mock: ") || !strings.Contains(out, "say hi") {
				t.Errorf("output %q, want the mock's reply", out)
			}
		})
		t.Run(which+"/password", func(t *testing.T) {
			out, err := runOpenCode(t, bin, locked.URL, "--password", "pw", "--format", "json", "with a password")
			if err != nil {
				t.Fatal(err)
			}
			if got := textEvents(out); len(got) != 1 {
				t.Errorf("texts %q", got)
			}
			out, _ = runOpenCode(t, bin, locked.URL, "--password", "wrong", "--format", "json", "refused")
			if got := textEvents(out); len(got) != 0 {
				t.Errorf("a wrong password got %q", got)
			}
		})
		t.Run(which+"/tool", func(t *testing.T) {
			out, err := runOpenCode(t, bin, ours.URL, "--model", "test/default", "--format", "json", "tool")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, `"type":"tool_use"`) || !strings.Contains(out, `"output":"hi"`) {
				t.Errorf("no completed tool in %s", out)
			}
		})
		t.Run(which+"/loopback-only", func(t *testing.T) {
			// Everything the CLI connects to is the daemon: no models.dev,
			// no update check, no DNS (a sandbox has no internet).
			strace, err := exec.LookPath("strace")
			if err != nil {
				t.Skip("strace is not on PATH")
			}
			trace := filepath.Join(t.TempDir(), "trace")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, strace, "-f", "-qq", "-e", "trace=connect", "-o", trace, bin, "run", "--attach", ours.URL+"/opencode", "--format", "json", "hello")
			cmd.Env, cmd.Dir = openCodeEnv(t), t.TempDir()
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			b, _ := os.ReadFile(trace)
			port := ours.URL[strings.LastIndexByte(ours.URL, ':')+1:]
			var inet int
			for _, line := range strings.Split(string(b), "\n") {
				if !strings.Contains(line, "AF_INET") {
					continue
				}
				inet++
				if !strings.Contains(line, `inet_addr("127.0.0.1")`) || !strings.Contains(line, "htons("+port+")") {
					t.Errorf("the CLI connected elsewhere than the daemon: %s", line)
				}
			}
			if inet == 0 {
				t.Errorf("no connection traced:\n%s", b)
			}
		})
		t.Run(which+"/reference", func(t *testing.T) {
			out, _ := runOpenCode(t, bin, ref, "--format", "json", "hello there")
			if got := textEvents(out); len(got) != 0 {
				t.Errorf("the reference printed %q; it printed no reply when this test was written", got)
			}
		})
	}
}

// TestOpenCodeRestart: sessions and messages are listed after the daemon
// restarts, and a new message in an old session works: session/load
// where the agent offers it (the test agent), a new ACP session where it
// does not (the mock).
func TestOpenCodeRestart(t *testing.T) {
	home := t.TempDir()
	d := openCodeDaemon(t, harness.Options{Home: home})
	create := func(d *harness.Daemon) string {
		var s struct{ ID string }
		if code, b := d.JSONDo("POST", "/opencode/session", map[string]any{}, &s); code != 200 {
			t.Fatalf("create: %d %s", code, b)
		}
		return s.ID
	}
	prompt := func(d *harness.Daemon, id, provider, text string) string {
		var m struct {
			Parts []struct{ Type, Text string }
		}
		body := map[string]any{"model": map[string]string{"providerID": provider, "modelID": "default"}, "parts": []any{map[string]string{"type": "text", "text": text}}}
		if code, b := d.JSONDo("POST", "/opencode/session/"+id+"/message", body, &m); code != 200 {
			t.Fatalf("prompt: %d %s", code, b)
		}
		var out strings.Builder
		for _, p := range m.Parts {
			if p.Type == "text" {
				out.WriteString(p.Text)
			}
		}
		return out.String()
	}
	withLoad, withMock := create(d), create(d)
	if got := prompt(d, withLoad, "test", "first"); got != "echo: first" {
		t.Fatalf("first prompt: %q", got)
	}
	if got := prompt(d, withMock, "mock", "first"); got != "mock: first" {
		t.Fatalf("first prompt: %q", got)
	}
	d.Stop()

	d = openCodeDaemon(t, harness.Options{Home: home})
	var sessions []struct{ ID, Title string }
	if code, b := d.JSONDo("GET", "/opencode/session", nil, &sessions); code != 200 || len(sessions) != 2 {
		t.Fatalf("sessions after restart: %d %s", code, b)
	}
	var msgs []struct {
		Info struct{ Role string }
	}
	if code, b := d.JSONDo("GET", "/opencode/session/"+withLoad+"/message", nil, &msgs); code != 200 || len(msgs) != 2 {
		t.Fatalf("messages after restart: %d %s", code, b)
	}
	if got := prompt(d, withLoad, "test", "second"); got != "(loaded) echo: second" {
		t.Errorf("after restart, a session of an agent with session/load: %q", got)
	}
	if got := prompt(d, withMock, "mock", "second"); got != "mock: second" {
		t.Errorf("after restart, a session of the mock: %q", got)
	}
	if code, b := d.JSONDo("GET", "/opencode/session/"+withLoad+"/message", nil, &msgs); code != 200 || len(msgs) != 4 {
		t.Errorf("messages: %d %s", code, b)
	}
	if _, err := os.Stat(filepath.Join(home, ".local", "state", "sandbox-agent", "opencode.db")); err != nil {
		t.Errorf("the database is not in the XDG state directory: %v", err)
	}
}

// TestOpenCodeInstanceVisibleUnderACP: an OpenCode session's agent is an
// ACP instance like any other: listed, and deleting it ends the turn; the
// next prompt starts it again.
func TestOpenCodeInstanceVisibleUnderACP(t *testing.T) {
	d := openCodeDaemon(t, harness.Options{})
	var s struct{ ID string }
	d.JSONDo("POST", "/opencode/session", map[string]any{}, &s)
	body := map[string]any{"parts": []any{map[string]string{"type": "text", "text": "hi"}}}
	if code, b := d.JSONDo("POST", "/opencode/session/"+s.ID+"/message", body, nil); code != 200 {
		t.Fatalf("prompt: %d %s", code, b)
	}
	servers := d.Servers()
	if len(servers) != 1 || servers[0].Agent != "mock" {
		t.Fatalf("instances %+v", servers)
	}
	if code, _, b := d.Do("DELETE", "/v1/acp/"+servers[0].ServerID, nil); code/100 != 2 {
		t.Fatalf("delete: %d %s", code, b)
	}
	var m struct {
		Parts []struct{ Type, Text string }
	}
	if code, b := d.JSONDo("POST", "/opencode/session/"+s.ID+"/message", body, &m); code != 200 {
		t.Fatalf("prompt after the instance was deleted: %d %s", code, b)
	}
	if len(d.Servers()) != 1 {
		t.Errorf("instances %+v", d.Servers())
	}
}

// TestOpenCodeCommand: "sandbox-agent opencode" starts a daemon when none
// answers (and reuses it next time), and runs "opencode attach" against
// its /opencode with the token as OpenCode's password; without OpenCode
// on PATH it says so.
func TestOpenCodeCommand(t *testing.T) {
	home := t.TempDir()
	bin := t.TempDir()
	record := filepath.Join(home, "attach.txt")
	fake := "#!/bin/sh\necho \"$@\" \"password=$OPENCODE_SERVER_PASSWORD\" \"fetch=$OPENCODE_DISABLE_MODELS_FETCH\" >> " + record + "\n"
	if err := os.WriteFile(filepath.Join(bin, "opencode"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	env := append(os.Environ(), "HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, "state"), "XDG_DATA_HOME="+filepath.Join(home, "data"),
		"PATH="+bin+":/usr/bin:/bin", "SANDBOX_AGENT_TOKEN=tok", "SANDBOX_AGENT_ACP_REGISTRY_URL=http://127.0.0.1:9/registry.json")
	t.Cleanup(func() {
		// The daemon it started runs in its own session, as "daemon start"
		// leaves one: "daemon stop" stops it.
		stop := exec.Command(harness.Binary, "daemon", "stop", "--port", port)
		stop.Env = env
		if out, err := stop.CombinedOutput(); err != nil {
			t.Errorf("daemon stop: %v\n%s", err, out)
		}
	})
	run := func(args ...string) (string, error) {
		cmd := exec.Command(harness.Binary, append([]string{"opencode", "--port", port}, args...)...)
		cmd.Env, cmd.Dir = env, home
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("--", "--continue")
	if err != nil {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	if !strings.Contains(out, "started a daemon") {
		t.Errorf("first run did not say it started a daemon: %s", out)
	}
	out, err = run()
	if err != nil || strings.Contains(out, "started a daemon") {
		t.Errorf("second run: %v, %s (the daemon is reused)", err, out)
	}
	b, _ := os.ReadFile(record)
	want := "attach http://127.0.0.1:" + port + "/opencode --continue password=tok fetch=1\nattach http://127.0.0.1:" + port + "/opencode password=tok fetch=1\n"
	if string(b) != want {
		t.Errorf("opencode ran as\n%s\nwant\n%s", b, want)
	}
	out, err = run("--opencode-bin", "no-such-opencode")
	if err == nil || !strings.Contains(out, "not on PATH") {
		t.Errorf("without opencode: %v %s", err, out)
	}
}

// TestOpenCodeTUI: OpenCode's TUI ("opencode attach") under tmux, a 1.2
// release and the newest: a prompt typed, the mock's reply on the screen.
func TestOpenCodeTUI(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("the TUI test needs tmux on PATH (Debian: apt-get install tmux)")
	}
	d := openCodeDaemon(t, harness.Options{})
	for _, which := range []string{"1.2", "latest"} {
		t.Run(which, func(t *testing.T) {
			bin := openCodeCLI(t, which)
			sock := fmt.Sprintf("sa-e2e-%d-%s", os.Getpid(), strings.ReplaceAll(which, ".", ""))
			tmux := func(args ...string) string {
				out, err := exec.Command("tmux", append([]string{"-L", sock}, args...)...).CombinedOutput()
				if err != nil && args[0] != "kill-server" {
					t.Fatalf("tmux %v: %v %s", args, err, out)
				}
				return string(out)
			}
			var env []string
			for _, kv := range openCodeEnv(t) {
				if strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "XDG_") || strings.HasPrefix(kv, "OPENCODE_") {
					env = append(env, kv)
				}
			}
			// The pane outlives the TUI, so a TUI that exits leaves its last
			// words and status on the screen for the failure message.
			shell := "env " + strings.Join(env, " ") + " " + bin + " attach " + d.URL + "/opencode; echo TUI EXITED $?; sleep 600"
			tmux("new-session", "-d", "-x", "160", "-y", "45", shell)
			t.Cleanup(func() {
				// The pane's processes are gone before the test's temporary
				// directories are removed (the TUI writes its state there
				// until it exits): SIGKILL to the pane's process group, which
				// tmux makes its own, then wait for it.
				if pid, err := strconv.Atoi(strings.TrimSpace(tmux("display-message", "-p", "#{pane_pid}"))); err == nil && pid > 0 {
					_ = syscall.Kill(-pid, syscall.SIGKILL)
					harness.WaitUntil(10*time.Second, func() bool { return syscall.Kill(-pid, 0) != nil })
				}
				tmux("kill-server")
			})
			screen := func() string { return tmux("capture-pane", "-p") }
			waitScreen := func(what string) {
				t.Helper()
				if !harness.WaitUntil(60*time.Second, func() bool { return strings.Contains(screen(), what) }) {
					t.Fatalf("%q never showed; the screen:\n%s", what, screen())
				}
			}
			waitScreen("Ask anything")
			tmux("send-keys", "hello tui")
			waitScreen("hello tui")
			tmux("send-keys", "Enter")
			waitScreen("mock: hello tui")
		})
	}
}
