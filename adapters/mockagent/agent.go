package mockagent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"
)

// Bounds that keep the mock's memory small whatever a client sends.
const (
	maxSessions    = 1024      // sessions held at once (session/close frees one)
	maxHistoryCost = 256 << 10 // bytes of updates kept per session for session/load
	maxTitle       = 64        // runes of the first prompt kept as a session's title
)

// The modes and config options every session starts with.
var (
	modes = []acp.SessionMode{
		{Id: "ask", Name: "Ask", Description: acp.Ptr("Answer without changing anything")},
		{Id: "code", Name: "Code", Description: acp.Ptr("Make changes")},
	}
	configOptions = []configOption{
		{"model", "Model", acp.SessionConfigOptionCategoryModel, []string{"mock-fast", "mock-smart"}},
		{"thought_level", "Thinking", acp.SessionConfigOptionCategoryThoughtLevel, []string{"low", "high"}},
	}
)

type configOption struct {
	id, name string
	category acp.SessionConfigOptionCategory
	values   []string // the first is the default
}

// session is one session's state, in memory only.
type session struct {
	id      acp.SessionId
	cwd     string
	dirs    []string // additionalDirectories
	title   string   // the first prompt's text, cut
	mode    acp.SessionModeId
	config  map[string]string // config option id -> value
	history []acp.SessionUpdate
	cost    []int // the encoded size of each history entry
	total   int   // sum of cost

	cancel context.CancelFunc // the turn in flight, if any
	turn   chan struct{}      // closed when that turn has ended
}

// agent implements the ACP methods of the mock.
type agent struct {
	conn    *acp.AgentSideConnection
	stderr  io.Writer
	exit    func(code int)
	version string

	mu       sync.Mutex
	closing  bool // stdin has ended: turns are cancelled as they start
	next     int  // the number of the last session created
	sessions map[acp.SessionId]*session
	order    []acp.SessionId // creation order, for session/list
}

var (
	_ acp.Agent       = (*agent)(nil)
	_ acp.AgentLoader = (*agent)(nil)
)

func newAgent(stderr io.Writer, version string) *agent {
	return &agent{stderr: stderr, exit: exitProcess, version: version, sessions: map[acp.SessionId]*session{}}
}

func (a *agent) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentInfo:       &acp.Implementation{Name: "mock", Title: acp.Ptr("Sandbox Agent mock"), Version: a.version},
		AgentCapabilities: acp.AgentCapabilities{
			LoadSession:        true,
			PromptCapabilities: acp.PromptCapabilities{Image: true, Audio: true, EmbeddedContext: true},
			SessionCapabilities: acp.SessionCapabilities{
				List:                  &acp.SessionListCapabilities{},
				Resume:                &acp.SessionResumeCapabilities{},
				Close:                 &acp.SessionCloseCapabilities{},
				AdditionalDirectories: &acp.SessionAdditionalDirectoriesCapabilities{},
			},
		},
		AuthMethods: []acp.AuthMethod{},
	}, nil
}

func (a *agent) Authenticate(ctx context.Context, p acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func (a *agent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.sessions) >= maxSessions {
		return acp.NewSessionResponse{}, acp.NewInternalError(map[string]any{"error": fmt.Sprintf("the mock holds at most %d sessions; close one (session/close)", maxSessions)})
	}
	a.next++
	s := &session{
		id: acp.SessionId("mock-" + strconv.Itoa(a.next)), cwd: p.Cwd, dirs: slices.Clone(p.AdditionalDirectories),
		mode: modes[0].Id, config: map[string]string{},
	}
	for _, o := range configOptions {
		s.config[o.id] = o.values[0]
	}
	a.sessions[s.id] = s
	a.order = append(a.order, s.id)
	return acp.NewSessionResponse{SessionId: s.id, Modes: s.modeState(), ConfigOptions: s.configState()}, nil
}

