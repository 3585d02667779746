package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Auth policies end to end: each example policy in
// extensions/wasmpolicy/examples is built as operators build it, loaded
// with --policy, and checked over HTTP.

var (
	policyMu    sync.Mutex
	policyBuilt = map[string]string{}
)

// policyWasm builds examples/<name> once per test binary, next to the
// daemon binary (removed by TestMain).
func policyWasm(t testing.TB, name string) string {
	t.Helper()
	policyMu.Lock()
	defer policyMu.Unlock()
	if p, ok := policyBuilt[name]; ok {
		return p
	}
	out := filepath.Join(filepath.Dir(binary), name+".wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, ".")
	cmd.Dir = filepath.Join("..", "extensions", "wasmpolicy", "examples", name)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build policy %s: %v\n%s", name, err, b)
	}
	policyBuilt[name] = out
	return out
}

// policyCacheEnv shares one compilation cache among the daemons of the run,
// so each module is compiled once.
func policyCacheEnv() []string {
	return []string{"XDG_CACHE_HOME=" + filepath.Join(filepath.Dir(binary), "xdg-cache")}
}

// policyDaemon starts a daemon with the example policy name configured by
// config (a JSON document). The time limit is relaxed: these tests are
// about decisions, and a loaded CI machine can stall a call past 25 ms.
func policyDaemon(t *testing.T, name, config string, extra ...string) *daemon {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), name+".json")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := policyWasm(t, name) + ",config=" + cfg + ",timeout=2s"
	return startDaemon(t, daemonOpts{Args: append([]string{"--policy", spec}, extra...), Env: policyCacheEnv()})
}

const policyInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`

// call sends one request with an optional bearer token and returns the
// status and, for problems, details.message.
func (d *daemon) call(token, method, path, body string, headers ...string) (int, string) {
	d.t.Helper()
	if token != "" {
		headers = append(headers, "Authorization", "Bearer "+token)
	}
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	st, h, resp := d.do(method, path, b, headers...)
	msg := ""
	if strings.HasPrefix(h.Get("Content-Type"), "application/problem+json") {
		var p struct {
			Type    string         `json:"type"`
			Details map[string]any `json:"details"`
		}
		_ = json.Unmarshal(resp, &p)
		msg, _ = p.Details["message"].(string)
		if st == 403 || st == 401 {
			if p.Type != "urn:sandbox-agent:error:permission_denied" && p.Type != "urn:sandbox-agent:error:token_invalid" {
				d.t.Errorf("%s %s: problem type %s", method, path, p.Type)
			}
		}
	}
	return st, msg
}

func (d *daemon) acp(token, path, msg string) (int, string) {
	d.t.Helper()
	return d.call(token, "POST", path, msg, "Content-Type", "application/json")
}

type policyCheck struct {
	name, token, method, path, body string
	headers                         []string
	status                          int
	msg                             string
}

func (d *daemon) check(t *testing.T, checks []policyCheck) {
	t.Helper()
	for _, c := range checks {
		st, msg := d.call(c.token, c.method, c.path, c.body, c.headers...)
		if st != c.status || (c.msg != "" && msg != c.msg) {
			t.Errorf("%s: %s %s: got %d %q, want %d %q", c.name, c.method, c.path, st, msg, c.status, c.msg)
		}
	}
}

var jsonCT = []string{"Content-Type", "application/json"}

func TestPolicyAgentTokens(t *testing.T) {
	d := policyDaemon(t, "agenttokens", `{"tokens": {"alice": ["mock"], "bob": ["claude"]}}`)
	d.check(t, []policyCheck{
		{name: "no token", method: "GET", path: "/v1/health", status: 401, msg: "unknown token"},
		{name: "unknown token", token: "mallory", method: "GET", path: "/v1/health", status: 401, msg: "unknown token"},
		{name: "known token", token: "alice", method: "GET", path: "/v1/health", status: 200},
		{name: "alice starts mock", token: "alice", method: "POST", path: "/v1/acp/s1?agent=mock", body: policyInit, headers: jsonCT, status: 200},
		{name: "bob may not start mock", token: "bob", method: "POST", path: "/v1/acp/s2?agent=mock", body: policyInit, headers: jsonCT, status: 403, msg: "this token may not use agent mock"},
		// Without ?agent= the policy still sees the agent the id runs.
		{name: "bob may not use alice's mock", token: "bob", method: "POST", path: "/v1/acp/s1", body: `{"jsonrpc":"2.0","id":2,"method":"x/echo"}`, headers: jsonCT, status: 403, msg: "this token may not use agent mock"},
		{name: "nor read its stream", token: "bob", method: "GET", path: "/v1/acp/s1", headers: []string{"Accept", "text/event-stream"}, status: 403},
		{name: "nor stop it", token: "bob", method: "DELETE", path: "/v1/acp/s1", status: 403},
		{name: "alice continues", token: "alice", method: "POST", path: "/v1/acp/s1", body: `{"jsonrpc":"2.0","id":3,"method":"x/echo"}`, headers: jsonCT, status: 200},
		{name: "alice stops it", token: "alice", method: "DELETE", path: "/v1/acp/s1", status: 204},
	})
}

func TestPolicyReadOnly(t *testing.T) {
	d := policyDaemon(t, "readonly", `{"readOnly": ["viewer"]}`)
	d.check(t, []policyCheck{
		{name: "writer writes", token: "writer", method: "PUT", path: "/v1/fs/file?path=notes.txt", body: "hello", status: 200},
		{name: "viewer reads", token: "viewer", method: "GET", path: "/v1/fs/file?path=notes.txt", status: 200},
		{name: "viewer lists", token: "viewer", method: "GET", path: "/v1/fs/entries?path=.", status: 200},
		{name: "viewer talks to an agent", token: "viewer", method: "POST", path: "/v1/acp/v?agent=mock", body: policyInit, headers: jsonCT, status: 200},
		{name: "viewer may not write", token: "viewer", method: "PUT", path: "/v1/fs/file?path=notes.txt", body: "overwritten", status: 403,
			msg: "read-only token: PUT /v1/fs/file is not allowed"},
		{name: "nor delete files", token: "viewer", method: "DELETE", path: "/v1/fs/entry?path=notes.txt", status: 403},
		{name: "nor make directories", token: "viewer", method: "POST", path: "/v1/fs/mkdir?path=d", status: 403},
		{name: "nor install agents", token: "viewer", method: "POST", path: "/v1/agents/mock/install", body: `{}`, headers: jsonCT, status: 403},
		{name: "nor stop instances", token: "viewer", method: "DELETE", path: "/v1/acp/v", status: 403},
		{name: "nor write config", token: "viewer", method: "PUT", path: "/v1/config/mcp?directory=.&mcpName=m", body: `{"type":"local","command":"c"}`, headers: jsonCT, status: 403},
	})
	if b, err := os.ReadFile(filepath.Join(d.Home, "notes.txt")); err != nil || string(b) != "hello" {
		t.Errorf("notes.txt = %q, %v; the read-only token changed it", b, err)
	}
}

func TestPolicyDenyMethods(t *testing.T) {
	d := policyDaemon(t, "denymethods", `{"deny": ["terminal/*", "session/set_mode"]}`)
	if st, msg := d.acp("", "/v1/acp/m?agent=mock", policyInit); st != 200 {
		t.Fatalf("initialize: %d %s", st, msg)
	}
	for _, c := range []struct {
		msg    string
		status int
	}{
		{`{"jsonrpc":"2.0","id":2,"method":"terminal/create","params":{}}`, 403},
		{`{"jsonrpc":"2.0","method":"terminal/output","params":{}}`, 403},
		{`{"jsonrpc":"2.0","id":3,"method":"session/set_mode","params":{}}`, 403},
		{`{"jsonrpc":"2.0","id":4,"method":"x/echo","params":{}}`, 200},
		{`{"jsonrpc":"2.0","id":"agent-1","result":{}}`, 202},
	} {
		if st, msg := d.acp("", "/v1/acp/m", c.msg); st != c.status {
			t.Errorf("%s: got %d %q, want %d", c.msg, st, msg, c.status)
		}
	}
	// A denied message never reaches the agent: the stream holds only the
	// allowed exchanges (the mock ignores the stray response).
	s := d.stream("/v1/acp/m")
	var methods []string
	for range 2 {
		var m struct {
			Result struct {
				EchoedMethod string `json:"echoedMethod"`
			} `json:"result"`
			ID any `json:"id"`
		}
		ev := s.nextWithin(t, 5*time.Second)
		_ = json.Unmarshal([]byte(ev.Data), &m)
		methods = append(methods, fmt.Sprint(m.ID, ":", m.Result.EchoedMethod))
	}
	if want := []string{"1:", "4:x/echo"}; !slices.Equal(methods, want) {
		t.Errorf("stream holds %v, want %v", methods, want)
	}
}

// mint makes a token in the hmactoken example's format.
func mint(secret, subject string, expiry time.Time) string {
	payload := subject + "." + strconv.FormatInt(expiry.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(payload))
	return payload + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func TestPolicyHMACToken(t *testing.T) {
	const secret = "e2e-secret-0123456789"
	d := policyDaemon(t, "hmactoken", `{"secret": "`+secret+`"}`)
	now := time.Now()
	d.check(t, []policyCheck{
		{name: "valid", token: mint(secret, "alice", now.Add(time.Hour)), method: "GET", path: "/v1/health", status: 200},
		{name: "valid ACP", token: mint(secret, "alice", now.Add(time.Hour)), method: "POST", path: "/v1/acp/h?agent=mock", body: policyInit, headers: jsonCT, status: 200},
		// The guest's clock is the host's: an hour-old token has expired.
		{name: "expired", token: mint(secret, "alice", now.Add(-time.Hour)), method: "GET", path: "/v1/health", status: 401, msg: "token expired"},
		{name: "other secret", token: mint("another-secret-012345", "alice", now.Add(time.Hour)), method: "GET", path: "/v1/health", status: 401, msg: "bad token signature"},
		{name: "missing", method: "GET", path: "/v1/health", status: 401, msg: "missing bearer token"},
	})
	// The policy's own log line, tagged with its name.
	waitLog(t, d, `rejected token for "alice" from 127.0.0.1`)
	waitLog(t, d, `policy=hmactoken`)
}

// waitLog waits (bounded) for a daemon log line containing s.
func waitLog(t *testing.T, d *daemon, s string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if strings.Contains(d.logs.String(), s) {
			return
		}
	}
	t.Fatalf("no log line containing %q", s)
}

// SIGHUP reloads policies and their configs; a reload that fails keeps the
// running ones.
func TestPolicyReload(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "deny.json")
	write := func(doc string) {
		if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"deny": ["terminal/*"]}`)
	spec := policyWasm(t, "denymethods") + ",config=" + cfg + ",timeout=2s"
	d := startDaemon(t, daemonOpts{Args: []string{"--policy", spec}, Env: policyCacheEnv()})
	echo := `{"jsonrpc":"2.0","id":%d,"method":"x/echo"}`
	if st, msg := d.acp("", "/v1/acp/r?agent=mock", fmt.Sprintf(echo, 1)); st != 200 {
		t.Fatalf("before reload: %d %s", st, msg)
	}

	write(`{"deny": ["x/*"]}`)
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, d, "auth policies reloaded")
	if st, msg := d.acp("", "/v1/acp/r", fmt.Sprintf(echo, 2)); st != 403 || msg != "ACP method x/echo is not allowed" {
		t.Errorf("after reload: %d %q", st, msg)
	}

	write(`not json`)
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, d, "keeping the previous ones")
	if st, _ := d.acp("", "/v1/acp/r", fmt.Sprintf(echo, 3)); st != 403 {
		t.Errorf("after a failed reload: %d, want the previous policy's 403", st)
	}
}

