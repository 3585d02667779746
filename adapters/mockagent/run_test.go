package mockagent

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// TestRouteLines: the router answers lines that are not JSON-RPC messages
// and the test methods itself, drops test notifications, and hands
// everything else to the SDK unchanged.
func TestRouteLines(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":"big","method":"_mock/big","params":{"blob":"` + strings.Repeat("a", 12<<20) + `"}}`
	bigPrompt := `{"jsonrpc":"2.0","id":"bp","method":"session/prompt","params":{"sessionId":"mock-1","prompt":[{"type":"text","text":"` + strings.Repeat("a", 10<<20) + `"}]}}`
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":7,"method":"x/y","params":{}}`,
		`{"jsonrpc":"2.0","id":"s","method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","method":"note"}`,
		`{"jsonrpc":"2.0","method":"echo","params":{"pad":"x"}}`,
		`{"jsonrpc":"2.0","id":8,"method":"_tck/does_not_exist"}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize"`,
		``,
		`{"jsonrpc":"2.0","id":2}`,
		`[]`,
		big,
		bigPrompt,
		`{"jsonrpc":"2.0","id":"last","result":{}}`,
	}, "\n")
	var sdk, out strings.Builder
	if err := route(strings.NewReader(in), &sdk, &lineWriter{w: &out}, io.Discard); err != nil {
		t.Fatal(err)
	}
	wantOut := `{"jsonrpc":"2.0","id":7,"result":{"echoedMethod":"x/y"}}` + "\n" +
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error","data":"the line is not JSON"}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"Invalid Request","data":"a request needs a \"method\""}}` + "\n" +
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request","data":"JSON-RPC batches are not supported"}}` + "\n" +
		`{"jsonrpc":"2.0","id":"big","result":{"echoedMethod":"_mock/big"}}` + "\n" +
		`{"jsonrpc":"2.0","id":"bp","error":{"code":-32603,"message":"Internal error","data":{"error":"a message of ` + itoa(len(bigPrompt)+1) + ` bytes is over the mock's limit of 10485759 for ACP methods"}}}` + "\n"
	if out.String() != wantOut {
		t.Errorf("router answered:\n%.2000s", out.String())
	}
	wantSDK := `{"jsonrpc":"2.0","id":"s","method":"initialize","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","method":"note"}` + "\n" +
		`{"jsonrpc":"2.0","id":8,"method":"_tck/does_not_exist"}` + "\n" +
		`{"jsonrpc":"2.0","id":"last","result":{}}` + "\n"
	if sdk.String() != wantSDK {
		t.Errorf("SDK got %q", sdk.String())
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// recorder is an ACP client that records what the mock sends.
type recorder struct {
	mu      sync.Mutex
	updates []acp.SessionNotification
	answer  string // permission option to select
	// asked, when set, receives each permission request, which then waits
	// for release (or for the agent to give up on it).
	asked, release chan struct{}
}

func (r *recorder) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.updates = append(r.updates, n)
	return nil
}

// take returns the updates received so far as JSON and forgets them.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, u := range r.updates {
		b, _ := json.Marshal(u)
		out = append(out, string(b))
	}
	r.updates = nil
	return out
}

func (r *recorder) RequestPermission(ctx context.Context, _ acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	if r.asked != nil {
		r.asked <- struct{}{}
		select {
		case <-r.release:
		case <-ctx.Done():
		}
	}
	return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(acp.PermissionOptionId(r.answer))}, nil
}

var errNo = errors.New("not a capability of this client")

func (r *recorder) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, errNo
}
func (r *recorder) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, errNo
}
func (r *recorder) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, errNo
}
func (r *recorder) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, errNo
}
func (r *recorder) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, errNo
}
func (r *recorder) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, errNo
}
func (r *recorder) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, errNo
}

// startMock runs the mock over pipes with acp-go-sdk as its client; the
// mock ends when the test does.
func startMock(t *testing.T) (*acp.ClientSideConnection, *recorder) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	go func() {
		Run(context.Background(), inR, outW, io.Discard, Options{Version: "9.9.9"})
		outW.Close()
		close(done)
	}()
	rec := &recorder{answer: "allow"}
	conn := acp.NewClientSideConnection(rec, inW, outR)
	conn.SetLogger(slog.New(slog.DiscardHandler))
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the mock did not end at stdin EOF")
		}
	})
	return conn, rec
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantCode(t *testing.T, err error, code int) {
	t.Helper()
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != code {
		t.Fatalf("error %v, want code %d", err, code)
	}
}

