package httpclient_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
)

// daemonURL is a sandbox-agent daemon started by TestMain (main_test.go)
// for these examples: `sandbox-agent server --port N` with a scratch HOME.

// editor is the client side of the example session: it prints what the
// agent says and allows what it asks for.
type editor struct{ acp.Client }

func (editor) RequestPermission(_ context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	fmt.Println("permission asked:", *p.ToolCall.Title)
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{
		Selected: &acp.RequestPermissionOutcomeSelected{OptionId: p.Options[0].OptionId},
	}}, nil
}

func (editor) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	if m := n.Update.AgentMessageChunk; m != nil && m.Content.Text != nil {
		fmt.Println("agent:", m.Content.Text.Text)
	}
	return nil
}

// A whole ACP session with the built-in mock agent in a sandbox: the ACP
// connection plugs into acp-go-sdk as a local agent's pipes would, and the
// agent's permission request reaches the editor, whose answer goes back.
func ExampleClient_DialACP() {
	ctx := context.Background()
	c := &httpclient.Client{BaseURL: daemonURL}
	conn, err := c.DialACP(ctx, "example-session", "mock", &httpclient.ACPOptions{DeleteOnClose: true})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close() // stops the agent (DeleteOnClose)

	agent := acp.NewClientSideConnection(editor{}, conn, conn)
	if _, err := agent.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		log.Fatal(err)
	}
	sess, err := agent.NewSession(ctx, acp.NewSessionRequest{Cwd: "/", McpServers: []acp.McpServer{}})
	if err != nil {
		log.Fatal(err)
	}
	res, err := agent.Prompt(ctx, acp.PromptRequest{
		SessionId: sess.SessionId,
		Prompt:    []acp.ContentBlock{acp.TextBlock("permission")},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stop reason:", res.StopReason)
	// Output:
	// permission asked: Write mock.txt
	// agent: mock: permission selected allow
	// stop reason: end_turn
}

// A file round trip: write a file in the sandbox from any io.Reader
// (streamed), read part of it back with a byte range, then delete it.
func ExampleClient_WriteFile() {
	ctx := context.Background()
	c := &httpclient.Client{BaseURL: daemonURL}

	w, err := c.WriteFile(ctx, "notes/hello.txt", strings.NewReader("hello, sandbox\n"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("written:", w.BytesWritten, "bytes")

	body, err := c.OpenFile(ctx, "notes/hello.txt", 7, 7) // bytes 7..13
	if err != nil {
		log.Fatal(err)
	}
	part, _ := io.ReadAll(body)
	body.Close()
	fmt.Printf("range: %q\n", part)

	st, err := c.FSStat(ctx, "notes/hello.txt")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stat:", st.EntryType, st.Size)

	if _, err := c.DeleteFSEntry(ctx, "notes", true); err != nil {
		log.Fatal(err)
	}
	_, err = c.FSStat(ctx, "notes/hello.txt")
	var p *httpclient.Problem
	fmt.Println("after delete:", errors.As(err, &p), p.Status, p.Kind())
	// Output:
	// written: 15 bytes
	// range: "sandbox"
	// stat: file 15
	// after delete: true 404 not_found
}

// Errors are *Problem values carrying the daemon's problem document.
func ExampleProblem() {
	c := &httpclient.Client{BaseURL: daemonURL}
	_, err := c.Agent(context.Background(), "no-such-agent", false, false)
	var p *httpclient.Problem
	if errors.As(err, &p) {
		fmt.Println(p.Status, p.Kind(), p.Agent)
	}
	// Output:
	// 400 unsupported_agent no-such-agent
}

// A tar archive streamed from any io.Reader (a file, a pipe, a buffer)
// into a directory of the sandbox, extracted by the daemon.
func ExampleClient_UploadBatch() {
	ctx := context.Background()
	c := &httpclient.Client{BaseURL: daemonURL}

	var tarball bytes.Buffer
	tw := tar.NewWriter(&tarball)
	for _, f := range []struct{ name, body string }{{"README.md", "# demo\n"}, {"src/main.go", "package main\n"}} {
		tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body))})
		tw.Write([]byte(f.body))
	}
	tw.Close()

	res, err := c.UploadBatch(ctx, "project", &tarball)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("extracted:", len(res.Paths), "files")
	b, err := c.ReadFile(ctx, "project/src/main.go")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("src/main.go: %q\n", b)
	c.DeleteFSEntry(ctx, "project", true)
	// Output:
	// extracted: 2 files
	// src/main.go: "package main\n"
}