// A module that cannot load stops the daemon at start, naming it.
func TestPolicyRefusedAtStart(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "broken.wasm")
	if err := os.WriteFile(bad, []byte("not wasm"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "server", "--port", strconv.Itoa(freePort(t)), "--policy", bad)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := runBounded(cmd, 30*time.Second)
	if err == nil || !strings.Contains(out, "policy broken") {
		t.Errorf("daemon with a broken policy: %v\n%s", err, out)
	}
	cmd = exec.Command(binary, "server", "--policy", "x.wasm,fail=sometimes")
	if out, err := runBounded(cmd, 30*time.Second); err == nil || !strings.Contains(out, "fail") {
		t.Errorf("bad --policy option: %v\n%s", err, out)
	}
}

func runBounded(cmd *exec.Cmd, limit time.Duration) (string, error) {
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		return out.String(), fmt.Errorf("still running after %v", limit)
	}
}

// `sandbox-agent policy test` passes a matching case file and fails (exit
// 1) a mismatching one.
func TestPolicyTestCommand(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cfg.json")
	os.WriteFile(cfg, []byte(`{"deny": ["terminal/*"]}`), 0o600)
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`[
	  {"name": "terminal", "request": {"method": "POST", "rpc": {"kind": "request", "id": "1", "method": "terminal/create"}}, "want": {"allow": false, "status": 403}},
	  {"name": "prompt", "request": {"method": "POST", "rpc": {"kind": "request", "id": "2", "method": "session/prompt"}}, "want": {"allow": true}},
	  {"name": "config per case", "config": {"deny": ["session/*"]}, "request": {"method": "POST", "rpc": {"kind": "request", "id": "3", "method": "session/prompt"}}, "want": {"allow": false}}
	]`), 0o600)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`[{"name": "wrong", "request": {"rpc": {"kind": "request", "method": "terminal/kill"}}, "want": {"allow": true}}]`), 0o600)

	policy := policyWasm(t, "denymethods") + ",config=" + cfg
	env := append(os.Environ(), policyCacheEnv()...)
	cmd := exec.Command(binary, "policy", "test", policy, good)
	cmd.Env = env
	if out, err := runBounded(cmd, time.Minute); err != nil || !strings.Contains(out, "PASS  3 cases") {
		t.Errorf("good cases: %v\n%s", err, out)
	}
	cmd = exec.Command(binary, "policy", "test", policy, bad)
	cmd.Env = env
	out, err := runBounded(cmd, time.Minute)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(out, `FAIL  wrong: got deny 403 "ACP method terminal/kill is not allowed", want allow`) {
		t.Errorf("bad cases: %v\n%s", err, out)
	}
}