// TestInitializeAdvertises: agentInfo and every capability the mock
// implements.
func TestInitializeAdvertises(t *testing.T) {
	c, _ := startMock(t)
	res, err := c.Initialize(context.Background(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"agentCapabilities":{"auth":{},"loadSession":true,"mcpCapabilities":{},"promptCapabilities":{"audio":true,"embeddedContext":true,"image":true},"sessionCapabilities":{"additionalDirectories":{},"close":{},"list":{},"resume":{}}},"agentInfo":{"name":"mock","title":"Sandbox Agent mock","version":"9.9.9"},"authMethods":[],"protocolVersion":1}`
	if got := mustJSON(t, res); got != want {
		t.Fatalf("initialize:\n got %s\nwant %s", got, want)
	}
}

// TestSessionLifecycle: new (deterministic ids, modes, config options),
// prompt, load with the history replayed before the answer, list with
// filters, resume without replay, close forgetting the session.
func TestSessionLifecycle(t *testing.T) {
	ctx := context.Background()
	c, rec := startMock(t)
	if _, err := c.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: 1}); err != nil {
		t.Fatal(err)
	}
	s1, err := c.NewSession(ctx, acp.NewSessionRequest{Cwd: "/w", McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	wantNew := `{"configOptions":[{"category":"model","currentValue":"mock-fast","id":"model","name":"Model","options":[{"name":"mock-fast","value":"mock-fast"},{"name":"mock-smart","value":"mock-smart"}],"type":"select"},{"category":"thought_level","currentValue":"low","id":"thought_level","name":"Thinking","options":[{"name":"low","value":"low"},{"name":"high","value":"high"}],"type":"select"}],"modes":{"availableModes":[{"description":"Answer without changing anything","id":"ask","name":"Ask"},{"description":"Make changes","id":"code","name":"Code"}],"currentModeId":"ask"},"sessionId":"mock-1"}`
	if got := mustJSON(t, s1); got != wantNew {
		t.Fatalf("session/new:\n got %s\nwant %s", got, wantNew)
	}
	s2, err := c.NewSession(ctx, acp.NewSessionRequest{Cwd: "/other", McpServers: []acp.McpServer{}, AdditionalDirectories: []string{"/extra"}})
	if err != nil || s2.SessionId != "mock-2" {
		t.Fatalf("second session: %v %v", s2.SessionId, err)
	}

	res, err := c.Prompt(ctx, acp.PromptRequest{SessionId: "mock-1", Prompt: []acp.ContentBlock{acp.TextBlock("think hard")}})
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %v %v", res, err)
	}
	turn := rec.take()
	if len(turn) != 2 {
		t.Fatalf("turn updates: %q", turn)
	}

	// load replays the user's prompt and the turn, before answering.
	loaded, err := c.LoadSession(ctx, acp.LoadSessionRequest{SessionId: "mock-1", Cwd: "/w", McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	replay := rec.take()
	wantReplay := append([]string{`{"sessionId":"mock-1","update":{"content":{"text":"think hard","type":"text"},"sessionUpdate":"user_message_chunk"}}`}, turn...)
	if strings.Join(replay, "\n") != strings.Join(wantReplay, "\n") {
		t.Fatalf("replay:\n%s\nwant\n%s", strings.Join(replay, "\n"), strings.Join(wantReplay, "\n"))
	}
	if loaded.Modes == nil || loaded.Modes.CurrentModeId != "ask" || len(loaded.ConfigOptions) != 2 {
		t.Fatalf("load answer %s", mustJSON(t, loaded))
	}

	list, err := c.ListSessions(ctx, acp.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := mustJSON(t, list); got != `{"sessions":[{"cwd":"/w","sessionId":"mock-1","title":"think hard"},{"additionalDirectories":["/extra"],"cwd":"/other","sessionId":"mock-2"}]}` {
		t.Fatalf("list: %s", got)
	}
	for _, f := range []acp.ListSessionsRequest{{Cwd: acp.Ptr("/nowhere")}, {AdditionalDirectories: []string{"/nope"}}} {
		if l, err := c.ListSessions(ctx, f); err != nil || mustJSON(t, l) != `{"sessions":[]}` {
			t.Fatalf("filtered list %+v: %s %v", f, mustJSON(t, l), err)
		}
	}
	if l, _ := c.ListSessions(ctx, acp.ListSessionsRequest{Cwd: acp.Ptr("/other")}); len(l.Sessions) != 1 || l.Sessions[0].SessionId != "mock-2" {
		t.Fatalf("cwd filter: %s", mustJSON(t, l))
	}
	_, err = c.ListSessions(ctx, acp.ListSessionsRequest{Cursor: acp.Ptr("x")})
	wantCode(t, err, -32602)

	if _, err := c.ResumeSession(ctx, acp.ResumeSessionRequest{SessionId: "mock-1", Cwd: "/w2"}); err != nil {
		t.Fatal(err)
	}
	if u := rec.take(); len(u) != 0 {
		t.Fatalf("resume sent updates: %q", u)
	}
	if l, _ := c.ListSessions(ctx, acp.ListSessionsRequest{Cwd: acp.Ptr("/w2")}); len(l.Sessions) != 1 {
		t.Fatalf("resume did not take the new cwd: %s", mustJSON(t, l))
	}

	if _, err := c.CloseSession(ctx, acp.CloseSessionRequest{SessionId: "mock-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CloseSession(ctx, acp.CloseSessionRequest{SessionId: "mock-1"}); err != nil {
		t.Fatalf("closing twice: %v", err)
	}
	_, err = c.LoadSession(ctx, acp.LoadSessionRequest{SessionId: "mock-1", Cwd: "/w", McpServers: []acp.McpServer{}})
	wantCode(t, err, -32002)
	_, err = c.ResumeSession(ctx, acp.ResumeSessionRequest{SessionId: "mock-1", Cwd: "/w"})
	wantCode(t, err, -32002)
	_, err = c.Prompt(ctx, acp.PromptRequest{SessionId: "mock-1", Prompt: []acp.ContentBlock{acp.TextBlock("hi")}})
	wantCode(t, err, -32002)
	if l, _ := c.ListSessions(ctx, acp.ListSessionsRequest{}); len(l.Sessions) != 1 {
		t.Fatalf("closed session still listed: %s", mustJSON(t, l))
	}
	if s, _ := c.NewSession(ctx, acp.NewSessionRequest{Cwd: "/w", McpServers: []acp.McpServer{}}); s.SessionId != "mock-3" {
		t.Fatalf("ids are reused: %s", s.SessionId)
	}
}

// TestCloseCancelsTurn: closing a session with a turn in flight ends that
// turn (cancelled, not an error) before the close is answered.
func TestCloseCancelsTurn(t *testing.T) {
	ctx := context.Background()
	c, rec := startMock(t)
	rec.asked, rec.release = make(chan struct{}, 1), make(chan struct{})
	defer close(rec.release)
	c.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: 1})
	s, _ := c.NewSession(ctx, acp.NewSessionRequest{Cwd: "/w", McpServers: []acp.McpServer{}})
	type result struct {
		res acp.PromptResponse
		err error
	}
	prompted := make(chan result, 1)
	go func() {
		r, err := c.Prompt(ctx, acp.PromptRequest{SessionId: s.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("permission")}})
		prompted <- result{r, err}
	}()
	<-rec.asked // the turn is under way, waiting for the client
	if _, err := c.CloseSession(ctx, acp.CloseSessionRequest{SessionId: s.SessionId}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-prompted:
		if r.err != nil || r.res.StopReason != acp.StopReasonCancelled {
			t.Fatalf("prompt after close: %+v %v", r.res, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the turn outlived session/close")
	}
}

// TestWaitTurn: "wait" sends one update and then runs until cancelled;
// it answers cancelled, with nothing after the update.
func TestWaitTurn(t *testing.T) {
	ctx := context.Background()
	c, rec := startMock(t)
	c.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: 1})
	s, _ := c.NewSession(ctx, acp.NewSessionRequest{Cwd: "/w", McpServers: []acp.McpServer{}})
	got := make(chan acp.PromptResponse, 1)
	go func() {
		r, err := c.Prompt(ctx, acp.PromptRequest{SessionId: s.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("wait")}})
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	// The update comes before the cancel is sent: listed sessions are
	// answered by the SDK in order, so poll with a request until it shows.
	for len(rec.take()) == 0 {
		c.ListSessions(ctx, acp.ListSessionsRequest{})
	}
	c.Cancel(ctx, acp.CancelNotification{SessionId: s.SessionId})
	select {
	case r := <-got:
		if r.StopReason != acp.StopReasonCancelled {
			t.Fatalf("stop reason %s", r.StopReason)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("wait did not end at session/cancel")
	}
	if u := rec.take(); len(u) != 0 {
		t.Fatalf("updates after the first: %q", u)
	}
}

// TestModesAndConfig: set_mode reports the change before answering;
// set_config_option answers with every option; bad ids are -32602, unknown
// sessions -32002.
func TestModesAndConfig(t *testing.T) {
	ctx := context.Background()
	c, rec := startMock(t)
	c.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: 1})
	s, _ := c.NewSession(ctx, acp.NewSessionRequest{Cwd: "/w", McpServers: []acp.McpServer{}})
	if _, err := c.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: s.SessionId, ModeId: "code"}); err != nil {
		t.Fatal(err)
	}
	if u := rec.take(); len(u) != 1 || u[0] != `{"sessionId":"mock-1","update":{"currentModeId":"code","sessionUpdate":"current_mode_update"}}` {
		t.Fatalf("mode update: %q", u)
	}
	_, err := c.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: s.SessionId, ModeId: "fly"})
	wantCode(t, err, -32602)
	_, err = c.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: "nope", ModeId: "code"})
	wantCode(t, err, -32002)

	set := func(id, value string) (acp.SetSessionConfigOptionResponse, error) {
		return c.SetSessionConfigOption(ctx, acp.SetSessionConfigOptionRequest{ValueId: &acp.SetSessionConfigOptionValueId{
			SessionId: s.SessionId, ConfigId: acp.SessionConfigId(id), Value: acp.SessionConfigValueId(value)}})
	}
	res, err := set("model", "mock-smart")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ConfigOptions) != 2 || res.ConfigOptions[0].Select.CurrentValue != "mock-smart" || res.ConfigOptions[1].Select.CurrentValue != "low" {
		t.Fatalf("set_config_option: %s", mustJSON(t, res))
	}
	_, err = set("model", "gpt")
	wantCode(t, err, -32602)
	_, err = set("colour", "red")
	wantCode(t, err, -32602)
	_, err = c.SetSessionConfigOption(ctx, acp.SetSessionConfigOptionRequest{Boolean: &acp.SetSessionConfigOptionBoolean{SessionId: s.SessionId, ConfigId: "model", Type: "boolean", Value: true}})
	wantCode(t, err, -32602)

	// The state shows in what load and resume answer.
	r, err := c.ResumeSession(ctx, acp.ResumeSessionRequest{SessionId: s.SessionId, Cwd: "/w"})
	if err != nil || r.Modes.CurrentModeId != "code" || r.ConfigOptions[0].Select.CurrentValue != "mock-smart" {
		t.Fatalf("resume: %s %v", mustJSON(t, r), err)
	}
}

// TestPromptContent: image, audio, embedded resources and resource links
// are each echoed as one line; data that is not base64 is -32602.
func TestPromptContent(t *testing.T) {
	ctx := context.Background()
	c, rec := startMock(t)
	c.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: 1})
	s, _ := c.NewSession(ctx, acp.NewSessionRequest{Cwd: "/w", McpServers: []acp.McpServer{}})
	b64 := base64.StdEncoding.EncodeToString
	res, err := c.Prompt(ctx, acp.PromptRequest{SessionId: s.SessionId, Prompt: []acp.ContentBlock{
		acp.TextBlock("look"),
		acp.ImageBlock(b64([]byte("12345")), "image/png"),
		acp.AudioBlock(b64([]byte("123")), "audio/wav"),
		acp.ResourceBlock(acp.EmbeddedResourceResource{TextResourceContents: &acp.TextResourceContents{Uri: "file:///a.go", Text: "package a", MimeType: acp.Ptr("text/x-go")}}),
		acp.ResourceBlock(acp.EmbeddedResourceResource{BlobResourceContents: &acp.BlobResourceContents{Uri: "file:///b.bin", Blob: b64([]byte{0, 1})}}),
		acp.ResourceLinkBlock("c.txt", "file:///c.txt"),
	}})
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %v %v", res, err)
	}
	var texts []string
	for _, u := range rec.take() {
		var n struct {
			Update struct {
				Content struct{ Text string } `json:"content"`
			} `json:"update"`
		}
		json.Unmarshal([]byte(u), &n)
		texts = append(texts, n.Update.Content.Text)
	}
	want := []string{
		"mock: image image/png, 5 bytes",
		"mock: audio audio/wav, 3 bytes",
		"mock: resource file:///a.go (text/x-go), 9 bytes of text",
		"mock: resource file:///b.bin, 2 bytes",
		"mock: resource_link c.txt file:///c.txt",
		"mock: look",
	}
	if strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Fatalf("echo:\n%q\nwant\n%q", texts, want)
	}
	_, err = c.Prompt(ctx, acp.PromptRequest{SessionId: s.SessionId, Prompt: []acp.ContentBlock{acp.ImageBlock("not base64!", "image/png")}})
	wantCode(t, err, -32602)
}

// TestHistoryBounded: a session keeps at most maxHistoryCost bytes of
// updates for session/load, the newest.
func TestHistoryBounded(t *testing.T) {
	s := &session{}
	chunk := strings.Repeat("x", 1000)
	for range 1000 {
		s.record(acp.UpdateAgentMessageText(chunk))
	}
	if s.total > maxHistoryCost || len(s.history) == 0 || len(s.history) != len(s.cost) {
		t.Fatalf("kept %d bytes in %d entries", s.total, len(s.history))
	}
	s.record(acp.UpdateAgentMessageText(strings.Repeat("y", maxHistoryCost)))
	if s.total > maxHistoryCost {
		t.Fatalf("an entry over the bound was kept: %d", s.total)
	}
}

// TestUnknownMethods: methods the mock does not implement, ACP's or
// custom, get -32601; test methods are echoed.
func TestUnknownMethods(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() { Run(context.Background(), inR, outW, io.Discard, Options{}); outW.Close() }()
	defer inW.Close()
	lines := bufio.NewReader(outR)
	for _, tc := range []struct{ req, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"_tck/does_not_exist"}`, `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found","data":{"method":"_tck/does_not_exist"}}}`},
		{`{"jsonrpc":"2.0","id":2,"method":"session/delete","params":{"sessionId":"x"}}`, `{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"Method not found","data":{"method":"session/delete"}}}`},
		{`{"jsonrpc":"2.0","id":3,"method":"foo"}`, `{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Method not found","data":{"method":"foo"}}}`},
		{`{"jsonrpc":"2.0","id":4,"method":"_mock/echo"}`, `{"jsonrpc":"2.0","id":4,"result":{"echoedMethod":"_mock/echo"}}`},
		{`{"jsonrpc":"2.0","id":5,"method":"echo"}`, `{"jsonrpc":"2.0","id":5,"result":{"echoedMethod":"echo"}}`},
	} {
		io.WriteString(inW, tc.req+"\n")
		got, err := lines.ReadString('\n')
		if err != nil || strings.TrimSuffix(got, "\n") != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.req, got, tc.want)
		}
	}
}

