package e2e

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"io"

	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// sandboxRouter behaves as kubernetes-sigs/agent-sandbox's sandbox-router
// does in front of many sandboxes: it picks the sandbox by X-Sandbox-ID
// (here a table of daemons on loopback instead of
// <id>.<namespace>.svc.cluster.local), the port by X-Sandbox-Port (8888 by
// default), checks X-Sandbox-Namespace, and forwards the request with its
// own bearer token checked and Authorization and Host dropped. Bodies,
// event streams and WebSocket upgrades stream through
// (httputil.ReverseProxy, as a Go router would).
type sandboxRouter struct {
	*httptest.Server
	token   string            // the router's own bearer token
	sandbox map[string]string // X-Sandbox-ID -> host (without port)
}

func newSandboxRouter(t *testing.T, token string, sandboxes map[string]*harness.Daemon) *sandboxRouter {
	t.Helper()
	r := &sandboxRouter{token: token, sandbox: map[string]string{}}
	for id, d := range sandboxes {
		u, err := url.Parse(d.URL)
		if err != nil {
			t.Fatal(err)
		}
		r.sandbox[id] = u.Hostname()
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			port := pr.In.Header.Get("X-Sandbox-Port")
			port = cmp.Or(port, "8888")
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = net.JoinHostPort(r.sandbox[pr.In.Header.Get("X-Sandbox-ID")], port)
			pr.Out.Host = "" // Host dropped: the outbound request names the sandbox
			pr.Out.Header.Del("Authorization")
		},
		FlushInterval: -1,
	}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != "Bearer "+r.token {
			http.Error(w, `{"detail":"router: unauthorized"}`, http.StatusUnauthorized)
			return
		}
		if _, ok := r.sandbox[req.Header.Get("X-Sandbox-ID")]; !ok {
			http.Error(w, `{"detail":"X-Sandbox-ID header is required."}`, http.StatusBadRequest)
			return
		}
		if ns := req.Header.Get("X-Sandbox-Namespace"); ns != "" && ns != "default" {
			http.Error(w, `{"detail":"no such namespace"}`, http.StatusNotFound)
			return
		}
		if p := req.Header.Get("X-Sandbox-Port"); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				http.Error(w, `{"detail":"Invalid port format."}`, http.StatusBadRequest)
				return
			}
		}
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

// routed are the headers a client of the router sends to reach daemon d
// (sandbox id) with the daemon's token in X-Sandbox-Agent-Token.
func routed(r *sandboxRouter, id string, d *harness.Daemon, daemonToken string) []string {
	u, _ := url.Parse(d.URL)
	return []string{
		"Authorization", "Bearer " + r.token,
		"X-Sandbox-ID", id, "X-Sandbox-Namespace", "default", "X-Sandbox-Port", u.Port(),
		"X-Sandbox-Agent-Token", daemonToken,
	}
}

func routerDo(t *testing.T, method, target string, body string, headers []string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, target, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	return resp.StatusCode, string(b)
}

