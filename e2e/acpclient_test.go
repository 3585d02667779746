package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// sessionClient is the editor side of an ACP session in these tests: it
// records every agent_message_chunk in arrival order and answers permission
// requests with the first option.
type sessionClient struct {
	mu          sync.Mutex
	chunks      []string
	permissions int
}

var _ acp.Client = (*sessionClient)(nil)

func (c *sessionClient) RequestPermission(_ context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	c.mu.Lock()
	c.permissions++
	c.mu.Unlock()
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{
		Selected: &acp.RequestPermissionOutcomeSelected{OptionId: p.Options[0].OptionId},
	}}, nil
}

func (c *sessionClient) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	if m := n.Update.AgentMessageChunk; m != nil && m.Content.Text != nil {
		c.mu.Lock()
		c.chunks = append(c.chunks, m.Content.Text.Text)
		c.mu.Unlock()
	}
	return nil
}

// takeChunks returns the chunks received so far and forgets them.
func (c *sessionClient) takeChunks() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.chunks
	c.chunks = nil
	return out
}

func (c *sessionClient) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, fmt.Errorf("not supported")
}
func (c *sessionClient) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, fmt.Errorf("not supported")
}
func (c *sessionClient) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, fmt.Errorf("not supported")
}
func (c *sessionClient) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, fmt.Errorf("not supported")
}
func (c *sessionClient) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, fmt.Errorf("not supported")
}
func (c *sessionClient) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, fmt.Errorf("not supported")
}
func (c *sessionClient) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, fmt.Errorf("not supported")
}

// driveMockSession runs the session the issue asks for against the mock
// agent behind w (client→agent) and r (agent→client): initialize,
// session/new, a prompt whose permission request is answered, "stream 1000"
// with every chunk in order before the result, and a cancelled turn.
func driveMockSession(t *testing.T, w io.Writer, r io.Reader) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sc := &sessionClient{}
	conn := acp.NewClientSideConnection(sc, w, r)

	init, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if init.ProtocolVersion != acp.ProtocolVersionNumber {
		t.Fatalf("initialize: protocol %v", init.ProtocolVersion)
	}
	sess, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: "/", McpServers: []acp.McpServer{}})
	if err != nil || sess.SessionId == "" {
		t.Fatalf("session/new: %+v %v", sess, err)
	}
	prompt := func(text string) acp.PromptResponse {
		t.Helper()
		res, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
		if err != nil {
			t.Fatalf("prompt %q: %v", text, err)
		}
		return res
	}

	if res := prompt("permission"); res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("permission turn: %v", res.StopReason)
	}
	if got := sc.takeChunks(); sc.permissions != 1 || len(got) != 1 || got[0] != "mock: permission selected allow" {
		t.Fatalf("permission turn: %d permission requests, chunks %q", sc.permissions, got)
	}

	// The result must not overtake the updates written before it: every
	// chunk has been handled when Prompt returns, in the agent's order.
	if res := prompt("stream 1000"); res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("stream turn: %v", res.StopReason)
	}
	got := sc.takeChunks()
	if len(got) != 1000 {
		t.Fatalf("stream 1000: %d chunks before the result", len(got))
	}
	for i, c := range got {
		if want := fmt.Sprintf("mock: chunk %d", i+1); c != want {
			t.Fatalf("chunk %d = %q, want %q", i, c, want)
		}
	}

	done := make(chan acp.PromptResponse, 1)
	go func() {
		res, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("slow 30000")}})
		if err != nil {
			t.Errorf("slow prompt: %v", err)
		}
		done <- res
	}()
	// Cancel once the turn has surely started: the mock answers session/cancel
	// for the running turn; a cancel racing ahead of the prompt is retried.
	for {
		if err := conn.Cancel(ctx, acp.CancelNotification{SessionId: sess.SessionId}); err != nil {
			t.Fatalf("cancel: %v", err)
		}
		select {
		case res := <-done:
			if res.StopReason != acp.StopReasonCancelled {
				t.Fatalf("cancelled turn: %v", res.StopReason)
			}
			return
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("cancelled turn never ended")
		}
	}
}

func client(d *harness.Daemon) *httpclient.Client { return &httpclient.Client{BaseURL: d.URL} }

func listServers(t *testing.T, d *harness.Daemon) []httpclient.ACPServer {
	t.Helper()
	s, err := client(d).ListACPServers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestGoClientSession: acp-go-sdk's client side drives the mock through the
// Go client's ACP connection, as it would drive a local agent's pipes.
// With --async-methods empty every prompt is a synchronous POST whose 200
// body is the result: the connection must still deliver it after the
// updates, once.
func TestGoClientSession(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, async string }{{"async-prompt", "session/prompt"}, {"all-sync", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			d := harness.Start(t, harness.Options{Args: []string{"--async-methods=" + tc.async}})
			conn, err := client(d).DialACP(context.Background(), "go-session", "mock", &httpclient.ACPOptions{DeleteOnClose: true})
			if err != nil {
				t.Fatal(err)
			}
			driveMockSession(t, conn, conn)
			if err := conn.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			if s := listServers(t, d); len(s) != 0 {
				t.Fatalf("instance left after Close with DeleteOnClose: %+v", s)
			}
		})
	}
}