// TestEOFAnswersInFlight: at stdin's end every request already sent is
// answered (a turn still running answers cancelled) before Run returns.
func TestEOFAnswersInFlight(t *testing.T) {
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`,
	}, "\n") + "\n"
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	go func() { Run(context.Background(), inR, outW, io.Discard, Options{}); outW.Close(); close(done) }()
	lines := bufio.NewReader(outR)
	io.WriteString(inW, in)
	for range 2 {
		lines.ReadString('\n')
	}
	// A turn that would never end, requests behind it, then stdin's end.
	io.WriteString(inW, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"mock-1","prompt":[{"type":"text","text":"wait"}]}}`+"\n"+
		`{"jsonrpc":"2.0","id":4,"method":"session/list","params":{}}`+"\n"+
		`{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":1}}`+"\n")
	inW.Close()
	answered := map[string]string{}
	for {
		l, err := lines.ReadString('\n')
		if err != nil {
			break
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.Unmarshal([]byte(l), &m)
		if m.Method == "" {
			answered[string(m.ID)] = l
		}
	}
	<-done
	if len(answered) != 3 || !strings.Contains(answered["3"], `"stopReason":"cancelled"`) || answered["4"] == "" || answered["5"] == "" {
		t.Fatalf("answers at stdin's end: %q", answered)
	}
}

