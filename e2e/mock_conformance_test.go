package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// The official ACP conformance kit (acp-tck) is a Python project that is
// published neither on npm nor on any registry this machine reaches, so
// TestMockConformance runs its v1 requirements written out here: the same
// requests in the same order, the same assertions, on one connection per
// path. Each requirement ends PASS, FAIL or SKIP (not applicable: the mock
// does not advertise it), by the kit's id.

// linePeer is one way of talking to the mock: JSON-RPC lines in and out.
type linePeer interface {
	send(t *testing.T, line string)
	next(t *testing.T, within time.Duration) string
}

// chanPeer delivers agent lines gathered by goroutines of its own.
type chanPeer struct {
	lines chan string
	errs  chan error
}

func newChanPeer() chanPeer {
	return chanPeer{lines: make(chan string, 1024), errs: make(chan error, 16)}
}

func (c chanPeer) next(t *testing.T, within time.Duration) string {
	t.Helper()
	select {
	case l := <-c.lines:
		return l
	case err := <-c.errs:
		t.Fatalf("transport: %v", err)
	case <-time.After(within):
		t.Fatalf("no message within %v", within)
	}
	return ""
}

// pipePeer is a child process speaking on stdin and stdout: the mock
// itself, or the bridge.
type pipePeer struct {
	stdin io.WriteCloser
	lr    *lineReader
}

func (p *pipePeer) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

func (p *pipePeer) next(t *testing.T, within time.Duration) string { return p.lr.next(t, within) }

// startMockProcess runs sandbox-agent mock-agent-process; at cleanup its
// stdin is closed and it must exit on its own (ACP-SHUTDOWN-001).
func startMockProcess(t *testing.T) *pipePeer {
	cmd := exec.Command(harness.Binary, "mock-agent-process")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the mock exited with %v at stdin EOF", err)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Error("ACP-SHUTDOWN-001: the mock did not exit within 10 s of stdin closing")
		}
	})
	return &pipePeer{stdin: stdin, lr: newLineReader(stdout)}
}

func bridgePeer(t *testing.T, d *harness.Daemon) *pipePeer {
	b := startBridge(t, d, "--agent", "mock")
	t.Cleanup(func() {
		b.stdin.Close()
		if err := b.wait(t, 15*time.Second); err != nil {
			t.Errorf("bridge exit: %v", err)
		}
	})
	return &pipePeer{stdin: b.stdin, lr: newLineReader(b.stdout)}
}

// peek reads what a line is: its kind and params.sessionId.
func peek(line string) (isRequest, isMessage bool, session string) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
		Params struct {
			SessionID string `json:"sessionId"`
		} `json:"params"`
	}
	_ = json.Unmarshal([]byte(line), &m)
	return m.Method != nil && m.ID != nil, m.Method != nil, m.Params.SessionID
}

// v1Peer talks over POST /v1/acp/{id} and its event stream, as the Go
// client does: every agent message is read from the stream (which carries
// responses too, in the agent's order); a request's POST waits for its
// answer in a goroutine of its own.
type v1Peer struct {
	chanPeer
	d       *harness.Daemon
	id      string // the server id
	started bool
}

func (p *v1Peer) send(t *testing.T, line string) {
	t.Helper()
	if !p.started {
		st, b := p.d.Post("/v1/acp/"+p.id+"?agent=mock", line)
		if st != http.StatusOK {
			t.Fatalf("bootstrap: %d %s", st, b)
		}
		p.started = true
		s := p.d.Stream("/v1/acp/"+p.id, "Last-Event-ID", "0")
		go func() {
			for {
				ev, err := s.Next()
				if err != nil {
					p.errs <- err
					return
				}
				p.lines <- ev.Data
			}
		}()
		return
	}
	if isRequest, _, _ := peek(line); isRequest {
		go func() {
			if st, b := p.d.Post("/v1/acp/"+p.id, line); st != http.StatusOK && st != http.StatusAccepted {
				p.errs <- fmt.Errorf("POST %.80s: %d %s", line, st, b)
			}
		}()
		return
	}
	if st, b := p.d.Post("/v1/acp/"+p.id, line); st != http.StatusAccepted {
		t.Fatalf("POST %.80s: %d %s", line, st, b)
	}
}

