package opencode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// agentConn is the ACP client side of one agent: an instance created with
// acp.Instances.Connect (so it is listed, streamed and deletable under
// /v1/acp like any other), shared by every OpenCode session that runs
// this agent, each an ACP session of it. Messages go in through Conn.Post;
// the agent's messages come out of one stream that carries them all, read
// by one goroutine (read) that handles them strictly in order: responses
// wake their callers, session/update notifications and the agent's
// requests go to their session. Nothing here decodes more than it needs.
type agentConn struct {
	a      *Adapter
	agent  string
	conn   *acp.Conn
	stream *acp.Stream
	caps   agentCaps

	mu       sync.Mutex
	nextID   int64
	pending  map[int64]chan rpcResult
	sessions map[string]*session // by ACP session id
	err      error               // why the connection ended, once it has

	done chan struct{} // closed when read returns
}

// agentCaps is what initialize told of the agent.
type agentCaps struct {
	LoadSession bool `json:"loadSession"`
	Prompt      struct {
		Image           bool `json:"image"`
		Audio           bool `json:"audio"`
		EmbeddedContext bool `json:"embeddedContext"`
	} `json:"promptCapabilities"`
}

type rpcResult struct {
	result json.RawMessage
	err    error
}

// rpcError is a JSON-RPC error the agent answered.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string {
	if len(e.Data) > 0 && string(e.Data) != "null" {
		return e.Message + ": " + string(e.Data)
	}
	return e.Message
}

// errAgentGone is the cause of calls that cannot be answered any more.
var errAgentGone = errors.New("the agent exited")

// dial starts an instance of agent and initializes it.
func (a *Adapter) dial(ctx context.Context, agent string) (*agentConn, error) {
	conn, err := a.cfg.Instances.Connect(ctx, agent, acp.TransportWebSocket)
	if err != nil {
		return nil, err
	}
	st, err := conn.OpenStream("", nil)
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	c := &agentConn{
		a: a, agent: agent, conn: conn, stream: st,
		pending: map[int64]chan rpcResult{}, sessions: map[string]*session{},
		done: make(chan struct{}),
	}
	if !a.spawn(c.read) {
		st.Close()
		conn.Close(context.WithoutCancel(ctx))
		return nil, errShuttingDown
	}
	params := map[string]any{
		"protocolVersion": 1,
		"clientCapabilities": map[string]any{
			"fs":          map[string]bool{"readTextFile": false, "writeTextFile": false},
			"terminal":    false,
			"elicitation": map[string]any{"form": map[string]any{}},
		},
		"clientInfo": map[string]string{"name": "sandbox-agent-opencode", "version": a.cfg.Version},
	}
	res, err := c.call(ctx, "initialize", params, a.cfg.RequestTimeout)
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("initialize %s: %w", agent, err)
	}
	var init struct {
		Caps agentCaps `json:"agentCapabilities"`
	}
	_ = json.Unmarshal(res, &init)
	c.caps = init.Caps
	return c, nil
}

