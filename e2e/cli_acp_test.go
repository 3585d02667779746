package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// TestCLIAPIACP drives a daemon with `sandbox-agent api acp ...`.
func TestCLIAPIACP(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: []string{"--token", "tok"}})
	run := func(stdin string, args ...string) (string, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, harness.Binary, append([]string{"api", "acp"}, args...)...)
		cmd.Args = append(cmd.Args, "--endpoint", d.URL, "--token", "tok")
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	out, _, err := run("", "post", "cli", "--agent", "mock", initMsg)
	if err != nil || !strings.HasPrefix(out, `{"jsonrpc":"2.0","id":1,"result":`) {
		t.Fatalf("post: %v %q", err, out)
	}
	out, errOut, err := run("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"a/b\"}\n\n{\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n", "post", "cli")
	if err != nil || out != `{"jsonrpc":"2.0","id":2,"result":{"echoedMethod":"a/b"}}`+"\n" || !strings.Contains(errOut, "202 Accepted") {
		t.Fatalf("post from stdin: %v %q %q", err, out, errOut)
	}
	// The stream resumes after event 1 and is cut by the timeout below.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.Binary, "api", "acp", "stream", "cli", "--ids", "--last-event-id", "1", "--endpoint", d.URL, "--token", "tok")
	var so bytes.Buffer
	cmd.Stdout = &so
	_ = cmd.Run()
	if !strings.HasPrefix(so.String(), "2\t"+`{"jsonrpc":"2.0","id":2,`) {
		t.Fatalf("stream: %q", so.String())
	}
	if _, _, err := run("", "close", "cli"); err != nil {
		t.Fatalf("close: %v", err)
	}
	out, _, _ = run("", "list")
	if !strings.Contains(out, `"servers":[]`) {
		t.Fatalf("list after close: %q", out)
	}
	_, errOut, err = run("", "post", "nope", `{}`)
	if err == nil || !strings.Contains(errOut, "missing required 'agent'") {
		t.Fatalf("error not reported: %v %q", err, errOut)
	}
}

// TestCLIAPIInterrupted: an api command waiting on a daemon that never
// answers ends on Ctrl-C (SIGINT) instead of hanging: the stream quietly
// (exit 0, the normal way out of it), the others with the interruption as
// their error (exit 1).
func TestCLIAPIInterrupted(t *testing.T) {
	t.Parallel()
	url, seen := hungPeer(t)
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"agents", "list"}, 1},
		{[]string{"acp", "post", "s", "--agent", "mock", initMsg}, 1},
		{[]string{"acp", "stream", "s"}, 0},
	} {
		t.Run(strings.Join(tc.args[:2], " "), func(t *testing.T) {
			cmd := exec.Command(harness.Binary, append(append([]string{"api"}, tc.args...), "--endpoint", url)...)
			var errb bytes.Buffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-seen:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				t.Fatal("the request never reached the peer")
			}
			cmd.Process.Signal(syscall.SIGINT)
			select {
			case err := <-done:
				if code := exitCode(err); code != tc.code {
					t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, errb.String())
				}
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatal("still running 10 s after SIGINT")
			}
		})
	}
}