// LoadSession replays the session's history as session/update
// notifications, then answers: the SDK writes the answer after this
// returns, so every replayed update comes before it.
func (a *agent) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	a.mu.Lock()
	s, err := a.lookup(p.SessionId)
	if err != nil {
		a.mu.Unlock()
		return acp.LoadSessionResponse{}, err
	}
	s.reopen(p.Cwd, p.AdditionalDirectories)
	history := slices.Clone(s.history)
	resp := acp.LoadSessionResponse{Modes: s.modeState(), ConfigOptions: s.configState()}
	a.mu.Unlock()
	for _, u := range history {
		if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: u}); err != nil {
			return acp.LoadSessionResponse{}, err
		}
	}
	return resp, nil
}

// ResumeSession reopens a session without replaying anything.
func (a *agent) ResumeSession(ctx context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, err := a.lookup(p.SessionId)
	if err != nil {
		return acp.ResumeSessionResponse{}, err
	}
	s.reopen(p.Cwd, p.AdditionalDirectories)
	return acp.ResumeSessionResponse{Modes: s.modeState(), ConfigOptions: s.configState()}, nil
}

// ListSessions lists the sessions in the order they were created, filtered
// by cwd and by the exact list of additional directories. Everything fits
// in one page.
func (a *agent) ListSessions(ctx context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	if p.Cursor != nil {
		return acp.ListSessionsResponse{}, acp.NewInvalidParams(map[string]any{"error": "unknown cursor: the mock lists every session in one page"})
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	out := acp.ListSessionsResponse{Sessions: []acp.SessionInfo{}}
	for _, id := range a.order {
		s := a.sessions[id]
		if (p.Cwd != nil && *p.Cwd != s.cwd) || (len(p.AdditionalDirectories) > 0 && !slices.Equal(p.AdditionalDirectories, s.dirs)) {
			continue
		}
		info := acp.SessionInfo{SessionId: s.id, Cwd: s.cwd, AdditionalDirectories: slices.Clone(s.dirs)}
		if s.title != "" {
			info.Title = acp.Ptr(s.title)
		}
		out.Sessions = append(out.Sessions, info)
	}
	return out, nil
}

// CloseSession ends the turn in flight (as session/cancel would), waits
// for it to end, and forgets the session: the mock keeps nothing once a
// session is closed, so it can no longer be listed, loaded or resumed.
// Closing an unknown session succeeds.
func (a *agent) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	a.mu.Lock()
	var turn chan struct{}
	if s := a.sessions[p.SessionId]; s != nil {
		turn = s.stopTurn()
		delete(a.sessions, p.SessionId)
		a.order = slices.DeleteFunc(a.order, func(x acp.SessionId) bool { return x == p.SessionId })
	}
	a.mu.Unlock()
	if turn != nil {
		<-turn
	}
	return acp.CloseSessionResponse{}, nil
}

// SetSessionMode switches the mode and reports it with a current_mode_update
// before answering.
func (a *agent) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	a.mu.Lock()
	s, err := a.lookup(p.SessionId)
	if err == nil && !slices.ContainsFunc(modes, func(m acp.SessionMode) bool { return m.Id == p.ModeId }) {
		err = acp.NewInvalidParams(map[string]any{"error": fmt.Sprintf("unknown mode %q", p.ModeId)})
	}
	if err != nil {
		a.mu.Unlock()
		return acp.SetSessionModeResponse{}, err
	}
	s.mode = p.ModeId
	a.mu.Unlock()
	err = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: acp.SessionUpdate{
		CurrentModeUpdate: &acp.SessionCurrentModeUpdate{CurrentModeId: p.ModeId, SessionUpdate: "current_mode_update"},
	}})
	return acp.SetSessionModeResponse{}, err
}