// stdHTTPPeer talks over ACP's Streamable HTTP transport at /acp/mock:
// initialize answered in its POST, everything else on the connection's
// stream (no session stream is opened, so session traffic comes there too).
type stdHTTPPeer struct {
	chanPeer
	d    *harness.Daemon
	conn string
}

func (p *stdHTTPPeer) send(t *testing.T, line string) {
	t.Helper()
	if p.conn == "" {
		st, h, b := p.d.Do(http.MethodPost, "/acp/mock", []byte(line), "Content-Type", "application/json")
		if st != http.StatusOK {
			t.Fatalf("initialize: %d %s", st, b)
		}
		p.conn = h.Get("Acp-Connection-Id")
		p.lines <- string(bytes.TrimSpace(b))
		s := p.d.Stream("/acp/mock", "Acp-Connection-Id", p.conn)
		go func() {
			for {
				ev, err := s.Next()
				if err != nil {
					p.errs <- err
					return
				}
				p.lines <- ev.Data
			}
		}()
		return
	}
	h := []string{"Content-Type", "application/json", "Acp-Connection-Id", p.conn}
	if _, _, session := peek(line); session != "" {
		h = append(h, "Acp-Session-Id", session)
	}
	if st, _, b := p.d.Do(http.MethodPost, "/acp/mock", []byte(line), h...); st != http.StatusAccepted {
		t.Fatalf("POST %.80s: %d %s", line, st, b)
	}
}

// wsPeer talks over ACP's WebSocket transport at /acp/mock.
type wsPeer struct{ c *wsClient }

func (p *wsPeer) send(t *testing.T, line string) { p.c.send(t, line) }
func (p *wsPeer) next(t *testing.T, within time.Duration) string {
	return p.c.readText(t, within)
}