// BenchmarkACPPostPolicy is the ACP POST round trip (a synchronous request
// answered by the mock agent) without a policy and with one (denymethods,
// which reads the peeked JSON-RPC method).
//
//	go test ./e2e -run '^$' -bench BenchmarkACPPostPolicy
func BenchmarkACPPostPolicy(b *testing.B) {
	for _, name := range []string{"none", "denymethods"} {
		b.Run(name, func(b *testing.B) {
			home := b.TempDir()
			args := []string{}
			if name != "none" {
				cfg := filepath.Join(home, "cfg.json")
				os.WriteFile(cfg, []byte(`{"deny": ["terminal/*"]}`), 0o600)
				args = append(args, "--policy", policyWasm(b, name)+",config="+cfg)
			}
			url := startPolicyBenchDaemon(b, home, args...)
			post := func(body string) {
				resp, err := http.Post(url+"/v1/acp/bench?agent=mock", "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
			post(policyInit)
			id := 1
			for b.Loop() {
				id++
				post(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"x/echo","params":{}}`)
			}
		})
	}
}

// startPolicyBenchDaemon runs the binary quietly with extra server flags
// and returns its URL.
func startPolicyBenchDaemon(b *testing.B, home string, args ...string) string {
	d := startDaemon(b, daemonOpts{Home: home, Args: append([]string{"--log-level", "warn"}, args...), Env: policyCacheEnv()})
	return d.URL
}
