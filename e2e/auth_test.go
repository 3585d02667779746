package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// Browser safety and tokens off the command line, end to end.

// The no-cors attacks of issue 11: a page on another site cannot change
// anything on a daemon without a token, and DNS rebinding is refused.
func TestBrowserSafety(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: []string{"-O", "https://app.example"}})
	evil := []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}
	for _, c := range []struct {
		name, method, path, body string
		headers                  []string
		status                   int
		kind                     string
	}{
		// fetch(D+"/v1/fs/mkdir?path=…", {method: "POST", mode: "no-cors"})
		{"no-cors mkdir", "POST", "/v1/fs/mkdir?path=pwned", "", evil, 403, "permission_denied"},
		// fetch(D+"/v1/fs/move", {method: "POST", mode: "no-cors", body: blob}): no Content-Type
		{"no-cors move", "POST", "/v1/fs/move", `{"from":"a","to":"b"}`, evil, 403, "permission_denied"},
		{"move without Content-Type", "POST", "/v1/fs/move", `{"from":"a","to":"b"}`, nil, 415, "unsupported_media_type"},
		{"no-cors install", "POST", "/v1/agents/mock/install", "", evil, 403, "permission_denied"},
		{"no-cors ACP start", "POST", "/v1/acp/p?agent=mock", policyInit, append([]string{"Content-Type", "text/plain"}, evil...), 403, "permission_denied"},
		{"text/plain ACP start", "POST", "/v1/acp/p?agent=mock", policyInit, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type"},
		{"DNS rebinding", "GET", "/v1/health", "", []string{"Host", "attacker.example"}, 421, "invalid_request"},
		{"DNS rebinding on the inspector", "GET", "/ui/", "", []string{"Host", "attacker.example:2468"}, 421, "invalid_request"},
		{"-O origin", "POST", "/v1/fs/mkdir?path=from-app", "", []string{"Origin", "https://app.example", "Sec-Fetch-Site", "cross-site"}, 200, ""},
		{"the inspector's own origin", "POST", "/v1/fs/mkdir?path=from-ui", "", []string{"Origin", d.URL, "Sec-Fetch-Site", "same-origin"}, 200, ""},
		{"the inspector via localhost", "POST", "/v1/fs/mkdir?path=from-localhost", "", []string{"Host", "localhost:" + port(d), "Origin", "http://localhost:" + port(d)}, 200, ""},
		{"the inspector page", "GET", "/ui/", "", []string{"Host", "localhost:" + port(d)}, 200, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, h, b := doHost(d, c.method, c.path, c.body, c.headers...)
			if st != c.status {
				t.Fatalf("status %d, want %d: %s", st, c.status, b)
			}
			if c.kind != "" {
				var p struct{ Type string }
				if json.Unmarshal(b, &p); h.Get("Content-Type") != "application/problem+json" || p.Type != "urn:sandbox-agent:error:"+c.kind {
					t.Errorf("%s %s", h.Get("Content-Type"), b)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(d.Home, "pwned")); err == nil {
		t.Error("the cross-site mkdir took effect")
	}
	if _, err := os.Stat(filepath.Join(d.Home, "from-ui")); err != nil {
		t.Errorf("the inspector's mkdir did not: %v", err)
	}
}

func port(d *harness.Daemon) string { return d.URL[strings.LastIndexByte(d.URL, ':')+1:] }

// doHost is Daemon.Do with a settable Host header.
func doHost(d *harness.Daemon, method, path, body string, headers ...string) (int, http.Header, []byte) {
	d.T().Helper()
	req, err := http.NewRequest(method, d.URL+path, strings.NewReader(body))
	if err != nil {
		d.T().Fatal(err)
	}
	if body == "" {
		req.Body = http.NoBody
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.T().Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// Headers over the limit get a problem, not net/http's text/plain.
func TestHeadersTooLarge(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	c, err := net.Dial("tcp", strings.TrimPrefix(d.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		io.WriteString(c, "GET /v1/health HTTP/1.1\r\nHost: localhost\r\nX-Big: ")
		io.WriteString(c, strings.Repeat("a", 2<<20))
		io.WriteString(c, "\r\n\r\n")
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	var p struct {
		Type    string
		Details map[string]any
	}
	_ = json.Unmarshal(b, &p)
	if resp.StatusCode != 431 || resp.Header.Get("Content-Type") != "application/problem+json" ||
		p.Type != "urn:sandbox-agent:error:invalid_request" || p.Details["limitBytes"] != float64(1<<20) {
		t.Errorf("%d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
}

// --token-file: one token per line, all accepted, reloaded on SIGHUP; a
// reload that fails keeps the previous tokens. A missing or empty file
// stops the daemon at start.
func TestTokenFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("# team\nalpha\n\n  beta  \n")
	d := harness.Start(t, harness.Options{Args: []string{"--token-file", file}})
	check(t, d, []policyCheck{
		{name: "first", token: "alpha", method: "GET", path: "/v1/health", status: 200},
		{name: "second", token: "beta", method: "GET", path: "/v1/health", status: 200},
		{name: "metrics too", token: "beta", method: "GET", path: "/metrics", status: 200},
		{name: "comment is no token", token: "# team", method: "GET", path: "/v1/health", status: 401},
		{name: "none", method: "GET", path: "/metrics", status: 401},
	})
	write("gamma\n")
	d.Cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, d, "token file reloaded")
	check(t, d, []policyCheck{
		{name: "new token", token: "gamma", method: "GET", path: "/v1/health", status: 200},
		{name: "old token gone", token: "alpha", method: "GET", path: "/v1/health", status: 401},
	})
	write("")
	d.Cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, d, "keeping the previous tokens")
	check(t, d, []policyCheck{{name: "kept", token: "gamma", method: "GET", path: "/v1/health", status: 200}})

	for name, path := range map[string]string{"missing": filepath.Join(t.TempDir(), "nope"), "empty": file} {
		cmd := exec.Command(harness.Binary, "server", "--port", "0", "--token-file", path)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		if out, err := runBounded(cmd, 30*time.Second); err == nil || !strings.Contains(out, "--token-file") {
			t.Errorf("%s token file: %v\n%s", name, err, out)
		}
	}
	cmd := exec.Command(harness.Binary, "server", "--port", "0", "--token-file", file, "--token", "x")
	if out, err := runBounded(cmd, 30*time.Second); err == nil || !strings.Contains(out, "cannot be combined") {
		t.Errorf("--token with --token-file: %v\n%s", err, out)
	}
}

// SANDBOX_AGENT_TOKEN works like --token, and no agent inherits it, nor
// learns the token file.
func TestTokenNotInherited(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	agents := filepath.Join(home, "agents.json")
	self := harness.Binary
	doc := `{"agents":[{"id":"envdump","command":"/bin/sh","args":["-c","env > \"$HOME/agent-env\"; exec ` + self + ` mock-agent-process"]}]}`
	if err := os.WriteFile(agents, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	d := harness.Start(t, harness.Options{Home: home, Args: []string{"--agents-file", agents}, Env: []string{"SANDBOX_AGENT_TOKEN=env-secret-tok"}})
	if st, msg := call(d, "", "GET", "/v1/health", ""); st != 401 {
		t.Fatalf("without the token: %d %s", st, msg)
	}
	if st, msg := acpPost(d, "env-secret-tok", "/v1/acp/e?agent=envdump", policyInit); st != 200 {
		t.Fatalf("start: %d %s", st, msg)
	}
	env, err := os.ReadFile(filepath.Join(home, "agent-env"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(env), "env-secret-tok") || strings.Contains(string(env), "SANDBOX_AGENT_TOKEN") {
		t.Errorf("the agent inherited the token:\n%s", env)
	}
}

// An unauthenticated request is answered 401 without waiting for its body:
// each request below declares a megabyte of body and sends none, so a
// daemon that read the body before refusing would answer only when its
// read timed out. Without policies, and with a policy (readonly) whose
// decisions do not read the fields a body describes.
func TestUnauthenticatedBodyNotAwaited(t *testing.T) {
	t.Parallel()
	requests := []struct{ method, path, ctype string }{
		{"POST", "/v1/fs/move", "application/json"},
		{"PUT", "/v1/fs/file?path=x", "application/octet-stream"},
		{"POST", "/v1/fs/upload-batch?path=x", "application/x-tar"},
		{"PUT", "/v1/config/mcp?directory=d&mcpName=m", "application/json"},
		{"POST", "/v1/processes", "application/json"},
		{"POST", "/v1/processes/run", "application/json"},
		{"POST", "/v1/processes/config", "application/json"},
		{"POST", "/v1/processes/p1/input", "application/json"},
		{"POST", "/v1/agents/mock/install", "application/json"},
		{"POST", "/v1/acp/s1?agent=mock", "application/json"},
		{"POST", "/acp/mock", "application/json"},
	}
	for _, c := range []struct {
		name   string
		daemon func(t *testing.T) *harness.Daemon
	}{
		{"token", func(t *testing.T) *harness.Daemon {
			return harness.Start(t, harness.Options{Args: withAdminFile(t)})
		}},
		{"token and readonly policy", func(t *testing.T) *harness.Daemon {
			return policyDaemon(t, "readonly", `{"tokens": {"viewer": "viewer-1"}}`, withAdminFile(t)...)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := c.daemon(t)
			for _, r := range requests {
				for _, auth := range []string{"", "Authorization: Bearer wrong\r\n"} {
					conn, err := net.Dial("tcp", strings.TrimPrefix(d.URL, "http://"))
					if err != nil {
						t.Fatal(err)
					}
					_, err = io.WriteString(conn, r.method+" "+r.path+" HTTP/1.1\r\nHost: "+strings.TrimPrefix(d.URL, "http://")+
						"\r\nContent-Type: "+r.ctype+"\r\nContent-Length: 1048576\r\n"+auth+"\r\n")
					if err != nil {
						t.Fatal(err)
					}
					_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
					resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
					switch {
					case err != nil:
						t.Errorf("%s %s (%q): no answer without the body: %v", r.method, r.path, auth, err)
					case resp.StatusCode != http.StatusUnauthorized:
						t.Errorf("%s %s (%q): status %d, want 401", r.method, r.path, auth, resp.StatusCode)
					}
					conn.Close()
				}
			}
		})
	}
}

// -n (the reference's "disable auth", which the SDK's sandbox launchers
// pass) does not open a daemon that was given a token: the variable's
// token still guards every route, and the log says -n was ignored.
func TestNoTokenFlagKeepsAGivenToken(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: []string{"--no-token"}, Env: []string{"SANDBOX_AGENT_TOKEN=env-tok"}})
	if st, msg := call(d, "", "GET", "/v1/agents", ""); st != 401 {
		t.Fatalf("without the token: %d %s", st, msg)
	}
	if st, msg := call(d, "env-tok", "GET", "/v1/agents", ""); st != 200 {
		t.Fatalf("with the token: %d %s", st, msg)
	}
	if !strings.Contains(d.Logs(), "--no-token ignored") {
		t.Errorf("no warning that --no-token was ignored in the log:\n%s", d.Logs())
	}
}

// Two Authorization headers are a 400, whichever holds the token: the
// token check reads one and a policy could read the other. One is judged
// as ever.
func TestTwoAuthorizationHeaders(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Env: []string{"SANDBOX_AGENT_TOKEN=tok"}})
	send := func(values ...string) (int, string) {
		req, _ := http.NewRequest("GET", d.URL+"/v1/agents", nil)
		for _, v := range values {
			req.Header.Add("Authorization", v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, pair := range [][]string{{"Bearer tok", "Bearer other"}, {"Bearer other", "Bearer tok"}, {"Bearer tok", "Bearer tok"}} {
		if st, b := send(pair...); st != 400 || !strings.Contains(b, "more than one Authorization header") {
			t.Errorf("%q: %d %s", pair, st, b)
		}
	}
	if st, b := send("Bearer tok"); st != 200 {
		t.Errorf("one header: %d %s", st, b)
	}
}