// A command run to its end in the sandbox: its exit code and output.
func ExampleClient_RunProcess() {
	c := &httpclient.Client{BaseURL: daemonURL}
	run, err := c.RunProcess(context.Background(), httpclient.ProcessRunRequest{
		Command: "sh", Args: []string{"-c", "echo hello; echo oops >&2; exit 2"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("exit %d, stdout %q, stderr %q\n", *run.ExitCode, run.Stdout, run.Stderr)
	// Output:
	// exit 2, stdout "hello\n", stderr "oops\n"
}

// A process started in the background and its log followed live to its
// exit.
func ExampleClient_FollowProcessLogs() {
	ctx := context.Background()
	c := &httpclient.Client{BaseURL: daemonURL}
	p, err := c.CreateProcess(ctx, httpclient.ProcessCreateRequest{
		Command: "sh", Args: []string{"-c", "echo one; echo two; exit 4"},
	})
	if err != nil {
		log.Fatal(err)
	}
	var out []byte
	err = c.FollowProcessLogs(ctx, p.ID, httpclient.ProcessLogsQuery{}, func(ev httpclient.ProcessLogEvent) error {
		switch {
		case ev.Entry != nil:
			data, err := httpclient.DecodeLogData(*ev.Entry)
			if err != nil {
				return err
			}
			out = append(out, data...)
		case ev.Exit != nil:
			fmt.Println("exit code:", *ev.Exit.ExitCode)
		}
		return nil
	})
	if err != nil { // the stream failed before the exit
		log.Fatal(err)
	}
	fmt.Printf("output: %q\n", out)
	c.DeleteProcess(ctx, p.ID)
	// Output:
	// exit code: 4
	// output: "one\ntwo\n"
}

// A shell on a terminal in the sandbox, typed into over its WebSocket:
// the terminal is an io.ReadWriteCloser whose Read ends with io.EOF when
// the process exits.
func ExampleClient_ConnectTerminal() {
	ctx := context.Background()
	c := &httpclient.Client{BaseURL: daemonURL}
	p, err := c.CreateProcess(ctx, httpclient.ProcessCreateRequest{Command: "sh", TTY: true, Interactive: true})
	if err != nil {
		log.Fatal(err)
	}
	term, err := c.ConnectTerminal(ctx, p.ID)
	if err != nil {
		log.Fatal(err)
	}
	defer term.Close() // the process goes on; here it has exited
	term.Resize(120, 40)
	io.WriteString(term, "echo $((6*7)); exit 3\n")
	out, err := io.ReadAll(term) // the output, echo included, to the exit
	if err != nil {
		log.Fatal(err)
	}
	code, exited := term.ExitCode()
	fmt.Println("saw 42:", strings.Contains(string(out), "42"))
	fmt.Println("exited:", exited, *code)
	c.DeleteProcess(ctx, p.ID)
	// Output:
	// saw 42: true
	// exited: true 3
}

// Behind a router in front of many sandboxes (agent-sandbox's
// sandbox-router): BaseURL is the router's, Router names the sandbox and
// carries the router's token, and the daemon's token travels in
// X-Sandbox-Agent-Token (the daemon's --token-header). routerURL is a
// stand-in router that checks those headers.
func ExampleRouter() {
	c := &httpclient.Client{BaseURL: routerURL, Token: "daemon-token",
		Router: &httpclient.Router{SandboxID: "my-sandbox", Port: 8888, Token: "router-token"}}
	if err := c.Health(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println("the sandbox's daemon answers")
	// Output:
	// the sandbox's daemon answers
}