// SetSessionConfigOption sets one select option and answers with all of
// them. The mock has no boolean options.
func (a *agent) SetSessionConfigOption(ctx context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	if p.ValueId == nil {
		return acp.SetSessionConfigOptionResponse{}, acp.NewInvalidParams(map[string]any{"error": "the mock has no boolean config options"})
	}
	v := p.ValueId
	a.mu.Lock()
	defer a.mu.Unlock()
	s, err := a.lookup(v.SessionId)
	if err != nil {
		return acp.SetSessionConfigOptionResponse{}, err
	}
	i := slices.IndexFunc(configOptions, func(o configOption) bool { return o.id == string(v.ConfigId) })
	if i < 0 {
		return acp.SetSessionConfigOptionResponse{}, acp.NewInvalidParams(map[string]any{"error": fmt.Sprintf("unknown config option %q", v.ConfigId)})
	}
	if !slices.Contains(configOptions[i].values, string(v.Value)) {
		return acp.SetSessionConfigOptionResponse{}, acp.NewInvalidParams(map[string]any{"error": fmt.Sprintf("config option %q has no value %q", v.ConfigId, v.Value)})
	}
	s.config[string(v.ConfigId)] = string(v.Value)
	return acp.SetSessionConfigOptionResponse{ConfigOptions: s.configState()}, nil
}

func (a *agent) Cancel(ctx context.Context, p acp.CancelNotification) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.sessions[p.SessionId]; s != nil && s.cancel != nil {
		s.cancel()
	}
	return nil
}

func (a *agent) Prompt(_ context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	echoes, err := describeBlocks(p.Prompt)
	if err != nil {
		return acp.PromptResponse{}, err
	}
	text := promptText(p.Prompt)
	ctx, cancel := context.WithCancel(context.Background())
	turn := make(chan struct{})
	a.mu.Lock()
	s, err := a.lookup(p.SessionId)
	if err != nil {
		a.mu.Unlock()
		cancel()
		return acp.PromptResponse{}, err
	}
	if s.cancel != nil {
		s.cancel() // a new prompt ends the turn in flight
	}
	s.cancel, s.turn = cancel, turn
	if a.closing {
		cancel()
	}
	if s.title == "" && text != "" {
		s.title = cut(text, maxTitle)
	}
	for _, b := range p.Prompt {
		s.record(acp.UpdateUserMessage(b))
	}
	a.mu.Unlock()
	defer func() {
		cancel()
		a.mu.Lock()
		if s.turn == turn {
			s.cancel, s.turn = nil, nil
		}
		a.mu.Unlock()
		close(turn)
	}()

	err = func() error {
		for _, e := range echoes {
			if err := a.say(ctx, s, acp.UpdateAgentMessageText(e)); err != nil {
				return err
			}
		}
		return a.turn(ctx, s, text)
	}()
	if err != nil {
		if ctx.Err() != nil || a.stdinEnded() {
			// A request to the client (a permission prompt) fails as soon
			// as stdin ends, before cancelTurns cancels the turn: the turn
			// was cancelled by the end of stdin all the same.
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		}
		return acp.PromptResponse{}, err
	}
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
}

// stdinEnded reports whether the client's side of the connection is gone.
func (a *agent) stdinEnded() bool {
	select {
	case <-a.conn.Done():
		return true
	default:
		return false
	}
}

// cancelTurns cancels every turn still running (stdin has ended: no one
// is left to wait for).
func (a *agent) cancelTurns() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closing = true
	for _, s := range a.sessions {
		if s.cancel != nil {
			s.cancel()
		}
	}
}

// lookup finds a session. a.mu is held.
func (a *agent) lookup(id acp.SessionId) (*session, error) {
	s := a.sessions[id]
	if s == nil {
		return nil, resourceNotFound("unknown session %q", id)
	}
	return s, nil
}

// reopen takes the cwd and directories a session is loaded or resumed
// with. a.mu is held.
func (s *session) reopen(cwd string, dirs []string) {
	s.cwd = cwd
	if len(dirs) > 0 {
		s.dirs = slices.Clone(dirs)
	}
}

// stopTurn cancels the turn in flight and returns the channel closed when
// it has ended (nil when there is none). a.mu is held.
func (s *session) stopTurn() chan struct{} {
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	return s.turn
}

