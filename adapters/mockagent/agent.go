package mockagent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// agent implements the ACP methods of the mock.
type agent struct {
	conn   *acp.AgentSideConnection
	stderr io.Writer
	exit   func(code int)

	mu      sync.Mutex
	cancels map[acp.SessionId]context.CancelFunc
}

var _ acp.Agent = (*agent)(nil)

func (a *agent) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	return acp.InitializeResponse{
		ProtocolVersion:   acp.ProtocolVersionNumber,
		AgentCapabilities: acp.AgentCapabilities{},
		AuthMethods:       []acp.AuthMethod{},
	}, nil
}

func (a *agent) Authenticate(ctx context.Context, p acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func (a *agent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return acp.NewSessionResponse{SessionId: acp.SessionId("mock-" + hex.EncodeToString(b[:]))}, nil
}

func (a *agent) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	return acp.LoadSessionResponse{}, nil
}

func (a *agent) ListSessions(ctx context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
}

func (a *agent) ResumeSession(ctx context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
}

func (a *agent) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	a.Cancel(ctx, acp.CancelNotification{SessionId: p.SessionId}) //nolint:errcheck // never fails
	return acp.CloseSessionResponse{}, nil
}

func (a *agent) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, nil
}

func (a *agent) SetSessionConfigOption(ctx context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
}

func (a *agent) Cancel(ctx context.Context, p acp.CancelNotification) error {
	a.mu.Lock()
	cancel := a.cancels[p.SessionId]
	a.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return nil
}

func (a *agent) Prompt(_ context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	ctx, cancel := context.WithCancel(context.Background())
	a.mu.Lock()
	if prev := a.cancels[p.SessionId]; prev != nil {
		prev()
	}
	a.cancels[p.SessionId] = cancel
	a.mu.Unlock()
	defer func() {
		cancel()
		a.mu.Lock()
		delete(a.cancels, p.SessionId)
		a.mu.Unlock()
	}()

	text := promptText(p.Prompt)
	if err := a.turn(ctx, p.SessionId, text); err != nil {
		if ctx.Err() != nil {
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		}
		return acp.PromptResponse{}, err
	}
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
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

func (a *agent) say(ctx context.Context, sid acp.SessionId, u acp.SessionUpdate) error {
	return a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: u})
}

// turn plays the prompt's scenario (see the package doc).
func (a *agent) turn(ctx context.Context, sid acp.SessionId, text string) error {
	word, rest, _ := strings.Cut(strings.TrimSpace(text), " ")
	switch strings.ToLower(word) {
	case "stream":
		n, _ := strconv.Atoi(strings.TrimSpace(rest))
		for i := 1; i <= n; i++ {
			if err := a.say(ctx, sid, acp.UpdateAgentMessageText(fmt.Sprintf("mock: chunk %d", i))); err != nil {
				return err
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		return nil
	case "slow":
		ms, _ := strconv.Atoi(strings.TrimSpace(rest))
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	case "permission":
		resp, err := a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
			SessionId: sid,
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
		return a.say(ctx, sid, acp.UpdateAgentMessageText("mock: permission "+outcome))
	case "think":
		if err := a.say(ctx, sid, acp.UpdateAgentThoughtText("mock: thinking about "+rest)); err != nil {
			return err
		}
	case "tool":
		if err := a.say(ctx, sid, acp.StartToolCall("mock-tool", "Read mock.txt",
			acp.WithStartKind(acp.ToolKindRead), acp.WithStartStatus(acp.ToolCallStatusInProgress))); err != nil {
			return err
		}
		if err := a.say(ctx, sid, acp.UpdateToolCall("mock-tool", acp.WithUpdateStatus(acp.ToolCallStatusCompleted))); err != nil {
			return err
		}
	case "plan":
		if err := a.say(ctx, sid, acp.UpdatePlan(
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
	return a.say(ctx, sid, acp.UpdateAgentMessageText("mock: "+text))
}

// exitProcess is os.Exit, replaceable in tests.
var exitProcess = os.Exit
