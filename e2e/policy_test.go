package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
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

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
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
	out := filepath.Join(filepath.Dir(harness.Binary), name+".wasm")
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
	return []string{"XDG_CACHE_HOME=" + filepath.Join(filepath.Dir(harness.Binary), "xdg-cache")}
}

// policyDaemon starts a daemon with the example policy name configured by
// config (a JSON document). The time limit is relaxed: these tests are
// about decisions, and a loaded CI machine can stall a call past 25 ms.
func policyDaemon(t *testing.T, name, config string, extra ...string) *harness.Daemon {
	t.Helper()
	return policyDaemonHome(t, "", name, config, extra...)
}

func policyDaemonHome(t *testing.T, home, name, config string, extra ...string) *harness.Daemon {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), name+".json")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := policyWasm(t, name) + ",config=" + cfg + ",timeout=2s"
	return harness.Start(t, harness.Options{Home: home, Args: append([]string{"--policy", spec}, extra...), Env: policyCacheEnv()})
}

const policyInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`

// call sends one request with an optional bearer token and returns the
// status and, for problems, details.message.
func call(d *harness.Daemon, token, method, path, body string, headers ...string) (int, string) {
	d.T().Helper()
	if token != "" {
		headers = append(headers, "Authorization", "Bearer "+token)
	}
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	st, h, resp := d.Do(method, path, b, headers...)
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
				d.T().Errorf("%s %s: problem type %s", method, path, p.Type)
			}
		}
	}
	return st, msg
}

func acpPost(d *harness.Daemon, token, path, msg string) (int, string) {
	d.T().Helper()
	return call(d, token, "POST", path, msg, "Content-Type", "application/json")
}

type policyCheck struct {
	name, token, method, path, body string
	headers                         []string
	status                          int
	msg                             string
}

func check(t *testing.T, d *harness.Daemon, checks []policyCheck) {
	t.Helper()
	for _, c := range checks {
		st, msg := call(d, c.token, c.method, c.path, c.body, c.headers...)
		if st != c.status || (c.msg != "" && msg != c.msg) {
			t.Errorf("%s: %s %s: got %d %q, want %d %q", c.name, c.method, c.path, st, msg, c.status, c.msg)
		}
	}
}

var jsonCT = []string{"Content-Type", "application/json"}

// Each example runs on a daemon started WITH a token (the admin's), as
// docs/auth.md recommends: the checks cover the admin token, the example's
// scoped token, an unknown token and no token.

// withAdminFile returns server flags reading the admin token from a file.
func withAdminFile(t *testing.T, extra ...string) []string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(f, []byte("# admin\nadmin-tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return append([]string{"--token-file", f}, extra...)
}

var strangers = []policyCheck{
	{name: "unknown token", token: "mallory", method: "GET", path: "/v1/health", status: 401, msg: "missing or invalid bearer token"},
	{name: "no token", method: "GET", path: "/v1/health", status: 401, msg: "missing or invalid bearer token"},
	{name: "unknown token may not start", token: "mallory", method: "POST", path: "/v1/acp/x?agent=mock", body: policyInit, headers: jsonCT, status: 401},
	{name: "no token may not write", method: "PUT", path: "/v1/fs/file?path=x.txt", body: "x", status: 401},
}

func TestPolicyAgentTokens(t *testing.T) {
	t.Parallel()
	d := policyDaemon(t, "agenttokens", `{"tokens": {"alice": {"label": "alice", "agents": ["mock"]}, "bob": {"label": "bob", "agents": ["claude"]}}}`, withAdminFile(t)...)
	check(t, d, append([]policyCheck{
		{name: "admin", token: "admin-tok", method: "POST", path: "/v1/acp/admin?agent=mock", body: policyInit, headers: jsonCT, status: 200},
		{name: "known token, no agent named", token: "alice", method: "GET", path: "/v1/health", status: 200},
		{name: "alice starts mock", token: "alice", method: "POST", path: "/v1/acp/s1?agent=mock", body: policyInit, headers: jsonCT, status: 200},
		{name: "bob may not start mock", token: "bob", method: "POST", path: "/v1/acp/s2?agent=mock", body: policyInit, headers: jsonCT, status: 403, msg: "this token may not use agent mock"},
		// Without ?agent= the policy still sees the agent the id runs.
		{name: "bob may not use alice's mock", token: "bob", method: "POST", path: "/v1/acp/s1", body: `{"jsonrpc":"2.0","id":2,"method":"x/echo"}`, headers: jsonCT, status: 403, msg: "this token may not use agent mock"},
		{name: "nor read its stream", token: "bob", method: "GET", path: "/v1/acp/s1", headers: []string{"Accept", "text/event-stream"}, status: 403},
		{name: "nor stop it", token: "bob", method: "DELETE", path: "/v1/acp/s1", status: 403},
		{name: "alice continues", token: "alice", method: "POST", path: "/v1/acp/s1", body: `{"jsonrpc":"2.0","id":3,"method":"x/echo"}`, headers: jsonCT, status: 200},
		{name: "alice stops it", token: "alice", method: "DELETE", path: "/v1/acp/s1", status: 204},
	}, strangers...))
	waitLog(t, d, "principal=alice")
}

func TestPolicyReadOnly(t *testing.T) {
	t.Parallel()
	d := policyDaemon(t, "readonly", `{"tokens": {"viewer": "viewer-1"}}`, withAdminFile(t)...)
	check(t, d, append([]policyCheck{
		{name: "admin writes", token: "admin-tok", method: "PUT", path: "/v1/fs/file?path=notes.txt", body: "hello", status: 200},
		{name: "admin starts", token: "admin-tok", method: "POST", path: "/v1/acp/a?agent=mock", body: policyInit, headers: jsonCT, status: 200},
		{name: "viewer reads", token: "viewer", method: "GET", path: "/v1/fs/file?path=notes.txt", status: 200},
		{name: "viewer lists", token: "viewer", method: "GET", path: "/v1/fs/entries?path=.", status: 200},
		{name: "viewer lists instances", token: "viewer", method: "GET", path: "/v1/acp", status: 200},
		{name: "viewer reads metrics", token: "viewer", method: "GET", path: "/metrics", status: 200},
		{name: "viewer talks to a running agent", token: "viewer", method: "POST", path: "/v1/acp/a", body: `{"jsonrpc":"2.0","id":2,"method":"x/echo"}`, headers: jsonCT, status: 200},
		{name: "even naming its agent", token: "viewer", method: "POST", path: "/v1/acp/a?agent=mock", body: `{"jsonrpc":"2.0","id":3,"method":"x/echo"}`, headers: jsonCT, status: 200},
		{name: "viewer may not start an agent", token: "viewer", method: "POST", path: "/v1/acp/v?agent=mock", body: policyInit, headers: jsonCT, status: 403,
			msg: "read-only token: acp.start is not allowed"},
		// opencode is not installed: the start implies an install, which
		// is refused before anything is downloaded (the registry is a
		// closed port here: an attempt would be a 500 install_failed).
		{name: "nor start one that needs installing", token: "viewer", method: "POST", path: "/v1/acp/v2?agent=opencode", body: policyInit, headers: jsonCT, status: 403,
			msg: "read-only token: acp.start+agent.install is not allowed"},
		{name: "nor install agents", token: "viewer", method: "POST", path: "/v1/agents/opencode/install", body: `{}`, headers: jsonCT, status: 403},
		{name: "nor write files", token: "viewer", method: "PUT", path: "/v1/fs/file?path=notes.txt", body: "overwritten", status: 403,
			msg: "read-only token: fs.write is not allowed"},
		{name: "nor delete files", token: "viewer", method: "DELETE", path: "/v1/fs/entry?path=notes.txt", status: 403},
		{name: "nor make directories", token: "viewer", method: "POST", path: "/v1/fs/mkdir?path=d", status: 403},
		{name: "nor stop instances", token: "viewer", method: "DELETE", path: "/v1/acp/a", status: 403},
		{name: "nor write config", token: "viewer", method: "PUT", path: "/v1/config/mcp?directory=.&mcpName=m", body: `{"type":"local","command":"c"}`, headers: jsonCT, status: 403},
	}, strangers...))
	if b, err := os.ReadFile(filepath.Join(d.Home, "notes.txt")); err != nil || string(b) != "hello" {
		t.Errorf("notes.txt = %q, %v; the read-only token changed it", b, err)
	}
	if _, err := os.Stat(filepath.Join(d.Home, ".local", "share", "sandbox-agent", "bin", "agent_processes", "opencode-acp")); err == nil {
		t.Error("the viewer's start installed opencode")
	}
	waitLog(t, d, "principal=viewer-1")
}

// denymethods authenticates nobody: placed before readonly it refuses the
// methods for every token, the viewer's included (a grant ends the chain,
// so after readonly it would not see the viewer's requests).
func TestPolicyDenyMethods(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	deny := filepath.Join(dir, "deny.json")
	ro := filepath.Join(dir, "ro.json")
	os.WriteFile(deny, []byte(`{"deny": ["terminal/*", "session/set_mode"]}`), 0o600)
	os.WriteFile(ro, []byte(`{"tokens": {"viewer": "viewer"}}`), 0o600)
	d := harness.Start(t, harness.Options{Env: policyCacheEnv(), Args: withAdminFile(t,
		"--policy", policyWasm(t, "denymethods")+",config="+deny+",timeout=2s",
		"--policy", policyWasm(t, "readonly")+",config="+ro+",timeout=2s")})
	if st, msg := acpPost(d, "admin-tok", "/v1/acp/m?agent=mock", policyInit); st != 200 {
		t.Fatalf("initialize: %d %s", st, msg)
	}
	for _, c := range []struct {
		token, msg string
		status     int
	}{
		{"admin-tok", `{"jsonrpc":"2.0","id":2,"method":"terminal/create","params":{}}`, 403},
		{"admin-tok", `{"jsonrpc":"2.0","method":"terminal/output","params":{}}`, 403},
		{"admin-tok", `{"jsonrpc":"2.0","id":3,"method":"session/set_mode","params":{}}`, 403},
		{"viewer", `{"jsonrpc":"2.0","id":5,"method":"terminal/create","params":{}}`, 403},
		{"admin-tok", `{"jsonrpc":"2.0","id":4,"method":"x/echo","params":{}}`, 200},
		{"viewer", `{"jsonrpc":"2.0","id":6,"method":"x/echo","params":{}}`, 200},
		{"admin-tok", `{"jsonrpc":"2.0","id":"agent-1","result":{}}`, 202},
		{"mallory", `{"jsonrpc":"2.0","id":7,"method":"x/echo","params":{}}`, 401},
		{"", `{"jsonrpc":"2.0","id":8,"method":"x/echo","params":{}}`, 401},
	} {
		if st, msg := acpPost(d, c.token, "/v1/acp/m", c.msg); st != c.status {
			t.Errorf("%s %s: got %d %q, want %d", c.token, c.msg, st, msg, c.status)
		}
	}
	// A denied message never reaches the agent: the stream holds only the
	// allowed exchanges (the mock ignores the stray response).
	s := d.Stream("/v1/acp/m", "Authorization", "Bearer admin-tok")
	var methods []string
	for range 3 {
		var m struct {
			Result struct {
				EchoedMethod string `json:"echoedMethod"`
			} `json:"result"`
			ID any `json:"id"`
		}
		ev := s.NextWithin(t, 5*time.Second)
		_ = json.Unmarshal([]byte(ev.Data), &m)
		methods = append(methods, fmt.Sprint(m.ID, ":", m.Result.EchoedMethod))
	}
	if want := []string{"1:", "4:x/echo", "6:x/echo"}; !slices.Equal(methods, want) {
		t.Errorf("stream holds %v, want %v", methods, want)
	}
}

func TestPolicyScopes(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	work := filepath.Join(home, "work")
	os.MkdirAll(work, 0o755)
	cfg := `{"tokens": [
	  {"token": "ci", "label": "ci-bot", "actions": ["acp.*", "agent.read", "fs.*"], "agents": ["mock"], "paths": ["` + work + `"]},
	  {"token": "ops", "label": "ops", "actions": ["*.read"]}
	]}`
	cfgFile := filepath.Join(t.TempDir(), "scopes.json")
	os.WriteFile(cfgFile, []byte(cfg), 0o600)
	d := harness.Start(t, harness.Options{Home: home, Env: append(policyCacheEnv(), "SANDBOX_AGENT_TOKEN=admin-tok"),
		Args: []string{"--policy", policyWasm(t, "scopes") + ",config=" + cfgFile + ",timeout=2s"}})
	check(t, d, append([]policyCheck{
		{name: "admin writes anywhere", token: "admin-tok", method: "PUT", path: "/v1/fs/file?path=outside.txt", body: "a", status: 200},
		{name: "ci writes in its tree", token: "ci", method: "PUT", path: "/v1/fs/file?path=work/a.txt", body: "a", status: 200},
		{name: "ci reads in its tree", token: "ci", method: "GET", path: "/v1/fs/file?path=" + work + "/a.txt", status: 200},
		{name: "ci may not read outside", token: "ci", method: "GET", path: "/v1/fs/file?path=outside.txt", status: 403, msg: "ci-bot may not touch " + filepath.Join(home, "outside.txt")},
		{name: "nor climb out", token: "ci", method: "GET", path: "/v1/fs/entries?path=" + work + "/../", status: 403},
		{name: "nor move out", token: "ci", method: "POST", path: "/v1/fs/move", body: `{"from":"work/a.txt","to":"b.txt"}`, headers: jsonCT, status: 403, msg: "ci-bot may not touch " + filepath.Join(home, "b.txt")},
		{name: "ci starts mock", token: "ci", method: "POST", path: "/v1/acp/c?agent=mock", body: policyInit, headers: jsonCT, status: 200},
		{name: "ci may not start claude", token: "ci", method: "POST", path: "/v1/acp/c2?agent=claude", body: policyInit, headers: jsonCT, status: 403},
		{name: "ci may not write config", token: "ci", method: "PUT", path: "/v1/config/mcp?directory=" + work + "&mcpName=m", body: `{"type":"local","command":"c"}`, headers: jsonCT, status: 403, msg: "ci-bot may not config.write"},
		{name: "ci may not read health (not in its actions)", token: "ci", method: "GET", path: "/v1/health", status: 403},
		{name: "ops reads", token: "ops", method: "GET", path: "/v1/fs/file?path=outside.txt", status: 200},
		{name: "ops may not stop", token: "ops", method: "DELETE", path: "/v1/acp/c", status: 403, msg: "ops may not acp.stop"},
		{name: "ci stops its instance", token: "ci", method: "DELETE", path: "/v1/acp/c", status: 204},
	}, strangers...))
	if _, err := os.Stat(filepath.Join(home, "b.txt")); err == nil {
		t.Error("ci moved a file out of its tree")
	}
	waitLog(t, d, "principal=ci-bot")
}

// mint makes a token in the hmactoken example's format.
func mint(secret, subject string, expiry time.Time) string {
	payload := subject + "." + strconv.FormatInt(expiry.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(payload))
	return payload + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// hmactoken identifies its tokens (principal hmac:SUBJECT) and leaves the
// decision to later policies: here denymethods, which refuses terminals
// even to a valid signed token.
func TestPolicyHMACToken(t *testing.T) {
	t.Parallel()
	const secret = "e2e-secret-0123456789"
	dir := t.TempDir()
	hc, dm := filepath.Join(dir, "hmac.json"), filepath.Join(dir, "deny.json")
	os.WriteFile(hc, []byte(`{"secret": "`+secret+`"}`), 0o600)
	os.WriteFile(dm, []byte(`{"deny": ["terminal/*"]}`), 0o600)
	d := harness.Start(t, harness.Options{Env: policyCacheEnv(), Args: withAdminFile(t,
		"--policy", policyWasm(t, "hmactoken")+",config="+hc+",timeout=2s",
		"--policy", policyWasm(t, "denymethods")+",config="+dm+",timeout=2s")})
	now := time.Now()
	valid := mint(secret, "alice", now.Add(time.Hour))
	check(t, d, append([]policyCheck{
		{name: "admin", token: "admin-tok", method: "GET", path: "/v1/health", status: 200},
		{name: "valid", token: valid, method: "GET", path: "/v1/health", status: 200},
		{name: "valid ACP", token: valid, method: "POST", path: "/v1/acp/h?agent=mock", body: policyInit, headers: jsonCT, status: 200},
		{name: "valid, but a later policy denies", token: valid, method: "POST", path: "/v1/acp/h", body: `{"jsonrpc":"2.0","id":2,"method":"terminal/create"}`, headers: jsonCT, status: 403, msg: "ACP method terminal/create is not allowed"},
		// The guest's clock is the host's: an hour-old token has expired.
		{name: "expired", token: mint(secret, "alice", now.Add(-time.Hour)), method: "GET", path: "/v1/health", status: 401, msg: "token expired"},
		{name: "other secret", token: mint("another-secret-012345", "alice", now.Add(time.Hour)), method: "GET", path: "/v1/health", status: 401, msg: "bad token signature"},
	}, strangers...))
	// The policy's own log line, tagged with its name, and the principal.
	waitLog(t, d, `rejected token for "alice" from 127.0.0.1`)
	waitLog(t, d, `policy=hmactoken`)
	waitLog(t, d, `principal=hmac:alice`)
}

// A stream opened with a signed token ends once the token has expired,
// without a reload: the daemon asks the chain again every
// --policy-recheck, and hmactoken now refuses it. A stream opened with a
// token valid for an hour goes on.
func TestPolicyRecheckEndsExpiredStreams(t *testing.T) {
	t.Parallel()
	const secret = "e2e-secret-0123456789"
	hc := filepath.Join(t.TempDir(), "hmac.json")
	if err := os.WriteFile(hc, []byte(`{"secret": "`+secret+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	d := harness.Start(t, harness.Options{Env: policyCacheEnv(), Args: []string{
		"--policy", policyWasm(t, "hmactoken") + ",config=" + hc + ",timeout=2s", "--policy-recheck", "1s"}})
	// hmactoken's expiry is in whole seconds: this one expires 2 to 3 s
	// from now.
	expiry := time.Now().Truncate(time.Second).Add(3 * time.Second)
	short, long := mint(secret, "alice", expiry), mint(secret, "bob", time.Now().Add(time.Hour))
	if st, msg := acpPost(d, long, "/v1/acp/x?agent=mock", policyInit); st != 200 {
		t.Fatalf("start: %d %s", st, msg)
	}
	a := d.Stream("/v1/acp/x", "Authorization", "Bearer "+short)
	defer a.Close()
	b := d.Stream("/v1/acp/x", "Authorization", "Bearer "+long)
	defer b.Close()
	for _, s := range []*harness.Stream{a, b} {
		s.Until(t, 10*time.Second, func(ev harness.Event) bool { return strings.Contains(ev.Data, `"id":1`) })
	}
	ended := make(chan time.Time, 1)
	go func() {
		for {
			if _, err := a.Next(); err != nil {
				ended <- time.Now()
				return
			}
		}
	}()
	select {
	case at := <-ended:
		if at.Before(expiry) {
			t.Errorf("the stream ended at %v, before its token expired at %v", at, expiry)
		}
	case <-time.After(time.Until(expiry) + 10*time.Second):
		t.Fatal("the expired token's stream is still open 10 s after the expiry")
	}
	if st, _ := call(d, short, "GET", "/v1/health", ""); st != 401 {
		t.Errorf("the expired token on a new request: %d", st)
	}
	// bob's stream, rechecked as often, still delivers.
	if st, msg := acpPost(d, long, "/v1/acp/x", `{"jsonrpc":"2.0","id":2,"method":"x/echo","params":{}}`); st != 200 {
		t.Fatalf("echo: %d %s", st, msg)
	}
	b.Until(t, 10*time.Second, func(ev harness.Event) bool { return strings.Contains(ev.Data, `"id":2`) })
	waitLog(t, d, "stream ended: no longer authorised")
}