// TestEOFCancelsTurnAwaitingPermission: a turn still waiting for the
// client's permission answer at stdin's end answers cancelled, as any other
// running turn does, not -32603 "peer disconnected" (a DELETE of the
// instance during a permission prompt must settle the client's prompt as
// cancelled).
func TestEOFCancelsTurnAwaitingPermission(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	go func() { Run(context.Background(), inR, outW, io.Discard, Options{}); outW.Close(); close(done) }()
	lines := bufio.NewReader(outR)
	io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`+"\n"+
		`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`+"\n")
	for range 2 {
		lines.ReadString('\n')
	}
	io.WriteString(inW, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"mock-1","prompt":[{"type":"text","text":"permission"}]}}`+"\n")
	if l, _ := lines.ReadString('\n'); !strings.Contains(l, `"session/request_permission"`) {
		t.Fatalf("want the permission request, got %q", l)
	}
	inW.Close()
	var rest []string
	for {
		l, err := lines.ReadString('\n')
		if err != nil {
			break
		}
		rest = append(rest, l)
	}
	<-done
	if len(rest) != 1 || !strings.Contains(rest[0], `"id":3,"result":{"stopReason":"cancelled"}`) {
		t.Fatalf("at stdin's end the permission turn answered %q, want stopReason cancelled", rest)
	}
}