// record appends u to the history session/load replays, dropping the oldest
// entries past maxHistoryCost (an entry larger than that is not kept).
// a.mu is held.
func (s *session) record(u acp.SessionUpdate) {
	b, err := json.Marshal(u)
	if err != nil || len(b) > maxHistoryCost {
		return
	}
	s.history, s.cost, s.total = append(s.history, u), append(s.cost, len(b)), s.total+len(b)
	drop := 0
	for s.total > maxHistoryCost {
		s.total -= s.cost[drop]
		drop++
	}
	if drop > 0 {
		s.history = slices.Delete(s.history, 0, drop)
		s.cost = slices.Delete(s.cost, 0, drop)
	}
}

func (s *session) modeState() *acp.SessionModeState {
	return &acp.SessionModeState{CurrentModeId: s.mode, AvailableModes: slices.Clone(modes)}
}

func (s *session) configState() []acp.SessionConfigOption {
	out := make([]acp.SessionConfigOption, 0, len(configOptions))
	for _, o := range configOptions {
		values := make(acp.SessionConfigSelectOptionsUngrouped, 0, len(o.values))
		for _, v := range o.values {
			values = append(values, acp.SessionConfigSelectOption{Value: acp.SessionConfigValueId(v), Name: v})
		}
		out = append(out, acp.SessionConfigOption{Select: &acp.SessionConfigOptionSelect{
			Id: acp.SessionConfigId(o.id), Name: o.name, Category: acp.Ptr(o.category), Type: "select",
			CurrentValue: acp.SessionConfigValueId(s.config[o.id]),
			Options:      acp.SessionConfigSelectOptions{Ungrouped: &values},
		}})
	}
	return out
}

// resourceNotFound is ACP's -32002 error, which the pinned SDK has no
// constructor for.
func resourceNotFound(format string, args ...any) error {
	return &acp.RequestError{Code: -32002, Message: "Resource not found", Data: map[string]any{"error": fmt.Sprintf(format, args...)}}
}

func promptText(blocks []acp.ContentBlock) string {
	var parts []string
	for _, b := range blocks {
		if b.Text != nil {
			parts = append(parts, b.Text.Text)
		}
	}
	return strings.Join(parts, " ")
}

// describeBlocks is the one-line echo of each block that is not text, in
// order: what it is, its type and its size. Image, audio and blob data must
// be base64.
func describeBlocks(blocks []acp.ContentBlock) ([]string, error) {
	var out []string
	size := func(what, data string) (int, error) {
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return 0, acp.NewInvalidParams(map[string]any{"error": what + " data is not base64"})
		}
		return len(b), nil
	}
	for _, b := range blocks {
		switch {
		case b.Image != nil:
			n, err := size("image", b.Image.Data)
			if err != nil {
				return nil, err
			}
			out = append(out, fmt.Sprintf("mock: image %s, %d bytes", b.Image.MimeType, n))
		case b.Audio != nil:
			n, err := size("audio", b.Audio.Data)
			if err != nil {
				return nil, err
			}
			out = append(out, fmt.Sprintf("mock: audio %s, %d bytes", b.Audio.MimeType, n))
		case b.Resource != nil && b.Resource.Resource.TextResourceContents != nil:
			r := b.Resource.Resource.TextResourceContents
			out = append(out, fmt.Sprintf("mock: resource %s%s, %d bytes of text", r.Uri, mimeSuffix(r.MimeType), len(r.Text)))
		case b.Resource != nil && b.Resource.Resource.BlobResourceContents != nil:
			r := b.Resource.Resource.BlobResourceContents
			n, err := size("resource blob", r.Blob)
			if err != nil {
				return nil, err
			}
			out = append(out, fmt.Sprintf("mock: resource %s%s, %d bytes", r.Uri, mimeSuffix(r.MimeType), n))
		case b.ResourceLink != nil:
			out = append(out, fmt.Sprintf("mock: resource_link %s %s", b.ResourceLink.Name, b.ResourceLink.Uri))
		}
	}
	return out, nil
}

