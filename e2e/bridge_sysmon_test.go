package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
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