// rpc is one agent message, parsed.
type rpc struct {
	raw    string
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// update is the params of a session/update.
type update struct {
	SessionID string `json:"sessionId"`
	Update    struct {
		SessionUpdate string `json:"sessionUpdate"`
		CurrentModeID string `json:"currentModeId"`
		Content       struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"update"`
}

func (m rpc) update() update {
	var u update
	_ = json.Unmarshal(m.Params, &u)
	return u
}

// kit runs the requirements over one peer and records what it saw.
type kit struct {
	t          *testing.T
	p          linePeer
	id         int
	transcript []string          // "> " sent, "< " received, in order
	common     int               // transcript lines before the stdio-only probes
	results    map[string]string // requirement id -> PASS, SKIP: why, FAIL: why
}

const (
	confCwd   = "/tmp/acp-conformance"
	confOther = "/tmp/acp-conformance/no-session-here"
)

func (k *kit) send(line string) {
	k.transcript = append(k.transcript, "> "+line)
	k.p.send(k.t, line)
}

// recv reads one agent message, checking ACP-TRANSPORT-001 on it.
func (k *kit) recv() rpc {
	l := k.p.next(k.t, 30*time.Second)
	k.transcript = append(k.transcript, "< "+l)
	var m rpc
	var env struct {
		JSONRPC string `json:"jsonrpc"`
	}
	err := json.Unmarshal([]byte(l), &m)
	if err == nil {
		err = json.Unmarshal([]byte(l), &env)
	}
	k.check("ACP-TRANSPORT-001", err == nil && env.JSONRPC == "2.0" && !strings.ContainsAny(l, "\n\r"), "not one JSON-RPC 2.0 message: %.200s", l)
	k.check("ACP-TRANSPORT-002", utf8.ValidString(l), "not UTF-8: %q", l)
	m.raw = l
	// The client advertised no capability: the agent may call none of
	// these (ACP-CLIENTCAP-001/002/003).
	k.check("ACP-CLIENTCAP-001", !strings.HasPrefix(m.Method, "fs/"), "%s without the fs capability", m.Method)
	k.check("ACP-CLIENTCAP-002", !strings.HasPrefix(m.Method, "terminal/"), "%s without the terminal capability", m.Method)
	k.check("ACP-CLIENTCAP-003", m.Method != "elicitation/create", "%s without an elicitation capability", m.Method)
	if m.Method == "session/update" {
		// ACP-SCHEMA-001, as far as acp-go-sdk's types check it.
		var n acp.SessionNotification
		err := json.Unmarshal(m.Params, &n)
		if err == nil {
			err = n.Validate()
		}
		k.check("ACP-SCHEMA-001", err == nil, "session/update %.200s: %v", m.Params, err)
	}
	return m
}

// check records a requirement's outcome; a failure sticks.
func (k *kit) check(req string, ok bool, format string, args ...any) {
	if strings.HasPrefix(k.results[req], "FAIL") {
		return
	}
	if ok {
		k.results[req] = "PASS"
		return
	}
	k.results[req] = "FAIL: " + fmt.Sprintf(format, args...)
}

// call sends a request and reads until its answer; it returns the answer
// and the messages that came before it.
func (k *kit) call(method string, params any) (rpc, []rpc) {
	k.id++
	return k.callID(fmt.Sprint(k.id), method, params)
}

func (k *kit) callID(id, method string, params any) (rpc, []rpc) {
	line := `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `"`
	if params != nil {
		p, _ := json.Marshal(params)
		line += `,"params":` + string(p)
	}
	k.send(line + "}")
	return k.until(id)
}

// until reads until the response with the given raw id.
func (k *kit) until(id string) (rpc, []rpc) {
	var before []rpc
	for {
		m := k.recv()
		if m.Method == "" && string(m.ID) == id {
			return m, before
		}
		before = append(before, m)
	}
}

func (k *kit) notify(method string, params any) {
	p, _ := json.Marshal(params)
	k.send(`{"jsonrpc":"2.0","method":"` + method + `","params":` + string(p) + `}`)
}

// quiet checks nothing but the answer to a probe comes next: what the
// kit's quiet period checks, made exact with a request the agent answers
// in order.
func (k *kit) quiet(req, what string) {
	_, before := k.call("session/list", map[string]any{})
	k.check(req, len(before) == 0, "%s: %d message(s) came after: %.200s", what, len(before), firstRaw(before))
}

func firstRaw(ms []rpc) string {
	if len(ms) == 0 {
		return ""
	}
	return ms[0].raw
}

func (k *kit) result(m rpc, into any) bool {
	return m.Error == nil && m.Result != nil && json.Unmarshal(m.Result, into) == nil
}

type sessionResult struct {
	SessionID string `json:"sessionId"`
	Modes     *struct {
		CurrentModeID  string `json:"currentModeId"`
		AvailableModes []struct {
			ID string `json:"id"`
		} `json:"availableModes"`
	} `json:"modes"`
	ConfigOptions []configOption `json:"configOptions"`
}

type configOption struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Type         string          `json:"type"`
	CurrentValue json.RawMessage `json:"currentValue"`
	Options      []struct {
		Value json.RawMessage `json:"value"`
	} `json:"options"`
}

func (k *kit) newSession(params map[string]any) (sessionResult, rpc) {
	m, _ := k.call("session/new", params)
	var r sessionResult
	k.result(m, &r)
	return r, m
}

// prompt runs a turn to its end and returns the stop reason and the turn's
// updates.
func (k *kit) prompt(session string, blocks ...any) (string, []rpc, rpc) {
	m, before := k.call("session/prompt", map[string]any{"sessionId": session, "prompt": blocks})
	var r struct {
		StopReason string `json:"stopReason"`
	}
	k.result(m, &r)
	return r.StopReason, before, m
}

func text(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

var stopReasons = []string{"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"}

// run plays the v1 requirements. stdio adds the probes of lines that are
// not messages, which only a stdio agent (or the bridge) answers: over
// HTTP the daemon refuses them itself.
func (k *kit) run(stdio bool, fresh func() linePeer) {
	// ACP-INIT-003, on a connection of its own: a version the agent does
	// not support is answered with one it does, not echoed.
	p2 := fresh()
	probe := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":65535,"clientCapabilities":{},"clientInfo":{"name":"acp-tck","version":"0"},"info":{"name":"acp-tck","version":"0"}}}`
	p2.send(k.t, probe)
	answer := p2.next(k.t, 30*time.Second)
	k.transcript = append(k.transcript, "> "+probe, "< "+answer)
	var pv struct {
		Result struct {
			ProtocolVersion int `json:"protocolVersion"`
		} `json:"result"`
	}
	k.check("ACP-INIT-003", json.Unmarshal([]byte(answer), &pv) == nil && pv.Result.ProtocolVersion == 1, "initialize 65535: %s", answer)

	// initialize (ACP-INIT-001/002/004, JSONRPC-001 integer id, AUTH-001/002)
	init, _ := k.callID("424242", "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	var ir struct {
		ProtocolVersion   *int `json:"protocolVersion"`
		AgentCapabilities struct {
			LoadSession         bool `json:"loadSession"`
			PromptCapabilities  map[string]bool
			SessionCapabilities map[string]json.RawMessage `json:"sessionCapabilities"`
		} `json:"agentCapabilities"`
		AgentInfo   *struct{ Name, Title, Version string } `json:"agentInfo"`
		AuthMethods []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		} `json:"authMethods"`
	}
	ok := k.result(init, &ir)
	k.check("ACP-JSONRPC-001", string(init.ID) == "424242", "integer id not echoed: %s", init.raw)
	k.check("ACP-JSONRPC-002", (init.Error == nil) != (init.Result == nil), "initialize: result xor error: %s", init.raw)
	k.check("ACP-INIT-001", ok && ir.ProtocolVersion != nil, "initialize: %s", init.raw)
	k.check("ACP-INIT-002", ok && ir.ProtocolVersion != nil && *ir.ProtocolVersion == 1, "protocolVersion for a v1 request: %s", init.raw)
	k.check("ACP-INIT-004", ir.AgentInfo != nil && ir.AgentInfo.Name != "" && ir.AgentInfo.Version != "", "no agentInfo with name and version: %s", init.raw)
	ids := map[string]bool{}
	for _, a := range ir.AuthMethods {
		k.check("ACP-AUTH-001", !ids[a.ID], "duplicate auth method %q", a.ID)
		k.check("ACP-AUTH-002", a.Type != "terminal", "terminal auth method without the client capability")
		ids[a.ID] = true
	}
	k.check("ACP-AUTH-001", true, "")
	k.check("ACP-AUTH-002", true, "")
	caps := ir.AgentCapabilities
	has := func(c string) bool { _, ok := caps.SessionCapabilities[c]; return ok }

	// session/new (SESSION-001/002, string ids, AUTH-005, CONFIG-003,
	// MODES-001, CONFIG-001)
	m, _ := k.callID(`"tck-string-id"`, "session/new", map[string]any{"cwd": confCwd, "mcpServers": []any{}})
	k.check("ACP-JSONRPC-001", string(m.ID) == `"tck-string-id"`, "string id not echoed: %s", m.raw)
	var s1 sessionResult
	k.check("ACP-SESSION-001", k.result(m, &s1) && s1.SessionID != "", "session/new: %s", m.raw)
	k.check("ACP-AUTH-005", m.Error == nil || m.Error.Code != -32000, "session/new asks for auth that was never offered: %s", m.raw)
	s2, _ := k.newSession(map[string]any{"cwd": confCwd, "mcpServers": []any{}})
	k.check("ACP-SESSION-002", s2.SessionID != "" && s2.SessionID != s1.SessionID, "session ids %q and %q", s1.SessionID, s2.SessionID)
	for _, o := range s1.ConfigOptions {
		k.check("ACP-CONFIG-003", o.Type != "boolean", "boolean option %q without the client capability", o.ID)
	}
	k.check("ACP-CONFIG-003", true, "")
	if s1.Modes == nil {
		k.results["ACP-MODES-001"], k.results["ACP-MODES-002"] = "SKIP: no modes", "SKIP: no modes"
	} else {
		var avail []string
		for _, a := range s1.Modes.AvailableModes {
			avail = append(avail, a.ID)
		}
		k.check("ACP-MODES-001", slices.Contains(avail, s1.Modes.CurrentModeID), "current mode %q not in %q", s1.Modes.CurrentModeID, avail)
		var target string
		for _, a := range avail {
			if a != s1.Modes.CurrentModeID {
				target = a
				break
			}
		}
		set, before := k.call("session/set_mode", map[string]any{"sessionId": s2.SessionID, "modeId": target})
		k.check("ACP-MODES-002", set.Error == nil && set.Result != nil, "set_mode: %s", set.raw)
		for _, b := range before {
			if u := b.update(); b.Method == "session/update" && u.Update.SessionUpdate == "current_mode_update" {
				k.check("ACP-MODES-002", u.Update.CurrentModeID == target, "current_mode_update %s", b.raw)
			}
		}
	}
	if s1.ConfigOptions == nil {
		for _, r := range []string{"ACP-CONFIG-001", "ACP-CONFIG-002"} {
			k.results[r] = "SKIP: no configOptions"
		}
	} else {
		for _, o := range s1.ConfigOptions {
			var legal []string
			for _, v := range o.Options {
				legal = append(legal, string(v.Value))
			}
			k.check("ACP-CONFIG-001", o.ID != "" && o.Name != "" && slices.Contains(legal, string(o.CurrentValue)), "option %q value %s not in %q", o.ID, o.CurrentValue, legal)
		}
		target := s1.ConfigOptions[0]
		var value json.RawMessage
		for _, v := range target.Options {
			if string(v.Value) != string(target.CurrentValue) {
				value = v.Value
				break
			}
		}
		set, _ := k.call("session/set_config_option", map[string]any{"sessionId": s2.SessionID, "configId": target.ID, "value": value})
		var sr struct {
			ConfigOptions []configOption `json:"configOptions"`
		}
		okSet := k.result(set, &sr)
		var returned []string
		changed := false
		for _, o := range sr.ConfigOptions {
			returned = append(returned, o.ID)
			changed = changed || (o.ID == target.ID && string(o.CurrentValue) == string(value))
		}
		complete := true
		for _, o := range s1.ConfigOptions {
			complete = complete && slices.Contains(returned, o.ID)
		}
		k.check("ACP-CONFIG-002", okSet && complete && changed, "set_config_option: %s", set.raw)
	}

	// JSONRPC-002 (an invalid-params answer), JSONRPC-004 and EXT-001
	// (an unknown custom method), JSONRPC-005 (still usable after), and
	// ERROR-001 on the errors seen.
	bad, _ := k.call("session/new", map[string]any{"mcpServers": []any{}})
	k.check("ACP-JSONRPC-002", bad.Error != nil && bad.Result == nil, "session/new without cwd: %s", bad.raw)
	unknown, _ := k.call("_tck/does_not_exist", nil)
	k.check("ACP-EXT-001", unknown.Error != nil || unknown.Result != nil, "no answer")
	k.check("ACP-JSONRPC-004", unknown.Error != nil && unknown.Error.Code == -32601, "unknown method: %s", unknown.raw)
	for _, e := range []rpc{bad, unknown} {
		if e.Error != nil {
			k.check("ACP-ERROR-001", e.Error.Message != "" && !strings.ContainsAny(e.Error.Message, "\n\r"), "error message %q", e.Error.Message)
		}
	}
	s3, _ := k.newSession(map[string]any{"cwd": confCwd, "mcpServers": []any{}})
	k.check("ACP-JSONRPC-005", s3.SessionID != "", "session/new after errors failed")

	// JSONRPC-003: a notification gets no answer.
	k.notify("session/cancel", map[string]any{"sessionId": s3.SessionID})
	k.quiet("ACP-JSONRPC-003", "session/cancel with nothing to cancel")

	// Prompts (PROMPT-001/002/003, META-001, PROMPTCAP-*).
	stop, updates, _ := k.prompt(s1.SessionID, text("hello"))
	k.check("ACP-PROMPT-001", slices.Contains(stopReasons, stop), "stop reason %q", stop)
	for _, u := range updates {
		k.check("ACP-PROMPT-002", u.Method == "session/update" && u.update().SessionID == s1.SessionID, "not an update of the session: %s", u.raw)
	}
	stop, _, _ = k.prompt(s1.SessionID, text("see"), map[string]any{"type": "resource_link", "name": "a.txt", "uri": "file:///tmp/a.txt"})
	k.check("ACP-PROMPT-003", slices.Contains(stopReasons, stop), "resource_link prompt: %q", stop)
	m, _ = k.call("session/prompt", map[string]any{"sessionId": s1.SessionID, "prompt": []any{text("traced")}, "_meta": map[string]any{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}})
	k.check("ACP-META-001", m.Error == nil && strings.Contains(string(m.Result), `"end_turn"`), "prompt with _meta: %s", m.raw)
	const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
	for _, pc := range []struct {
		req, cap string
		block    map[string]any
	}{
		{"ACP-PROMPTCAP-001", "image", map[string]any{"type": "image", "mimeType": "image/png", "data": png}},
		{"ACP-PROMPTCAP-002", "audio", map[string]any{"type": "audio", "mimeType": "audio/wav", "data": "UklGRiQAAABXQVZF"}},
		{"ACP-PROMPTCAP-003", "embeddedContext", map[string]any{"type": "resource", "resource": map[string]any{"uri": "file:///tmp/a.txt", "mimeType": "text/plain", "text": "hi"}}},
	} {
		if !caps.PromptCapabilities[pc.cap] {
			continue
		}
		stop, _, m := k.prompt(s1.SessionID, text("look"), pc.block)
		k.check(pc.req, slices.Contains(stopReasons, stop), "%s prompt: %s", pc.cap, m.raw)
	}

	// Cancellation (CANCEL-001/002): "wait" runs until cancelled.
	k.id++
	promptID := fmt.Sprint(k.id)
	k.send(`{"jsonrpc":"2.0","id":` + promptID + `,"method":"session/prompt","params":{"sessionId":"` + s3.SessionID + `","prompt":[{"type":"text","text":"wait"}]}}`)
	first := k.recv()
	k.check("ACP-CANCEL-001", first.Method == "session/update", "the turn did not start with an update: %s", first.raw)
	k.notify("session/cancel", map[string]any{"sessionId": s3.SessionID})
	resp, _ := k.until(promptID)
	k.check("ACP-CANCEL-001", resp.Error == nil && strings.Contains(string(resp.Result), `"stopReason":"cancelled"`), "cancelled prompt answered %s", resp.raw)
	k.quiet("ACP-CANCEL-002", "after the cancelled prompt's answer")

	// session/load (LOAD-001/002/003).
	if !caps.LoadSession {
		for _, r := range []string{"ACP-LOAD-001", "ACP-LOAD-002", "ACP-LOAD-003"} {
			k.results[r] = "SKIP: not advertised"
		}
	} else {
		load, replay := k.call("session/load", map[string]any{"sessionId": s1.SessionID, "cwd": confCwd, "mcpServers": []any{}})
		k.check("ACP-LOAD-001", load.Error == nil && load.Result != nil, "session/load: %s", load.raw)
		k.check("ACP-LOAD-003", len(load.Result) > 0 && load.Result[0] == '{', "load result %s", load.Result)
		k.check("ACP-LOAD-002", len(replay) > 0, "nothing replayed")
		for _, u := range replay {
			k.check("ACP-LOAD-002", u.Method == "session/update" && u.update().SessionID == s1.SessionID, "replayed %s", u.raw)
		}
		k.quiet("ACP-LOAD-002", "after the load answer")
	}

	// session/resume (RESUME-001/002).
	if !has("resume") {
		k.results["ACP-RESUME-001"], k.results["ACP-RESUME-002"] = "SKIP: not advertised", "SKIP: not advertised"
	} else {
		res, before := k.call("session/resume", map[string]any{"sessionId": s1.SessionID, "cwd": confCwd})
		k.check("ACP-RESUME-001", res.Error == nil && len(res.Result) > 0 && res.Result[0] == '{', "session/resume: %s", res.raw)
		for _, u := range before {
			kind := u.update().Update.SessionUpdate
			k.check("ACP-RESUME-002", kind != "user_message_chunk" && kind != "agent_message_chunk" && kind != "agent_thought_chunk", "history before the resume answer: %s", u.raw)
		}
		k.check("ACP-RESUME-002", true, "")
	}

	// session/list (LIST-001/002).
	if !has("list") {
		k.results["ACP-LIST-001"], k.results["ACP-LIST-002"] = "SKIP: not advertised", "SKIP: not advertised"
	} else {
		l, _ := k.call("session/list", map[string]any{})
		var lr struct {
			Sessions []struct {
				SessionID string `json:"sessionId"`
			} `json:"sessions"`
		}
		k.check("ACP-LIST-001", k.result(l, &lr) && lr.Sessions != nil && len(lr.Sessions) >= 3, "session/list: %s", l.raw)
		l, _ = k.call("session/list", map[string]any{"cwd": confOther})
		k.check("ACP-LIST-002", l.Error == nil && strings.Contains(string(l.Result), `"sessions":[]`), "unmatched cwd: %s", l.raw)
	}

	// additionalDirectories (ADDDIRS-001).
	if !has("additionalDirectories") {
		k.results["ACP-ADDDIRS-001"] = "SKIP: not advertised"
	} else {
		s, m := k.newSession(map[string]any{"cwd": confCwd, "mcpServers": []any{}, "additionalDirectories": []string{confCwd + "/extra"}})
		k.check("ACP-ADDDIRS-001", s.SessionID != "", "session/new with additionalDirectories: %s", m.raw)
	}

	// session/close (CLOSE-001/002).
	if !has("close") {
		k.results["ACP-CLOSE-001"], k.results["ACP-CLOSE-002"] = "SKIP: not advertised", "SKIP: not advertised"
	} else {
		c, _ := k.call("session/close", map[string]any{"sessionId": s2.SessionID})
		k.check("ACP-CLOSE-001", c.Error == nil && string(c.Result) == "{}", "session/close: %s", c.raw)
		k.id++
		promptID := fmt.Sprint(k.id)
		k.send(`{"jsonrpc":"2.0","id":` + promptID + `,"method":"session/prompt","params":{"sessionId":"` + s3.SessionID + `","prompt":[{"type":"text","text":"wait"}]}}`)
		first := k.recv()
		k.check("ACP-CLOSE-002", first.Method == "session/update", "the turn did not start with an update: %s", first.raw)
		k.send(`{"jsonrpc":"2.0","id":"tck-close","method":"session/close","params":{"sessionId":"` + s3.SessionID + `"}}`)
		// Both answers come, in either order (the spec claims none).
		got := map[string]rpc{}
		start := len(k.transcript)
		for len(got) < 2 {
			m := k.recv()
			k.check("ACP-CLOSE-002", m.Method == "", "a message between the two answers: %s", m.raw)
			got[string(m.ID)] = m
		}
		sort.Strings(k.transcript[start:]) // the one order that may differ between runs
		k.check("ACP-CLOSE-002", strings.Contains(string(got[promptID].Result), `"stopReason":"cancelled"`), "prompt after close: %s", got[promptID].raw)
		k.check("ACP-CLOSE-002", string(got[`"tck-close"`].Result) == "{}", "close: %s", got[`"tck-close"`].raw)
	}
	k.results["ACP-DELETE-001"] = "SKIP: not advertised (the pinned acp-go-sdk has no session/delete)"
	k.results["ACP-DELETE-002"] = k.results["ACP-DELETE-001"]
	k.results["ACP-AUTH-003"] = "SKIP: no auth methods"
	k.results["ACP-AUTH-004"] = "SKIP: no logout capability"

	k.common = len(k.transcript)
	if !stdio {
		return
	}
	// INFO-PARSE-001, INFO-INVALIDREQ-001: lines that are not messages get
	// answers, and the connection stays usable.
	k.send(`{not valid json at all`)
	got := k.recv()
	k.check("ACP-INFO-PARSE-001", got.Error != nil && got.Error.Code == -32700 && string(got.ID) == "null", "malformed line: %s", got.raw)
	k.send(`{"foo": "bar"}`)
	got = k.recv()
	k.check("ACP-INFO-INVALIDREQ-001", got.Error != nil && got.Error.Code == -32600, "not a message: %s", got.raw)
	s, _ := k.newSession(map[string]any{"cwd": confCwd, "mcpServers": []any{}})
	k.check("ACP-INFO-INVALIDREQ-001", s.SessionID != "", "unusable after the probes")
	m, _ = k.call("session/prompt", map[string]any{"sessionId": "tck-does-not-exist", "prompt": []any{text("hi")}})
	k.check("ACP-INFO-UNKNOWNSESSION-001", m.Error != nil && m.Error.Code == -32002, "prompt to an unknown session: %s", m.raw)
}

// TestMockConformance runs the conformance kit's v1 requirements (see
// above) against the mock on five paths: the process itself, the stdio
// bridge (sandbox-agent acp), POST /v1/acp with its stream, and ACP's
// standard transport at /acp/mock over Streamable HTTP and WebSocket.
// Every requirement passes or is not applicable (advertised ones never
// skip), and a client sees the same messages, byte for byte, on every
// path: the mock is deterministic and the daemon passes bytes through.
func TestMockConformance(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{})
	v1Instances := 0
	paths := []struct {
		name  string
		stdio bool
		peer  func(t *testing.T) linePeer
	}{
		{"process", true, func(t *testing.T) linePeer { return startMockProcess(t) }},
		{"bridge", true, func(t *testing.T) linePeer { return bridgePeer(t, d) }},
		{"v1", false, func(t *testing.T) linePeer {
			v1Instances++
			return &v1Peer{chanPeer: newChanPeer(), d: d, id: fmt.Sprintf("conformance-%d", v1Instances)}
		}},
		{"acp-http", false, func(t *testing.T) linePeer { return &stdHTTPPeer{chanPeer: newChanPeer(), d: d} }},
		{"acp-ws", false, func(t *testing.T) linePeer {
			c, err := dialWS(t, wsURL(d, "mock"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			return &wsPeer{c: c}
		}},
	}
	var ref *kit
	for _, p := range paths {
		var k *kit
		t.Run(p.name, func(t *testing.T) {
			k = &kit{t: t, p: p.peer(t), results: map[string]string{}}
			k.run(p.stdio, func() linePeer { return p.peer(t) })
			var lines []string
			for _, id := range slices.Sorted(maps.Keys(k.results)) {
				lines = append(lines, fmt.Sprintf("%-28s %s", id, k.results[id]))
				if r := k.results[id]; strings.HasPrefix(r, "FAIL") || (strings.HasPrefix(r, "SKIP") && !knownSkip[id]) {
					t.Errorf("%s %s", id, r)
				}
			}
			t.Logf("requirements:\n%s", strings.Join(lines, "\n"))
			if t.Failed() {
				t.Logf("transcript:\n%.20000s", strings.Join(k.transcript, "\n"))
			}
		})
		if k == nil || t.Failed() {
			return
		}
		if ref == nil {
			ref = k
			continue
		}
		// The same requirements, the same results, the same bytes.
		for id, r := range k.results {
			if ref.results[id] != r {
				t.Errorf("%s: %s on %s, %s on %s", id, r, p.name, ref.results[id], paths[0].name)
			}
		}
		want, got := ref.transcript[:ref.common], k.transcript[:k.common]
		if p.stdio {
			want, got = ref.transcript, k.transcript
		}
		for i := range min(len(want), len(got)) {
			if want[i] != got[i] {
				t.Fatalf("%s differs from %s at line %d:\n%s\n%s", p.name, paths[0].name, i, want[i], got[i])
			}
		}
		if len(want) != len(got) {
			t.Fatalf("%s: %d lines, %s: %d", p.name, len(got), paths[0].name, len(want))
		}
	}
}

// knownSkip are the requirements the mock does not advertise.
var knownSkip = map[string]bool{"ACP-DELETE-001": true, "ACP-DELETE-002": true, "ACP-AUTH-003": true, "ACP-AUTH-004": true}
