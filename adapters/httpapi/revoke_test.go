package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/app/authz"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// A stream is decided when it opens; a reload that revokes what let it
// open ends it, as a new request would be refused: a token taken out of
// the token file, a policy that now denies. Streams whose credentials
// still pass go on.
func TestReloadEndsRevokedStreams(t *testing.T) {
	tokens := authz.NewTokens("tok-a", "tok-b")
	reloads := NewReloads("tokens", "policies")
	var denyB atomic.Bool
	fa := &fakeAuthorizer{decide: func(r domain.AuthRequest) (domain.Decision, error) {
		if denyB.Load() && r.Headers["authorization"][0] == "Bearer tok-b" {
			return domain.Decision{Status: 403, Message: "b is out"}, nil
		}
		return domain.Decision{Verdict: domain.Pass}, nil
	}}
	f := newACPFixture(t, acp.Options{}, Config{Tokens: tokens, Reloads: reloads, Authorizer: fa, Heartbeat: time.Hour})
	resp, body := doHTTP(t, "POST", f.srv.URL+"/v1/acp/s?agent=a", `{"jsonrpc":"2.0","method":"hello"}`,
		map[string]string{"Content-Type": jsonCTHeader, "Authorization": "Bearer tok-a"})
	if resp.StatusCode != 202 {
		t.Fatalf("bootstrap: %d %s", resp.StatusCode, body)
	}
	p := f.runner.Processes()[0]
	a := f.stream(t, "s", map[string]string{"Authorization": "Bearer tok-a"})
	b := f.stream(t, "s", map[string]string{"Authorization": "Bearer tok-b"})
	fmt.Fprintln(p.AgentStdout, `{"n":1}`)
	for _, s := range []*sse{a, b} {
		if got := s.next(t); got != event(1, `{"n":1}`) {
			t.Fatalf("frame 1 = %q", got)
		}
	}

	// tok-a leaves the token file: its stream ends, tok-b's goes on.
	tokens.Set([]string{"tok-b"})
	reloads.Count("tokens", nil)
	if err := ended(a); err != nil {
		t.Errorf("tok-a's stream after the reload: %v", err)
	}
	fmt.Fprintln(p.AgentStdout, `{"n":2}`)
	if got := b.next(t); got != event(2, `{"n":2}`) {
		t.Errorf("tok-b's stream after the reload: %q", got)
	}
	if resp, _ := doHTTP(t, "GET", f.srv.URL+"/v1/acp/s", "", map[string]string{"Accept": "text/event-stream", "Authorization": "Bearer tok-a"}); resp.StatusCode != 401 {
		t.Errorf("a new stream with tok-a: %d", resp.StatusCode)
	}

	// A failed reload changes nothing; a policy reload that now denies
	// tok-b ends its stream too.
	denyB.Store(true)
	reloads.Count("policies", errors.New("bad module"))
	fmt.Fprintln(p.AgentStdout, `{"n":3}`)
	if got := b.next(t); got != event(3, `{"n":3}`) {
		t.Errorf("tok-b's stream after a failed reload: %q", got)
	}
	reloads.Count("policies", nil)
	if err := ended(b); err != nil {
		t.Errorf("tok-b's stream after the policy reload: %v", err)
	}
}

// ended waits for the stream's end, reading whatever comes first.
func ended(s *sse) error {
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, s.r)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		s.resp.Body.Close()
		return errors.New("still open 10 s after the reload")
	}
}

// The same for ACP's WebSocket: it is closed with 1008, saying why.
func TestReloadClosesRevokedWebSockets(t *testing.T) {
	tokens := authz.NewTokens("tok-a")
	reloads := NewReloads("tokens")
	f := newACPFixture(t, acp.Options{}, Config{Tokens: tokens, Reloads: reloads})
	url := "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/acp/a"
	ctx := t.Context()
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer tok-a"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	for _, m := range []string{`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`, `{"jsonrpc":"2.0","id":1,"method":"echo"}`} {
		if err := ws.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if _, b, err := ws.Read(ctx); err != nil || !strings.Contains(string(b), `"echo"`) {
		t.Fatalf("echo: %s %v", b, err)
	}
	tokens.Set([]string{"tok-other"})
	reloads.Count("tokens", nil)
	readCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, _, err = ws.Read(readCtx)
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("after the reload: %v, want a 1008 close naming the revocation", err)
	}
}

// eventsOpenCode serves /opencode/event as a stream that lasts until its
// request's context ends, as the real adapter's does.
type eventsOpenCode struct{ fakeOpenCode }

func (f *eventsOpenCode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	_ = http.NewResponseController(w).Flush()
	<-r.Context().Done()
}

// OpenCode's event streams end too when their password is revoked.
func TestReloadEndsRevokedOpenCodeStreams(t *testing.T) {
	tokens := authz.NewTokens("pw-a", "pw-b")
	reloads := NewReloads("tokens")
	srv := httptest.NewServer(New(Config{Tokens: tokens, Reloads: reloads, OpenCode: &eventsOpenCode{}}))
	defer srv.Close()
	open := func(pw string) *http.Response {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/opencode/global/event", nil)
		req.Header.Set("Authorization", basic("opencode", pw))
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("open: %v %v", err, resp)
		}
		return resp
	}
	a, b := open("pw-a"), open("pw-b")
	defer a.Body.Close()
	defer b.Body.Close()
	tokens.Set([]string{"pw-b"})
	reloads.Count("tokens", nil)
	if err := ended(&sse{resp: a, r: bufio.NewReader(a.Body)}); err != nil {
		t.Errorf("pw-a's stream: %v", err)
	}
	// (That the others go on is TestReloadEndsRevokedStreams'.)
}
