package httpclient_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

var (
	daemonURL string // the daemon TestMain runs for the examples
	routerURL string // a stand-in router in front of it (routerStandIn)
	binary    string // the sandbox-agent binary TestMain built
)

// TestMain builds sandbox-agent and runs one daemon on a free loopback port
// with a scratch HOME, for the examples: they show real calls against a
// real daemon and their output is checked.
func TestMain(m *testing.M) {
	os.Exit(runWithDaemon(m))
}

func runWithDaemon(m *testing.M) int {
	dir, err := os.MkdirTemp("", "httpclient-example-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "sandbox-agent")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/sandbox-agent")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building sandbox-agent:", err)
		return 1
	}
	binary = bin
	home := filepath.Join(dir, "home")
	_ = os.Mkdir(home, 0o755)
	addr, stop, err := startDaemon(home, nil, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	daemonURL = addr
	router := httptest.NewServer(routerStandIn(addr))
	defer router.Close()
	routerURL = router.URL
	return m.Run()
}

// routerStandIn stands for agent-sandbox's sandbox-router in front of the
// daemon at target, for ExampleRouter: it checks the router's own token
// and the sandbox's address, drops Authorization, and passes the request
// on; anything else is refused as the router would.
func routerStandIn(target string) http.Handler {
	u, _ := url.Parse(target)
	proxy := httputil.NewSingleHostReverseProxy(u)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer router-token" || r.Header.Get("X-Sandbox-ID") != "my-sandbox" ||
			r.Header.Get("X-Sandbox-Port") != "8888" || r.Header.Get("X-Sandbox-Agent-Token") != "daemon-token" {
			http.Error(w, "not for this router", http.StatusForbidden)
			return
		}
		r.Header.Del("Authorization")
		proxy.ServeHTTP(w, r)
	})
}

// startDaemon runs `sandbox-agent server` on a free loopback port with
// home as its HOME and working directory, and the extra flags and
// environment given; it returns once the daemon answers, with its URL and
// a function stopping it.
func startDaemon(home string, args, env []string) (addr string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(binary, append([]string{"server", "--port", fmt.Sprint(port), "--log-level", "warn"}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, ".local", "share"),
		"SANDBOX_AGENT_ACP_REGISTRY_URL=http://127.0.0.1:9/registry.json")
	cmd.Env = append(cmd.Env, env...)
	cmd.Dir = home
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
	addr = fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(15 * time.Second); ; {
		resp, err := http.Get(addr + "/")
		if err == nil {
			resp.Body.Close()
			return addr, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("daemon did not start: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