// TestBehindSandboxRouter: two daemons behind a router that acts as
// agent-sandbox's: the token reaches each daemon in --token-header although
// the router drops Authorization, probes need no token (--health-public),
// and requests reach the sandbox they name: plain requests, the event
// stream, a WebSocket and a file upload.
func TestBehindSandboxRouter(t *testing.T) {
	t.Parallel()
	daemons := map[string]*harness.Daemon{}
	tokens := map[string]string{"sb-a": "token-a", "sb-b": "token-b"}
	for id, tok := range tokens {
		daemons[id] = harness.Start(t, harness.Options{Args: []string{
			"--token", tok, "--token-header", "X-Sandbox-Agent-Token", "--health-public",
		}})
	}
	r := newSandboxRouter(t, "router-secret", daemons)
	hA := routed(r, "sb-a", daemons["sb-a"], "token-a")
	hB := routed(r, "sb-b", daemons["sb-b"], "token-b")

	t.Run("probe without the daemon's token", func(t *testing.T) {
		probe := hA[:len(hA)-2] // every header but the daemon's token
		if st, body := routerDo(t, "GET", r.URL+"/v1/health", "", probe); st != 200 || !strings.Contains(body, `"ok"`) {
			t.Errorf("health: %d %s", st, body)
		}
		if st, body := routerDo(t, "GET", r.URL+"/v1/acp", "", probe); st != 401 {
			t.Errorf("/v1/acp without the daemon's token: %d %s", st, body)
		}
	})

	t.Run("each sandbox gets its own token", func(t *testing.T) {
		if st, body := routerDo(t, "GET", r.URL+"/v1/acp", "", hA); st != 200 {
			t.Errorf("a: %d %s", st, body)
		}
		wrong := append(append([]string{}, hB[:len(hB)-2]...), "X-Sandbox-Agent-Token", "token-a")
		if st, _ := routerDo(t, "GET", r.URL+"/v1/acp", "", wrong); st != 401 {
			t.Errorf("b with a's token: %d", st)
		}
	})

	t.Run("ACP POST and event stream", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`
		st, body := routerDo(t, "POST", r.URL+"/v1/acp/routed?agent=mock", init, append(hB, "Content-Type", "application/json"))
		if st != 200 || !strings.Contains(body, `"id":1`) {
			t.Fatalf("post: %d %s", st, body)
		}
		// The instance lives on b, not on a.
		if !strings.Contains(string(getBody(t, daemons["sb-b"], "/v1/acp", "token-b")), `"serverId":"routed"`) ||
			strings.Contains(string(getBody(t, daemons["sb-a"], "/v1/acp", "token-a")), `"serverId":"routed"`) {
			t.Fatalf("the instance is not where X-Sandbox-ID sent it")
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", r.URL+"/v1/acp/routed", nil)
		for i := 0; i+1 < len(hB); i += 2 {
			req.Header.Set(hB[i], hB[i+1])
		}
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("stream: %d", resp.StatusCode)
		}
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("stream ended before the initialize answer: %v", err)
			}
			if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"id":1`) {
				break
			}
		}
	})

	t.Run("WebSocket", func(t *testing.T) {
		c, err := dialWS(t, "ws"+strings.TrimPrefix(r.URL, "http")+"/acp/mock", hA...)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if c.Resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade through the router: %d", c.Resp.StatusCode)
		}
		c.send(t, stdInit)
		if got := c.readText(t, 10*time.Second); !strings.Contains(got, `"id":1`) {
			t.Fatalf("initialize over the routed socket: %s", got)
		}
	})

	t.Run("Go client", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := routedClient(r, "sb-b", daemons["sb-b"], "token-b")
		if err := c.Health(ctx); err != nil {
			t.Fatalf("health: %v", err)
		}
		run, err := c.RunProcess(ctx, httpclient.ProcessRunRequest{Command: "sh", Args: []string{"-c", "echo routed-run"}})
		if err != nil || run.Stdout != "routed-run\n" {
			t.Fatalf("run: %+v %v", run, err)
		}
		p, err := c.CreateProcess(ctx, httpclient.ProcessCreateRequest{Command: "sh", TTY: true, Interactive: true})
		if err != nil {
			t.Fatal(err)
		}
		term, err := c.ConnectTerminal(ctx, p.ID)
		if err != nil {
			t.Fatalf("terminal through the router: %v", err)
		}
		if _, err := term.Write([]byte("echo routed-term; exit 3\n")); err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(term)
		if !strings.Contains(string(out), "routed-term") {
			t.Errorf("terminal output %q", out)
		}
		if code, exited := term.ExitCode(); !exited || code == nil || *code != 3 {
			t.Errorf("exit %v %v", code, exited)
		}
		term.Close()
		conn, err := c.DialACP(ctx, "routed-go", "mock", &httpclient.ACPOptions{DeleteOnClose: true})
		if err != nil {
			t.Fatalf("dial through the router: %v", err)
		}
		driveMockSession(t, conn, conn)
		conn.Close()
		// A wrong daemon token is refused by the daemon, not the router.
		bad := routedClient(r, "sb-b", daemons["sb-b"], "token-a")
		var prob *httpclient.Problem
		if _, err := bad.ListACPServers(ctx); !errors.As(err, &prob) || prob.Status != 401 || prob.Kind() != "token_invalid" {
			t.Errorf("wrong daemon token: %v", err)
		}
	})

	t.Run("stdio bridge", func(t *testing.T) {
		u, _ := url.Parse(daemons["sb-a"].URL)
		cmd := exec.Command(harness.Binary, "acp", "--endpoint", r.URL, "--agent", "mock",
			"--sandbox-id", "sb-a", "--sandbox-port", u.Port(), "--log-level", "debug")
		cmd.Env = append(os.Environ(), "SANDBOX_AGENT_TOKEN=token-a", "SANDBOX_AGENT_ROUTER_TOKEN="+r.token)
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		var stderr harness.LockedBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		defer func() {
			_ = cmd.Process.Kill()
			<-done
			if t.Failed() {
				t.Logf("bridge stderr:\n%s", harness.Tail(stderr.String(), 60))
			}
		}()
		driveMockSession(t, stdin, stdout)
		stdin.Close()
		select {
		case err := <-done:
			done <- err
			if err != nil {
				t.Fatalf("bridge exit: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("bridge did not exit after stdin closed")
		}
	})

	t.Run("file upload", func(t *testing.T) {
		content := strings.Repeat("routed bytes\n", 50000)
		target := r.URL + "/v1/fs/file?path=" + url.QueryEscape("routed.txt")
		if st, body := routerDo(t, "PUT", target, content, append(hA, "Content-Type", "application/octet-stream")); st != 200 {
			t.Fatalf("put: %d %s", st, body)
		}
		if st, body := routerDo(t, "GET", target, "", hA); st != 200 || body != content {
			t.Fatalf("get back: %d, %d bytes", st, len(body))
		}
		if st, _ := routerDo(t, "GET", target, "", hB); st != 404 {
			t.Errorf("the file is on b too: %d", st)
		}
	})
}

// routedClient is the Go client of daemon d behind r, as sandbox id.
func routedClient(r *sandboxRouter, id string, d *harness.Daemon, daemonToken string) *httpclient.Client {
	u, _ := url.Parse(d.URL)
	port, _ := strconv.Atoi(u.Port())
	return &httpclient.Client{
		BaseURL: r.URL, Token: daemonToken,
		Router: &httpclient.Router{SandboxID: id, Namespace: "default", Port: port, Token: r.token},
	}
}

func getBody(t *testing.T, d *harness.Daemon, path, token string) []byte {
	t.Helper()
	st, _, b := d.Do("GET", path, nil, "Authorization", "Bearer "+token)
	if st != 200 {
		t.Fatalf("%s: %d %s", path, st, b)
	}
	return b
}
