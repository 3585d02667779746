package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/proc"
)

// An attacker's sweep of authentication, end to end: how the daemon reads
// a presented credential (what the token check and a policy each take
// from it), where a token may travel, what a reload revokes and when.

// rawStatus sends head (request line and headers, without the final blank
// line) on a fresh connection and returns the answer's status.
func rawStatus(t *testing.T, d *harness.Daemon, head string) int {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(d.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	go func() { _, _ = io.WriteString(c, head+"\r\nConnection: close\r\n\r\n") }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%.60q: %v", head, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestAuthorizationForms: the token check and the policies read one form,
// "Bearer <token>" (as the reference does: "bearer", two spaces, a tab are
// 401 there too). The readonly policy's viewer token is the probe for the
// policies: its SDK once read "bearer viewer" and "Bearer  viewer" as the
// viewer's token, granting what the check would refuse for the admin's.
func TestAuthorizationForms(t *testing.T) {
	t.Parallel()
	d := policyDaemon(t, "readonly", `{"tokens": {"viewer": "viewer-1"}}`, withAdminFile(t)...)
	for _, tok := range []string{"admin-tok", "viewer"} {
		for _, c := range []struct {
			form   string
			status int
		}{
			{"Bearer %s", 200},
			{"Bearer %s   ", 200}, // trailing whitespace is not part of a field value
			{"bearer %s", 401},
			{"BEARER %s", 401},
			{"Bearer  %s", 401},
			{"Bearer\t%s", 401},
			{"Bearer %s, Bearer mallory", 401},
			{"Bearer mallory, Bearer %s", 401},
			{"Bearer %s mallory", 401},
			{"%s", 401},
			{"Basic %s", 401},
			{"Token %s", 401},
			{"Bearer %s\xff", 401},   // invalid UTF-8
			{"Bearer %s\u00e9", 401}, // non-ASCII
			{"Bearer\r\n %s", 200},   // obs-fold: HTTP/1.1 reads it as one space (RFC 9112 5.2)
		} {
			head := "GET /v1/fs/entries?path=. HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: " + fmt.Sprintf(c.form, tok)
			if st := rawStatus(t, d, head); st != c.status {
				t.Errorf("Authorization: %q: %d, want %d", fmt.Sprintf(c.form, tok), st, c.status)
			}
		}
	}
	for _, c := range []struct {
		name, head string
		status     int
	}{
		{"NUL in the token", "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer admin-tok\x00", 400},
		{"CR in the token", "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer admin\rtok", 400},
		{"1 MiB Authorization", "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + strings.Repeat("a", 1<<20), 401},
		{"2 MiB Authorization", "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + strings.Repeat("a", 2<<20), 431},
		{"two Authorization headers", "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer admin-tok\r\nauthorization: Bearer admin-tok", 400},
		{"a token in the query", "GET /v1/health?token=admin-tok HTTP/1.1\r\nHost: 127.0.0.1", 401},
		{"access_token outside the sockets", "GET /v1/health?access_token=admin-tok HTTP/1.1\r\nHost: 127.0.0.1", 401},
		{"the token in a cookie", "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: token=admin-tok", 401},
		{"X-HTTP-Method-Override is no method", "POST /v1/fs/mkdir?path=over HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer viewer\r\nX-HTTP-Method-Override: GET\r\nContent-Length: 0", 403},
	} {
		if st := rawStatus(t, d, c.head); st != c.status {
			t.Errorf("%s: %d, want %d", c.name, st, c.status)
		}
	}
	// A WebSocket upgrade takes ?access_token= (browsers cannot set
	// headers); a subprotocol is no credential.
	base := "ws" + strings.TrimPrefix(d.URL, "http")
	for _, c := range []struct {
		name, path string
		headers    []string
		status     int
	}{
		{"access_token", "/acp/mock?access_token=admin-tok", nil, 101},
		{"a wrong access_token", "/acp/mock?access_token=mallory", nil, 401},
		{"token= is not read", "/acp/mock?token=admin-tok", nil, 401},
		{"a subprotocol is no token", "/acp/mock", []string{"Sec-WebSocket-Protocol", "admin-tok"}, 401},
		{"nor a bearer subprotocol", "/acp/mock", []string{"Sec-WebSocket-Protocol", "bearer, admin-tok"}, 401},
	} {
		ws, err := dialWS(t, base+c.path, c.headers...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if ws.Resp.StatusCode != c.status {
			t.Errorf("%s: %d, want %d", c.name, ws.Resp.StatusCode, c.status)
		}
		ws.Close()
	}
	// No token, right or wrong, from a header or a URL, is in the logs
	// (at debug level here) or in the metrics' labels.
	_, _, metrics := d.Do("GET", "/metrics", nil, "Authorization", "Bearer admin-tok")
	for _, secret := range []string{"admin-tok", "mallory"} {
		if strings.Contains(d.Logs(), secret) {
			t.Errorf("%q is in the daemon's log", secret)
		}
		if strings.Contains(string(metrics), secret) {
			t.Errorf("%q is in /metrics", secret)
		}
	}
	if _, err := os.Stat(filepath.Join(d.Home, "over")); err == nil {
		t.Error("a POST overridden to GET made a directory with the viewer's token")
	}
}

// TestReloadRevokesStreams: a token taken out of the token file stops
// working at once for new requests, and for what it opened before: its
// event stream ends, its terminal WebSocket closes with 1008; another
// token's stream goes on.
func TestReloadRevokesStreams(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("tok-a\ntok-b\n")
	d := harness.Start(t, harness.Options{Args: []string{"--token-file", file, "--metrics-public"}})
	if st, msg := acpPost(d, "tok-a", "/v1/acp/s?agent=mock", policyInit); st != 200 {
		t.Fatalf("start: %d %s", st, msg)
	}
	a := d.Stream("/v1/acp/s", "Authorization", "Bearer tok-a")
	defer a.Close()
	b := d.Stream("/v1/acp/s", "Authorization", "Bearer tok-b")
	defer b.Close()
	for _, s := range []*harness.Stream{a, b} {
		s.Until(t, 10*time.Second, func(ev harness.Event) bool { return strings.Contains(ev.Data, `"id":1`) })
	}
	st, _, raw := d.Do("POST", "/v1/processes", []byte(`{"command":"sh","tty":true}`), "Authorization", "Bearer tok-a", "Content-Type", "application/json")
	var p procInfo
	if err := json.Unmarshal(raw, &p); st != 200 || err != nil {
		t.Fatalf("create tty: %d %s", st, raw)
	}
	ws, err := dialWS(t, "ws"+strings.TrimPrefix(d.URL, "http")+"/v1/processes/"+p.ID+"/terminal/ws?access_token=tok-a")
	if err != nil || ws.Resp.StatusCode != 101 {
		t.Fatalf("terminal: %v %+v", err, ws.Resp)
	}
	if got := ws.readText(t, 10*time.Second); !strings.Contains(got, `"ready"`) {
		t.Fatalf("terminal's first frame: %s", got)
	}
	logs := d.Stream("/v1/processes/"+p.ID+"/logs?follow=true", "Authorization", "Bearer tok-a")
	defer logs.Close()

	before := harness.MetricSum(d.Metrics(), "sandbox_agent_reloads_total", "what", "tokens", "result", "ok")
	write("tok-b\n")
	if err := d.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, "the reload", func() bool {
		return harness.MetricSum(d.Metrics(), "sandbox_agent_reloads_total", "what", "tokens", "result", "ok") > before
	})
	// At once: no grace for new requests.
	if st, _ := call(d, "tok-a", "GET", "/v1/health", ""); st != 401 {
		t.Errorf("tok-a after the reload: %d", st)
	}
	if st, _ := call(d, "tok-b", "GET", "/v1/health", ""); st != 200 {
		t.Errorf("tok-b after the reload: %d", st)
	}
	// tok-a's streams end; tok-b's goes on.
	for name, s := range map[string]*harness.Stream{"ACP event stream": a, "process log stream": logs} {
		done := make(chan error, 1)
		go func() {
			for {
				if _, err := s.Next(); err != nil {
					done <- err
					return
				}
			}
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("tok-a's %s is still open 10 s after the reload", name)
		}
	}
	if st, msg := acpPost(d, "tok-b", "/v1/acp/s", `{"jsonrpc":"2.0","id":2,"method":"x/echo","params":{}}`); st != 200 {
		t.Fatalf("echo: %d %s", st, msg)
	}
	b.Until(t, 10*time.Second, func(ev harness.Event) bool { return strings.Contains(ev.Data, `"id":2`) })
	// tok-a's terminal closes with 1008.
	for {
		_, _, err := ws.read(10 * time.Second)
		if err == nil {
			continue // output or frames sent before the close
		}
		if ce, ok := err.(*errClosed); !ok || ce.code != 1008 || !strings.Contains(ce.reason, "revoked") {
			t.Errorf("tok-a's terminal after the reload: %v, want a 1008 close", err)
		}
		break
	}
	waitLog(t, d, "stream ended: no longer authorised")
}

// TestSIGHUPStorm: reloads of the token file and of a policy, sent as
// fast as they go while requests flow, never fail a request that should
// pass in both the old and the new state, never let one through that
// neither allows, and leave the daemon on the last file's tokens.
func TestSIGHUPStorm(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens")
	write := func(s string) {
		if err := os.WriteFile(file+".new", []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(file+".new", file); err != nil { // as editors and config managers replace a file
			t.Fatal(err)
		}
	}
	write("stable\nflip\n")
	cfg := filepath.Join(dir, "deny.json")
	os.WriteFile(cfg, []byte(`{"deny": ["terminal/*"]}`), 0o600)
	d := harness.Start(t, harness.Options{Env: policyCacheEnv(), Args: []string{"--token-file", file,
		"--policy", policyWasm(t, "denymethods") + ",config=" + cfg + ",timeout=2s", "--log-level", "info"}})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	bad := map[string]int{}
	for _, tok := range []string{"stable", "flip", "mallory"} {
		wg.Go(func() {
			client := &http.Client{Timeout: 30 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("GET", d.URL+"/v1/health", nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := client.Do(req)
				if err != nil {
					mu.Lock()
					bad[tok+": "+err.Error()]++
					mu.Unlock()
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				ok := resp.StatusCode == 200 && tok == "stable" ||
					(resp.StatusCode == 200 || resp.StatusCode == 401) && tok == "flip" ||
					resp.StatusCode == 401 && tok == "mallory"
				if !ok {
					mu.Lock()
					bad[fmt.Sprintf("%s: %d", tok, resp.StatusCode)]++
					mu.Unlock()
				}
			}
		})
	}
	for i := range 60 {
		if i%2 == 0 {
			write("stable\n")
		} else {
			write("stable\nflip\n")
		}
		if err := d.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 { // a request's round trip paces the storm
			call(d, "stable", "GET", "/v1/health", "")
		}
	}
	// The last file holds "stable" only; once a reload has read it, flip
	// is refused.
	write("stable\n")
	if err := d.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 20*time.Second, "flip refused after the last reload", func() bool {
		st, _ := call(d, "flip", "GET", "/v1/health", "")
		return st == 401
	})
	close(stop)
	wg.Wait()
	for k, n := range bad {
		t.Errorf("%s: %d times", k, n)
	}
	select {
	case <-d.Done():
		t.Fatal("the daemon died in the storm")
	default:
	}
	if st, _ := call(d, "stable", "GET", "/v1/health", ""); st != 200 {
		t.Errorf("stable after the storm: %d", st)
	}
	if strings.Contains(d.Logs(), "keeping the previous") {
		t.Errorf("a reload failed in the storm:\n%s", harness.Tail(d.Logs(), 40))
	}
}

// fixtureWasm builds the policy host's test fixture
// (extensions/wasmpolicy/testdata/fixture): one Go policy that behaves,
// per request, as the x-fixture header says: panic, loop, hog (allocate
// without end), flood (a million log lines), deny, or pass.
func fixtureWasm(t testing.TB) string {
	t.Helper()
	policyMu.Lock()
	defer policyMu.Unlock()
	const key = "testdata/fixture"
	if p, ok := policyBuilt[key]; ok {
		return p
	}
	out := filepath.Join(filepath.Dir(harness.Binary), "fixture.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, ".")
	cmd.Dir = filepath.Join("..", "extensions", "wasmpolicy", "testdata", "fixture")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the fixture policy: %v\n%s", err, b)
	}
	policyBuilt[key] = out
	return out
}

// TestPolicyHostile: a policy that panics, loops, eats its memory or
// floods the log, under concurrent requests. Each such request is denied
// (403, fail closed; never let through), the others are decided as the
// policy says, the daemon stays up with its memory and log bounded, and a
// normal request works afterwards. policy test fails such a policy.
func TestPolicyHostile(t *testing.T) {
	t.Parallel()
	spec := fixtureWasm(t) + ",timeout=300ms,memory=32,instances=2"
	d := harness.Start(t, harness.Options{Env: policyCacheEnv(), Args: withAdminFile(t, "--policy", spec, "--log-level", "info")})
	want := map[string]int{"panic": 403, "loop": 403, "hog": 403, "flood": 200, "deny": 451, "": 200}
	modes := []string{"panic", "loop", "hog", "flood", "deny", ""}
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]map[int]int{}
	for w := range 4 {
		wg.Go(func() {
			for i := range 12 {
				mode := modes[(w+i)%len(modes)]
				st, _ := call(d, "admin-tok", "GET", "/v1/health", "", "X-Fixture", mode)
				mu.Lock()
				if got[mode] == nil {
					got[mode] = map[int]int{}
				}
				got[mode][st]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for mode, sts := range got {
		for st, n := range sts {
			// A flood may pass its time limit on a loaded machine: it
			// is then denied, as a loop is.
			if st != want[mode] && !(mode == "flood" && st == 403) {
				t.Errorf("mode %q: %d requests answered %d, want %d", mode, n, st, want[mode])
			}
		}
	}
	select {
	case <-d.Done():
		t.Fatal("the daemon died")
	default:
	}
	if st, _ := call(d, "admin-tok", "GET", "/v1/health", ""); st != 200 {
		t.Errorf("a normal request after the storm: %d", st)
	}
	if hwm, err := proc.StatusKiB(d.Cmd.Process.Pid, "VmHWM"); err != nil || hwm > 1<<20 {
		t.Errorf("the daemon's peak RSS: %d KiB (%v); 2 instances of 32 MiB each should stay far below 1 GiB", hwm, err)
	}
	// 8 flood requests of 1M+ lines each: at most 100 lines per call, and
	// one saying how many were dropped.
	if n := strings.Count(d.Logs(), "\n"); n > 8*(100+1)+2000 {
		t.Errorf("the daemon logged %d lines", n)
	}
	if !strings.Contains(d.Logs(), "policy log lines dropped") {
		t.Error("no record of the dropped log lines")
	}

	// policy test reports the failures instead of passing "want deny".
	cases := filepath.Join(t.TempDir(), "cases.json")
	os.WriteFile(cases, []byte(`[
	  {"name": "panics", "request": {"method": "GET", "headers": {"x-fixture": ["panic"]}}, "want": {"decision": "deny"}},
	  {"name": "passes", "request": {"method": "GET"}, "want": {"decision": "pass"}}
	]`), 0o600)
	cmd := exec.Command(harness.Binary, "policy", "test", fixtureWasm(t), cases)
	cmd.Env = append(os.Environ(), policyCacheEnv()...)
	out, err := runBounded(cmd, time.Minute)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 ||
		!strings.Contains(out, "FAIL  panics: policy fixture failed: ") || !strings.Contains(out, "denied (fail closed)") || !strings.Contains(out, "ok    passes") {
		t.Errorf("policy test of a panicking policy: %v\n%s", err, out)
	}
}

// TestPolicyFilesRefused: module files that are no policy stop the daemon
// at start and fail policy test, each with its reason.
func TestPolicyFilesRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{}
	for name, content := range map[string]string{"empty": "", "script": "#!/bin/sh\n", "truncated": "\x00asm\x01\x00\x00\x00\x01"} {
		p := filepath.Join(dir, name+".wasm")
		os.WriteFile(p, []byte(content), 0o600)
		files[name] = p
	}
	huge := filepath.Join(dir, "huge.wasm")
	os.WriteFile(huge, []byte("\x00asm\x01\x00\x00\x00"), 0o600)
	if err := os.Truncate(huge, 1<<30); err != nil { // 1 GiB, sparse
		t.Fatal(err)
	}
	files["huge"] = huge
	cfg := filepath.Join(dir, "nested.json")
	os.WriteFile(cfg, []byte(strings.Repeat("[", 100000)+strings.Repeat("]", 100000)), 0o600)
	files["nested config"] = fixtureWasm(t) + ",config=" + cfg
	bigCfg := filepath.Join(dir, "big.json")
	os.WriteFile(bigCfg, []byte(`{"x":"`+strings.Repeat("a", 5<<20)+`"}`), 0o600)
	files["5 MiB config"] = fixtureWasm(t) + ",config=" + bigCfg
	cases := filepath.Join(dir, "cases.json")
	os.WriteFile(cases, []byte(`[{"request": {"method": "GET"}, "want": {"decision": "pass"}}]`), 0o600)
	for name, reason := range map[string]string{
		"empty": "the module file is empty", "script": "not a WebAssembly module", "truncated": "compile",
		"huge": "too large: 1073741824 bytes, the limit is 67108864", "nested config": "configure", "5 MiB config": "too large",
	} {
		cmd := exec.Command(harness.Binary, "server", "--port", "0", "--policy", files[name])
		cmd.Env = append(os.Environ(), append(policyCacheEnv(), "HOME="+t.TempDir())...)
		if out, err := runBounded(cmd, time.Minute); err == nil || !strings.Contains(out, reason) {
			t.Errorf("server with the %s policy: %v, want it refused naming %q\n%s", name, err, reason, harness.Tail(out, 5))
		}
		cmd = exec.Command(harness.Binary, "policy", "test", files[name], cases)
		cmd.Env = append(os.Environ(), policyCacheEnv()...)
		if out, err := runBounded(cmd, time.Minute); err == nil || !strings.Contains(out, reason) {
			t.Errorf("policy test of the %s policy: %v, want it refused naming %q\n%s", name, err, reason, harness.Tail(out, 5))
		}
	}
}
