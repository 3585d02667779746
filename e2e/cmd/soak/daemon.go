package main

import (
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/proc"
)

type daemon struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
}

func start(work, agents string) (*daemon, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	cmd := exec.Command(filepath.Join(work, "sandbox-agent"), "server", "--host", "127.0.0.1", "--port", port,
		"--agents-file", agents, "--log-level", "error", "--stop-grace", "1s",
		"--stdin-write-timeout", "2s", "--stream-write-timeout", "3s")
	cmd.Env = append(os.Environ(), "HOME="+work, "XDG_DATA_HOME="+filepath.Join(work, "data"),
		"SANDBOX_AGENT_ACP_REQUEST_TIMEOUT_MS=3000", "SANDBOX_AGENT_ACP_REGISTRY_URL=http://127.0.0.1:9/registry.json")
	cmd.Dir = work
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &daemon{url: "http://127.0.0.1:" + port, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(d.done) }()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(d.url + "/v1/health"); err == nil {
			resp.Body.Close()
			return d, nil
		}
	}
	return nil, errors.New("daemon did not start")
}

// describeFDs lists what the daemon's descriptors point at, for a report.
func describeFDs(pid int) string {
	fds, _ := proc.FDs(pid)
	var out []string
	for _, fd := range fds {
		out = append(out, fd.Num+"→"+fd.Target)
	}
	return strings.Join(out, " ")
}
