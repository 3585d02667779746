package httpclient_test

import (
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