func mimeSuffix(m *string) string {
	if m == nil || *m == "" {
		return ""
	}
	return " (" + *m + ")"
}

// cut shortens s to at most n runes.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n])
}

// say sends one update of a turn and records it for session/load.
func (a *agent) say(ctx context.Context, s *session, u acp.SessionUpdate) error {
	if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: s.id, Update: u}); err != nil {
		return err
	}
	a.mu.Lock()
	s.record(u)
	a.mu.Unlock()
	return nil
}

// turn plays the prompt's scenario (see the package doc).
func (a *agent) turn(ctx context.Context, s *session, text string) error {
	word, rest, _ := strings.Cut(strings.TrimSpace(text), " ")
	switch strings.ToLower(word) {
	case "stream":
		n, _ := strconv.Atoi(strings.TrimSpace(rest))
		for i := 1; i <= n; i++ {
			if err := a.say(ctx, s, acp.UpdateAgentMessageText(fmt.Sprintf("mock: chunk %d", i))); err != nil {
				return err
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		return nil
	case "wait":
		// An update, then nothing until the turn is cancelled (session/cancel,
		// session/close or a new prompt): a client sees the turn under way.
		if err := a.say(ctx, s, acp.UpdateAgentMessageText("mock: waiting")); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	case "slow":
		ms, _ := strconv.Atoi(strings.TrimSpace(rest))
		t := time.NewTimer(time.Duration(ms) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	case "permission":
		resp, err := a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
			SessionId: s.id,
			ToolCall: acp.ToolCallUpdate{
				ToolCallId: "mock-permission",
				Title:      acp.Ptr("Write mock.txt"),
				Kind:       acp.Ptr(acp.ToolKindEdit),
				Status:     acp.Ptr(acp.ToolCallStatusPending),
			},
			Options: []acp.PermissionOption{
				{OptionId: "allow", Name: "Allow", Kind: acp.PermissionOptionKindAllowOnce},
				{OptionId: "reject", Name: "Reject", Kind: acp.PermissionOptionKindRejectOnce},
			},
		})
		if err != nil {
			return err
		}
		outcome := "cancelled"
		if resp.Outcome.Selected != nil {
			outcome = "selected " + string(resp.Outcome.Selected.OptionId)
		}
		return a.say(ctx, s, acp.UpdateAgentMessageText("mock: permission "+outcome))
	case "think":
		if err := a.say(ctx, s, acp.UpdateAgentThoughtText("mock: thinking about "+rest)); err != nil {
			return err
		}
	case "tool":
		if err := a.say(ctx, s, acp.StartToolCall("mock-tool", "Read mock.txt",
			acp.WithStartKind(acp.ToolKindRead), acp.WithStartStatus(acp.ToolCallStatusInProgress))); err != nil {
			return err
		}
		if err := a.say(ctx, s, acp.UpdateToolCall("mock-tool", acp.WithUpdateStatus(acp.ToolCallStatusCompleted))); err != nil {
			return err
		}
	case "plan":
		if err := a.say(ctx, s, acp.UpdatePlan(
			acp.PlanEntry{Content: "read the code", Priority: acp.PlanEntryPriorityHigh, Status: acp.PlanEntryStatusInProgress},
			acp.PlanEntry{Content: "write the fix", Priority: acp.PlanEntryPriorityMedium, Status: acp.PlanEntryStatusPending},
		)); err != nil {
			return err
		}
	case "stderr":
		fmt.Fprintln(a.stderr, rest)
	case "exit":
		code := 1
		if c, err := strconv.Atoi(strings.TrimSpace(rest)); err == nil {
			code = c
		}
		a.exit(code)
	}
	return a.say(ctx, s, acp.UpdateAgentMessageText("mock: "+text))
}

// exitProcess is os.Exit, replaceable in tests.
var exitProcess = os.Exit