// waitLog waits (bounded) for a daemon log line containing s.
func waitLog(t *testing.T, d *harness.Daemon, s string) {
	t.Helper()
	if !harness.WaitUntil(10*time.Second, func() bool { return strings.Contains(d.Logs(), s) }) {
		t.Fatalf("no log line containing %q", s)
	}
}

// SIGHUP reloads policies and their configs; a reload that fails keeps the
// running ones.
func TestPolicyReload(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "deny.json")
	write := func(doc string) {
		if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"deny": ["terminal/*"]}`)
	spec := policyWasm(t, "denymethods") + ",config=" + cfg + ",timeout=2s"
	d := harness.Start(t, harness.Options{Args: []string{"--policy", spec}, Env: policyCacheEnv()})
	echo := `{"jsonrpc":"2.0","id":%d,"method":"x/echo"}`
	if st, msg := acpPost(d, "", "/v1/acp/r?agent=mock", fmt.Sprintf(echo, 1)); st != 200 {
		t.Fatalf("before reload: %d %s", st, msg)
	}

	write(`{"deny": ["x/*"]}`)
	if err := d.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, d, "auth policies reloaded")
	if st, msg := acpPost(d, "", "/v1/acp/r", fmt.Sprintf(echo, 2)); st != 403 || msg != "ACP method x/echo is not allowed" {
		t.Errorf("after reload: %d %q", st, msg)
	}

	write(`not json`)
	if err := d.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, d, "keeping the previous ones")
	if st, _ := acpPost(d, "", "/v1/acp/r", fmt.Sprintf(echo, 3)); st != 403 {
		t.Errorf("after a failed reload: %d, want the previous policy's 403", st)
	}
}

// A module that cannot load stops the daemon at start, naming it.
func TestPolicyRefusedAtStart(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "broken.wasm")
	if err := os.WriteFile(bad, []byte("not wasm"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(harness.Binary, "server", "--port", "0", "--policy", bad)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := runBounded(cmd, 30*time.Second)
	if err == nil || !strings.Contains(out, "policy broken") {
		t.Errorf("daemon with a broken policy: %v\n%s", err, out)
	}
	cmd = exec.Command(harness.Binary, "server", "--policy", "x.wasm,fail=sometimes")
	if out, err := runBounded(cmd, 30*time.Second); err == nil || !strings.Contains(out, "fail") {
		t.Errorf("bad --policy option: %v\n%s", err, out)
	}
}

func runBounded(cmd *exec.Cmd, limit time.Duration) (string, error) {
	var out harness.LockedBuffer
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
	t.Parallel()
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
	cmd := exec.Command(harness.Binary, "policy", "test", policy, good)
	cmd.Env = env
	if out, err := runBounded(cmd, time.Minute); err != nil || !strings.Contains(out, "PASS  3 cases") {
		t.Errorf("good cases: %v\n%s", err, out)
	}
	cmd = exec.Command(harness.Binary, "policy", "test", policy, bad)
	cmd.Env = env
	out, err := runBounded(cmd, time.Minute)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(out, `FAIL  wrong: got deny 403 "ACP method terminal/kill is not allowed", want allow`) {
		t.Errorf("bad cases: %v\n%s", err, out)
	}
}

// BenchmarkACPPostPolicy is the ACP POST round trip (a synchronous request
// answered by the mock agent) without a policy, with one (denymethods,
// which reads the peeked JSON-RPC method), with a chain of two that both
// pass (denymethods then readonly; no token), and with the two where the
// second grants (readonly's viewer token on acp.send). The goal: p50 of
// the two-policy chain within 10 % of none. The examples declare their
// decisions cacheable, so after the first request each leg is answered
// from the decision cache; the last leg is the granting chain with
// cache=off, what every request costs when the module runs.
//
//	go test ./e2e -run '^$' -bench BenchmarkACPPostPolicy -benchtime 30x   (30 rounds x 200 per leg)
func BenchmarkACPPostPolicy(b *testing.B) {
	legs := []struct {
		name, token string
		policies    []string
		options     string
	}{
		{"none", "", nil, ""},
		{"denymethods", "", []string{"denymethods"}, ""},
		{"two-pass", "", []string{"denymethods", "readonly"}, ""},
		{"two-grant", "viewer", []string{"denymethods", "readonly"}, ""},
		{"two-grant-uncached", "viewer", []string{"denymethods", "readonly"}, ",cache=off"},
	}
	// Every leg's daemon runs for the whole benchmark and the legs take
	// turns in warm blocks, so they see the same machine (a loaded VM
	// drifts by more than the difference being measured when each leg
	// runs alone, one after another).
	configs := map[string]string{"denymethods": `{"deny": ["terminal/*"]}`, "readonly": `{"tokens": {"viewer": "viewer"}}`}
	posts := make([]func(id int), len(legs))
	for i, leg := range legs {
		home := b.TempDir()
		args := []string{}
		for _, name := range leg.policies {
			cfg := filepath.Join(home, name+".json")
			os.WriteFile(cfg, []byte(configs[name]), 0o600)
			args = append(args, "--policy", policyWasm(b, name)+",config="+cfg+leg.options)
		}
		url := startPolicyBenchDaemon(b, home, args...)
		post := func(path, body, token string) {
			req, _ := http.NewRequest("POST", url+path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			// Drained, so the connection is reused as a real client's is
			// (an undrained body costs a new TCP connection per request,
			// which hides the policies' share).
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("%s: status %d", leg.name, resp.StatusCode)
			}
		}
		post("/v1/acp/bench?agent=mock", policyInit, "") // the start: no token needed here
		token := leg.token
		posts[i] = func(id int) {
			post("/v1/acp/bench", `{"jsonrpc":"2.0","id":`+strconv.Itoa(id)+`,"method":"x/echo","params":{}}`, token)
		}
	}
	const block = 200
	durs := make([][]time.Duration, len(legs))
	id := 1
	for b.Loop() {
		for i, post := range posts {
			for range 20 { // warm the leg's connection and daemon
				id++
				post(id)
			}
			for range block {
				id++
				start := time.Now()
				post(id)
				durs[i] = append(durs[i], time.Since(start))
			}
		}
	}
	p50 := make([]float64, len(legs))
	for i, leg := range legs {
		slices.Sort(durs[i])
		p50[i] = float64(durs[i][len(durs[i])/2].Microseconds())
		b.ReportMetric(p50[i], leg.name+"-p50-µs")
		b.ReportMetric(float64(durs[i][len(durs[i])*99/100].Microseconds()), leg.name+"-p99-µs")
	}
	b.ReportMetric(p50[2]/p50[0], "two-pass/none")
	b.ReportMetric(p50[3]/p50[0], "two-grant/none")
	b.ReportMetric(p50[4]/p50[0], "two-grant-uncached/none")
}

// startPolicyBenchDaemon runs the binary quietly with extra server flags
// and returns its URL.
func startPolicyBenchDaemon(b *testing.B, home string, args ...string) string {
	d := harness.Start(b, harness.Options{Home: home, Args: append([]string{"--log-level", "warn"}, args...), Env: policyCacheEnv()})
	return d.URL
}

// ACP's standard transport (/acp/{agent}) is decided by the same chain:
// creating a connection (the initialize POST, a WebSocket upgrade) is
// acp.start, implying agent.install for an agent that is not installed;
// other POSTs and each WebSocket text frame acp.send, with the JSON-RPC
// method peeked; DELETE acp.stop. denymethods before readonly, as in
// TestPolicyDenyMethods.
func TestPolicyACPStd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	deny := filepath.Join(dir, "deny.json")
	ro := filepath.Join(dir, "ro.json")
	os.WriteFile(deny, []byte(`{"deny": ["terminal/*"]}`), 0o600)
	os.WriteFile(ro, []byte(`{"tokens": {"viewer": "viewer"}}`), 0o600)
	d := harness.Start(t, harness.Options{Env: policyCacheEnv(), Args: withAdminFile(t,
		"--policy", policyWasm(t, "denymethods")+",config="+deny+",timeout=2s",
		"--policy", policyWasm(t, "readonly")+",config="+ro+",timeout=2s")})

	st, h, b := d.Do("POST", "/acp/mock", []byte(policyInit), "Content-Type", "application/json", "Authorization", "Bearer admin-tok")
	id := h.Get("Acp-Connection-Id")
	if st != 200 || id == "" {
		t.Fatalf("admin's initialize: %d %s", st, b)
	}
	conn := []string{"Content-Type", "application/json", "Acp-Connection-Id", id}
	check(t, d, []policyCheck{
		{name: "viewer may not create a connection", token: "viewer", method: "POST", path: "/acp/mock", body: policyInit, headers: jsonCT, status: 403,
			msg: "read-only token: acp.start is not allowed"},
		{name: "nor one that needs installing", token: "viewer", method: "POST", path: "/acp/opencode", body: policyInit, headers: jsonCT, status: 403,
			msg: "read-only token: acp.start+agent.install is not allowed"},
		{name: "viewer sends on a connection", token: "viewer", method: "POST", path: "/acp/mock", body: `{"jsonrpc":"2.0","id":2,"method":"x/echo"}`, headers: conn, status: 202},
		{name: "denied methods, for every token", token: "admin-tok", method: "POST", path: "/acp/mock", body: `{"jsonrpc":"2.0","id":3,"method":"terminal/create","params":{}}`, headers: conn, status: 403},
		{name: "viewer may not end it", token: "viewer", method: "DELETE", path: "/acp/mock", headers: []string{"Acp-Connection-Id", id}, status: 403,
			msg: "read-only token: acp.stop is not allowed"},
		{name: "no token", method: "POST", path: "/acp/mock", body: `{"jsonrpc":"2.0","id":4,"method":"x/echo"}`, headers: conn, status: 401},
		{name: "unknown token", token: "mallory", method: "DELETE", path: "/acp/mock", headers: []string{"Acp-Connection-Id", id}, status: 401},
	})

	// A WebSocket upgrade creates a connection: acp.start, also with the
	// token as ?access_token= (which the policies see as Authorization).
	for _, c := range []struct {
		url     string
		headers []string
	}{
		{wsURL(d, "mock"), []string{"Authorization", "Bearer viewer"}},
		{wsURL(d, "mock") + "?access_token=viewer", nil},
	} {
		ws, err := dialWS(t, c.url, c.headers...)
		if err != nil || ws.Resp.StatusCode != http.StatusForbidden {
			t.Errorf("viewer's upgrade %s: %v %v", c.url, ws, err)
		}
	}
	// Each text frame is decided with its method: denied ones are answered
	// with a JSON-RPC error and never reach the agent.
	ws, err := dialWS(t, wsURL(d, "mock")+"?access_token=admin-tok")
	if err != nil || ws.Resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("admin's upgrade: %v %v", ws, err)
	}
	defer ws.Close()
	ws.send(t, policyInit)
	if got := ws.readText(t, 10*time.Second); !strings.Contains(got, `"id":1`) || strings.Contains(got, `"error"`) {
		t.Fatalf("initialize: %s", got)
	}
	ws.send(t, `{"jsonrpc":"2.0","id":2,"method":"terminal/create","params":{}}`)
	ws.send(t, `{"jsonrpc":"2.0","id":3,"method":"x/echo","params":{}}`)
	var denied, echoed bool
	for !denied || !echoed {
		got := ws.readText(t, 10*time.Second)
		switch {
		case strings.Contains(got, `"id":2`) && strings.Contains(got, `"error"`):
			denied = true
		case strings.Contains(got, `"id":3`) && strings.Contains(got, `"echoedMethod":"x/echo"`):
			echoed = true
		case strings.Contains(got, "terminal/create"):
			t.Fatalf("a denied frame reached the agent: %s", got)
		default:
			t.Fatalf("unexpected frame: %s", got)
		}
	}
	if st, _, b := d.Do("DELETE", "/acp/mock", nil, "Acp-Connection-Id", id, "Authorization", "Bearer admin-tok"); st != 202 {
		t.Errorf("admin's DELETE: %d %s", st, b)
	}
}

// TestPolicyReadOnlyOpenCode: through /opencode a read-only token may do
// what it may through /v1, no more. A prompt to a session whose agent
// does not run starts the agent: that is acp.start, which the viewer may
// not do (through /v1 it may only talk to an instance already running).
func TestPolicyReadOnlyOpenCode(t *testing.T) {
	t.Parallel()
	d := policyDaemon(t, "readonly", `{"tokens": {"viewer": "viewer-1"}}`, withAdminFile(t)...)
	var s struct{ ID string }
	st, _, b := d.Do("POST", "/opencode/session", []byte(`{}`), "Content-Type", "application/json", "Authorization", "Bearer admin-tok")
	if st != 200 || json.Unmarshal(b, &s) != nil || s.ID == "" {
		t.Fatalf("admin creates a session: %d %s", st, b)
	}
	prompt := `{"parts":[{"type":"text","text":"hi"}]}`
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("opencode:viewer"))
	check(t, d, []policyCheck{
		{name: "viewer may not create a session", token: "viewer", method: "POST", path: "/opencode/session", body: `{}`, headers: jsonCT, status: 403},
		{name: "viewer may not start the session's agent by a prompt", token: "viewer", method: "POST", path: "/opencode/session/" + s.ID + "/message", body: prompt, headers: jsonCT, status: 403,
			msg: "read-only token: acp.send+acp.start is not allowed"},
		{name: "nor asynchronously", token: "viewer", method: "POST", path: "/opencode/session/" + s.ID + "/prompt_async", body: prompt, headers: jsonCT, status: 403},
		{name: "nor by a command", token: "viewer", method: "POST", path: "/opencode/session/" + s.ID + "/command", body: `{"command":"x"}`, headers: jsonCT, status: 403},
		{name: "nor with OpenCode's password", method: "POST", path: "/opencode/session/" + s.ID + "/message", body: prompt, headers: []string{"Content-Type", "application/json", "Authorization", basic}, status: 403},
		{name: "nor naming another agent", token: "viewer", method: "POST", path: "/opencode/session/" + s.ID + "/message", body: `{"model":{"providerID":"claude","modelID":"x"},"parts":[{"type":"text","text":"hi"}]}`, headers: jsonCT, status: 403},
	})
	if n := len(serversAs(t, d, "admin-tok")); n != 0 {
		t.Fatalf("the viewer's prompts started %d instances", n)
	}
	check(t, d, []policyCheck{
		{name: "admin prompts (starts the agent)", token: "admin-tok", method: "POST", path: "/opencode/session/" + s.ID + "/message", body: prompt, headers: jsonCT, status: 200},
		{name: "viewer prompts the running agent", token: "viewer", method: "POST", path: "/opencode/session/" + s.ID + "/message", body: prompt, headers: jsonCT, status: 200},
		{name: "viewer reads the messages", token: "viewer", method: "GET", path: "/opencode/session/" + s.ID + "/message", status: 200},
		{name: "viewer may not delete the session", token: "viewer", method: "DELETE", path: "/opencode/session/" + s.ID, status: 403},
	})
}

// serversAs lists the daemon's ACP instances with a token.
func serversAs(t *testing.T, d *harness.Daemon, token string) []harness.ServerInfo {
	t.Helper()
	st, _, b := d.Do("GET", "/v1/acp", nil, "Authorization", "Bearer "+token)
	var doc struct{ Servers []harness.ServerInfo }
	if st != 200 || json.Unmarshal(b, &doc) != nil {
		t.Fatalf("GET /v1/acp: %d %s", st, b)
	}
	return doc.Servers
}
