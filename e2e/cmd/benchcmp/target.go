package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type target struct {
	kind  string
	url   string
	cmd   *exec.Cmd
	done  chan struct{}
	home  string
	async bool // answers session/prompt with 202
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// cleanEnv is the environment without anything that would move the
// daemons' data directories or reach a registry.
func cleanEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "SANDBOX_AGENT_TOKEN":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "SANDBOX_AGENT_ACP_REGISTRY_URL=http://127.0.0.1:9/registry.json")
}

// minimalAgent is the agent id the minimal agent is launched as.
const minimalAgent = "amp"

const minimalScript = `#!/bin/sh
read -r line
printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{}}}'
exec cat >/dev/null
`

func startTarget(ctx context.Context, kind, work, bin, ref string) (*target, error) {
	home := filepath.Join(work, kind+"-home")
	launchers := filepath.Join(home, ".local", "share", "sandbox-agent", "bin", "agent_processes")
	if err := os.MkdirAll(launchers, 0o755); err != nil {
		return nil, err
	}
	script := "#!/bin/sh\nexec " + bin + " mock-agent-process \"$@\"\n"
	if err := os.WriteFile(filepath.Join(launchers, "mock-acp"), []byte(script), 0o755); err != nil {
		return nil, err
	}
	// The minimal agent (as amp, an id both daemons launch from this
	// directory): a shell that answers initialize at once. Its start
	// costs little, so its first request shows what each daemon adds to
	// a spawn; the mock's own start (the whole Go binary) dominates the
	// mock's.
	if err := os.WriteFile(filepath.Join(launchers, minimalAgent+"-acp"), []byte(minimalScript), 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := strconv.Itoa(port)
	var cmd *exec.Cmd
	if kind == "ours" {
		// --max-instances: the concurrent row starts more instances than
		// the default allows (the reference has no such limit).
		cmd = exec.Command(bin, "server", "--no-telemetry", "--host", "127.0.0.1", "--port", p, "--log-level", "warn", "--max-instances", "1000")
	} else {
		cmd = exec.Command(ref, "server", "--no-telemetry", "-H", "127.0.0.1", "-p", p)
	}
	cmd.Env = cleanEnv(home)
	if kind != "ours" {
		cmd.Env = append(cmd.Env, "SANDBOX_AGENT_LOG_STDOUT=1")
	}
	cmd.Dir = home
	logFile, err := os.Create(filepath.Join(work, kind+".log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	t := &target{kind: kind, url: "http://127.0.0.1:" + p, cmd: cmd, done: make(chan struct{}), home: home, async: kind == "ours"}
	go func() { _ = cmd.Wait(); logFile.Close(); close(t.done) }()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if resp, err := http.Get(t.url + "/v1/health"); err == nil {
			resp.Body.Close()
			logf("%s listening at %s (pid %d)", kind, t.url, cmd.Process.Pid)
			return t, nil
		}
		select {
		case <-t.done:
			return nil, fmt.Errorf("%s exited at start; see its log", kind)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.stop()
	return nil, fmt.Errorf("%s did not start within 20 s", kind)
}

// stop ends the daemon and everything in its process group. Ours gets
// SIGTERM (it stops its agents); the reference hangs on SIGINT while an
// agent lives, so it gets SIGKILL, as does anything left in the group.
func (t *target) stop() {
	pgid := t.cmd.Process.Pid
	if t.kind == "ours" {
		_ = t.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-t.done:
		case <-time.After(10 * time.Second):
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-t.done
}

func (t *target) pid() int { return t.cmd.Process.Pid }