// bridge is a running "sandbox-agent acp" child process.
type bridge struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.Reader
	stderr *harness.LockedBuffer
	done   chan error
}

func startBridge(t *testing.T, d *harness.Daemon, extra ...string) *bridge {
	t.Helper()
	args := append([]string{"acp", "--endpoint", d.URL, "--log-level", "debug"}, extra...)
	cmd := exec.Command(harness.Binary, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	b := &bridge{cmd: cmd, stdin: stdin, stdout: stdout, stderr: &harness.LockedBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = b.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-b.done
		b.done <- nil
		if t.Failed() {
			t.Logf("bridge stderr:\n%s", harness.Tail(b.stderr.String(), 100))
		}
	})
	return b
}

// wait returns the bridge's exit error, failing the test if it takes long.
func (b *bridge) wait(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case err := <-b.done:
		b.done <- err
		return err
	case <-time.After(within):
		t.Fatalf("bridge did not exit within %v; stderr:\n%s", within, b.stderr.String())
		return nil
	}
}

// TestBridgeSession runs the same session through "sandbox-agent acp"
// spawned as a child process, as an editor would, then closes its stdin:
// it exits 0 and deletes the instance it created.
func TestBridgeSession(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	b := startBridge(t, d, "--agent", "mock")
	driveMockSession(t, b.stdin, b.stdout)
	if s := listServers(t, d); len(s) != 1 || !strings.HasPrefix(s[0].ServerID, "acp-") {
		t.Fatalf("servers during the session: %+v", s)
	}
	b.stdin.Close()
	if err := b.wait(t, 15*time.Second); err != nil {
		t.Fatalf("bridge exit: %v\n%s", err, b.stderr.String())
	}
	if s := listServers(t, d); len(s) != 0 {
		t.Fatalf("instance left after the bridge exited: %+v", s)
	}
	if strings.Contains(b.stderr.String(), `"jsonrpc"`) && !strings.Contains(b.stderr.String(), "DBG") {
		t.Errorf("protocol on stderr?\n%s", b.stderr.String())
	}
}

// TestBridgeAttach: with --server-id the bridge attaches to an existing
// instance, sees only what the agent writes from then on, and leaves the
// instance running at exit.
func TestBridgeAttach(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	if st, body := d.Post("/v1/acp/kept?agent=mock", initMsg); st != 200 {
		t.Fatalf("bootstrap: %d %s", st, body)
	}
	b := startBridge(t, d, "--server-id", "kept")
	io.WriteString(b.stdin, `{"jsonrpc":"2.0","id":"x","method":"echo/me"}`+"\n")
	line := readLine(t, b.stdout)
	if line != `{"jsonrpc":"2.0","id":"x","result":{"echoedMethod":"echo/me"}}` {
		t.Fatalf("first line %q (the replayed initialize must not be delivered)", line)
	}
	b.stdin.Close()
	if err := b.wait(t, 15*time.Second); err != nil {
		t.Fatalf("bridge exit: %v", err)
	}
	if s := listServers(t, d); len(s) != 1 || s[0].ServerID != "kept" || s[0].State != "running" {
		t.Fatalf("attached instance not left running: %+v", s)
	}
}

// readLine reads one line from r (without its newline) within 20 s.
func readLine(t *testing.T, r io.Reader) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		var b bytes.Buffer
		one := make([]byte, 1)
		for {
			n, err := r.Read(one)
			if n == 1 && one[0] != '\n' {
				b.WriteByte(one[0])
			}
			if err != nil || (n == 1 && one[0] == '\n') {
				ch <- b.String()
				return
			}
		}
	}()
	select {
	case s := <-ch:
		return s
	case <-time.After(20 * time.Second):
		t.Fatal("no line within 20 s")
		return ""
	}
}

// TestCompatBridgeTypeScriptSDK: the official ACP TypeScript SDK spawns
// "sandbox-agent acp" as its agent over stdio and runs the session; the
// bridge's instance is gone afterwards.
func TestCompatBridgeTypeScriptSDK(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	runNode(t, "acp-stdio-bridge.mjs", 90*time.Second, "BINARY="+harness.Binary, "ENDPOINT="+d.URL)
	if s := listServers(t, d); len(s) != 0 {
		t.Fatalf("instance left after the SDK closed the bridge: %+v", s)
	}
}
