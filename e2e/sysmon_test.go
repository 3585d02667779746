package e2e

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// TestBridgeKeepsSysmonAwake: the bridge runs with Go's sysmon kept out of
// its deep sleep (GODEBUG=schedtrace=2147483647, cmd/sandbox-agent's
// sysmon_linux.go), added to what GODEBUG already says, and not when the
// caller's GODEBUG names schedtrace itself (GODEBUG=schedtrace=0 turns it
// off), nor when its stdio is not polled (a read blocked in the kernel
// would keep sysmon polling). The kernel shows in /proc/<pid>/environ the environment of the
// image running, so the re-exec is seen there once the bridge has
// reached the daemon.
func TestBridgeKeepsSysmonAwake(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc here:", err)
	}
	for _, tc := range []struct {
		godebug string // "-" leaves GODEBUG out
		want    string
		file    bool // stdout a file, not a pipe
	}{
		{godebug: "-", want: "schedtrace=2147483647"},
		{godebug: "", want: "schedtrace=2147483647"},
		{godebug: "http2client=0", want: "http2client=0,schedtrace=2147483647"},
		{godebug: "schedtrace=0", want: "schedtrace=0"},
		{godebug: "gctrace=0,schedtrace=500", want: "gctrace=0,schedtrace=500"},
		{godebug: "http2client=0", want: "http2client=0", file: true},
	} {
		t.Run(tc.godebug, func(t *testing.T) {
			url, seen := hungPeer(t)
			cmd := exec.Command(harness.Binary, "acp", "--endpoint", url, "--agent", "mock", "--log-level", "error")
			if tc.file {
				f, err := os.Create(t.TempDir() + "/stdout")
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				cmd.Stdout = f
			} else if _, err := cmd.StdoutPipe(); err != nil {
				t.Fatal(err)
			}
			for _, kv := range os.Environ() {
				if !bytes.HasPrefix([]byte(kv), []byte("GODEBUG=")) {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			if tc.godebug != "-" {
				cmd.Env = append(cmd.Env, "GODEBUG="+tc.godebug)
			}
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { in.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
			if _, err := in.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n")); err != nil {
				t.Fatal(err)
			}
			select {
			case <-seen: // past the re-exec: the POST is made after it
			case <-time.After(10 * time.Second):
				t.Fatal("the bridge never reached the daemon")
			}
			environ, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/environ")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for kv := range bytes.SplitSeq(environ, []byte{0}) {
				if v, ok := bytes.CutPrefix(kv, []byte("GODEBUG=")); ok {
					got = append(got, string(v))
				}
			}
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("GODEBUG of the running bridge: %q, want [%q]", got, tc.want)
			}
		})
	}
}

// TestDaemonKeepsSysmonAwake: the daemon runs with Go's sysmon kept out of
// its deep sleep as the bridge does, in the same re-exec as the one that
// takes a token off its command line; the agents it starts get GODEBUG as
// the daemon was given it (a process blocking on its stdin, as the mock
// does, is slower with sysmon awake), and a GODEBUG naming schedtrace is
// left alone.
func TestDaemonKeepsSysmonAwake(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc here:", err)
	}
	for _, tc := range []struct {
		name, godebug, daemon string
		args                  []string
	}{
		{"empty", "", "schedtrace=2147483647", nil},
		{"other", "http2client=0", "http2client=0,schedtrace=2147483647", nil},
		{"token", "http2client=0", "http2client=0,schedtrace=2147483647", []string{"--token", "sysmon-test-token"}},
		{"off", "schedtrace=0", "schedtrace=0", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := harness.Start(t, harness.Options{Args: tc.args, Env: []string{"GODEBUG=" + tc.godebug}})
			if got := godebugOf(t, d.Cmd.Process.Pid); got != tc.daemon {
				t.Fatalf("GODEBUG of the daemon: %q, want %q", got, tc.daemon)
			}
			if tc.args != nil {
				cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(d.Cmd.Process.Pid) + "/cmdline")
				if bytes.Contains(cmdline, []byte("sysmon-test-token")) {
					t.Fatalf("the token is on the daemon's command line: %q", cmdline)
				}
			}
			req, _ := http.NewRequest(http.MethodPost, d.URL+"/v1/acp/sysmon?agent=mock", strings.NewReader(initMsg))
			req.Header.Set("Content-Type", "application/json")
			if tc.args != nil {
				req.Header.Set("Authorization", "Bearer sysmon-test-token")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("initialize: %d", resp.StatusCode)
			}
			agents := 0
			for _, pid := range descendants(d.Cmd.Process.Pid) {
				cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
				if !bytes.Contains(cmdline, []byte("mock-agent-process")) {
					continue
				}
				agents++
				if got := godebugOf(t, pid); got != tc.godebug {
					t.Fatalf("GODEBUG of the agent: %q, want %q as the daemon was given it", got, tc.godebug)
				}
			}
			if agents == 0 {
				t.Fatal("no agent found below the daemon")
			}
		})
	}
}

// godebugOf is GODEBUG in the environment of the image process pid runs
// ("<unset>" when it has none).
func godebugOf(t *testing.T, pid int) string {
	t.Helper()
	environ, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	got := "<unset>"
	for kv := range bytes.SplitSeq(environ, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("GODEBUG=")); ok {
			got = string(v)
		}
	}
	return got
}