// call sends a request and waits for its response, ctx, timeout (0: none)
// or the end of the connection.
func (c *agentConn) call(ctx context.Context, method string, params any, timeout time.Duration) (json.RawMessage, error) {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.nextID++
	id := c.nextID
	ch := make(chan rpcResult, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}
	msg, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		ID      int64  `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", id, method, params})
	if err != nil {
		forget()
		return nil, err
	}
	if err := c.post(ctx, msg); err != nil {
		forget()
		return nil, err
	}
	var expire <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expire = t.C
	}
	select {
	case r := <-ch:
		return r.result, r.err
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	case <-expire:
		forget()
		return nil, domain.Timeout(method + " timed out waiting for the agent")
	}
}

// notify sends a notification.
func (c *agentConn) notify(ctx context.Context, method string, params any) error {
	msg, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", method, params})
	if err != nil {
		return err
	}
	return c.post(ctx, msg)
}

// respond answers a request of the agent with result, or with err when
// it is not nil.
func (c *agentConn) respond(ctx context.Context, id json.RawMessage, result any, err *rpcError) {
	var msg []byte
	if err != nil {
		msg, _ = json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *rpcError       `json:"error"`
		}{"2.0", id, err})
	} else {
		msg, _ = json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  any             `json:"result"`
		}{"2.0", id, result})
	}
	if perr := c.post(ctx, msg); perr != nil {
		c.a.log.Debug("opencode: answering the agent failed", "agent", c.agent, "err", perr)
	}
}

func (c *agentConn) post(ctx context.Context, msg []byte) error {
	f, err := domain.ParseFrame(msg)
	if err != nil {
		return err
	}
	_, err = c.conn.Post(ctx, f, "", false)
	return err
}

// rpcMessage is the envelope of anything the agent writes.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

// read handles the agent's messages in order until the connection ends:
// the agent exited, its instance was deleted (DELETE /v1/acp/{id}, or the
// daemon stopping), or the adapter closed.
func (c *agentConn) read() {
	defer close(c.done)
	defer c.stream.Close()
	buf := make([]acp.Event, 0, 64)
	for {
		evs, gap, err := c.stream.Read(c.a.ctx, buf[:0], 64, time.Minute)
		if err != nil {
			if c.a.ctx.Err() != nil {
				c.end(errShuttingDown)
			} else {
				c.end(fmt.Errorf("%w (%v)", errAgentGone, err))
			}
			return
		}
		if gap != nil {
			// The instance's replay budget evicted messages this reader
			// had not read: what they said is lost, so the turns running
			// now cannot be told truthfully. End the connection; the next
			// prompt starts the agent again.
			c.a.log.Warn("opencode: lost agent messages (replay budget); the next prompt restarts the agent", "agent", c.agent)
			c.end(errors.New("messages from the agent were lost (the replay budget was exceeded)"))
			c.stop()
			return
		}
		for _, e := range evs {
			if c.handle(e.Data) {
				c.stop()
				return
			}
		}
		if len(evs) > 0 {
			c.stream.Ack(evs[len(evs)-1].Seq)
		}
	}
}

// handle acts on one message of the agent; it reports whether the agent
// has exited.
func (c *agentConn) handle(data []byte) (exited bool) {
	var m rpcMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return false
	}
	hasID := len(m.ID) > 0 && !bytes.Equal(m.ID, []byte("null"))
	switch {
	case m.Method != "" && hasID:
		c.request(m)
	case m.Method == "_adapter/agent_exited":
		c.end(errAgentGone)
		return true
	case m.Method == "session/update":
		var p struct {
			SessionID string          `json:"sessionId"`
			Update    json.RawMessage `json:"update"`
		}
		if json.Unmarshal(m.Params, &p) == nil {
			if s := c.session(p.SessionID); s != nil {
				s.applyUpdate(p.Update)
			}
		}
	case m.Method == "" && hasID:
		id, err := strconv.ParseInt(string(m.ID), 10, 64)
		if err != nil {
			return false
		}
		c.mu.Lock()
		ch := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ch != nil {
			r := rpcResult{result: m.Result}
			if m.Error != nil {
				r.err = m.Error
			}
			ch <- r
		}
	}
	return false
}

// request handles a request of the agent: permissions and questions go to
// their session; the client methods this client did not offer in
// initialize (fs, terminal) are refused.
func (c *agentConn) request(m rpcMessage) {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	s := c.session(p.SessionID)
	switch {
	case s != nil && m.Method == "session/request_permission":
		s.askPermission(c, m.ID, m.Params)
		return
	case s != nil && m.Method == "elicitation/create":
		s.askQuestion(c, m.ID, m.Params)
		return
	}
	c.respond(c.a.ctx, m.ID, nil, &rpcError{Code: -32601, Message: "method not found: " + m.Method})
}

func (c *agentConn) session(acpID string) *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[acpID]
}

// bind routes the ACP session acpID's messages to s.
func (c *agentConn) bind(acpID string, s *session) {
	c.mu.Lock()
	c.sessions[acpID] = s
	c.mu.Unlock()
}

func (c *agentConn) unbind(acpID string) {
	c.mu.Lock()
	delete(c.sessions, acpID)
	c.mu.Unlock()
}

// end fails every call still waiting and tells each session its agent is
// gone. It runs on the reader goroutine, once.
func (c *agentConn) end(cause error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = cause
	pending := c.pending
	c.pending = map[int64]chan rpcResult{}
	sessions := c.sessions
	c.sessions = map[string]*session{}
	c.mu.Unlock()
	for _, ch := range pending {
		ch <- rpcResult{err: cause}
	}
	c.a.forgetConn(c)
	for _, s := range sessions {
		s.agentGone(c, cause)
	}
}

// alive reports whether the connection still works.
func (c *agentConn) alive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err == nil
}

// stop deletes the agent's instance, in the background (it waits for the
// process group to go); the reader ends when the instance's log closes.
func (c *agentConn) stop() {
	// Once the adapter is closed the daemon stops every instance itself.
	c.a.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c.conn.Close(ctx)
	})
}
