package acpstd

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/danielgtaylor/huma/v2"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi/internal/route"
	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// wsBatch is how many events the WebSocket writer takes from the log at a
// time.
const wsBatch = 256

// acceptACPWebSocket creates a connection and upgrades. Everything that can
// fail is checked before the agent starts, and answered as a problem.
func acceptACPWebSocket(ctx context.Context, cfg *server, in *acpStdGetInput) (*huma.StreamResponse, error) {
	r := in.Request()
	// The library checks the handshake too, but only in Accept, once the
	// agent has started, and answers in text/plain.
	if err := route.CheckHandshake(r); err != nil {
		return nil, err
	}
	if !route.SameOrigin(r, cfg.env.AllowedOrigin) {
		msg := "cross-origin WebSocket not allowed (see --cors-allow-origin)"
		return nil, domain.PermissionDenied(msg)
	}
	c, err := cfg.instances.Connect(ctx, in.Agent, acp.TransportWebSocket)
	if err != nil {
		return nil, err
	}
	log := route.Logger(ctx).With("connection_id", c.ID(), "agent", c.Agent())
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		r, w := route.Unwrap(hctx)
		w.Header().Set(headerConnID, c.ID())
		// The origin was checked above, against the CORS settings too.
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			log.Debug("websocket upgrade failed", "err", err)
			c.Close(context.Background())
			return
		}
		defer route.Revocable(hctx.Context(), func() { go route.CloseRevoked(ws) })()
		serveACPWebSocket(ws, c, cfg, r, log)
	}}, nil
}

// serveACPWebSocket runs one WebSocket connection until either side ends
// it, then ends the connection's instance. The handler goroutine owns the
// writer loop; it starts the reader and the pinger and waits for both.
func serveACPWebSocket(ws *websocket.Conn, c *acp.Conn, cfg *server, r *http.Request, log *slog.Logger) {
	defer c.Close(context.Background()) // disconnect ends the connection
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := c.OpenStream("", nil)
	if err != nil {
		ws.Close(websocket.StatusInternalError, "cannot open the connection's stream") //nolint:errcheck // closing anyway
		return
	}
	defer st.Close()

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer cancel()
		wsReadLoop(ctx, ws, c, cfg, r, log)
	}()
	go func() {
		defer wg.Done()
		defer cancel()
		wsPingLoop(ctx, ws, cfg)
	}()
	code, reason := wsWriteLoop(ctx, ws, st, cfg)
	log.Debug("websocket closing", "code", int(code), "reason", reason)
	// Close first, then cancel: ctx is the reader's read deadline to
	// coder/websocket, and cancelling it drops the connection at once, so
	// the close frame could be lost and the client see EOF. Close sends
	// the frame and waits (at most 5 s) for the peer's, which the reader
	// consumes and then returns.
	ws.Close(code, reason) //nolint:errcheck // the peer may be gone already
	cancel()
	wg.Wait()
}

// wsWriteLoop sends the connection's events, in order, one text frame
// each. A peer that takes nothing for the stream write timeout, or that
// falls so far behind that the event log has dropped what it has not read,
// is cut: the log is the only buffer, so memory stays bounded.
func wsWriteLoop(ctx context.Context, ws *websocket.Conn, st *acp.Stream, cfg *server) (websocket.StatusCode, string) {
	buf := make([]acp.Event, 0, wsBatch)
	for {
		evs, gap, err := st.Read(ctx, buf[:0], wsBatch, cfg.env.Heartbeat)
		switch {
		case errors.Is(err, acp.ErrStreamClosed):
			return websocket.StatusNormalClosure, "connection closed"
		case err != nil:
			return websocket.StatusNormalClosure, ""
		case gap != nil:
			lost := gap.OldestAvailable - gap.LastEventID - 1
			return websocket.StatusPolicyViolation, "client read too slowly: " + strconv.FormatUint(lost, 10) + " messages dropped from the replay buffer"
		}
		for _, e := range evs {
			wctx, done := context.WithTimeout(ctx, cfg.env.StreamWriteTimeout)
			err := ws.Write(wctx, websocket.MessageText, textUTF8(e.Data))
			done()
			if err != nil {
				return websocket.StatusPolicyViolation, "write timed out"
			}
		}
		if len(evs) > 0 {
			st.Ack(evs[len(evs)-1].Seq)
		}
	}
}

// textUTF8 makes an agent's line fit a text frame, which must be UTF-8
// (RFC 6455 section 8.1: Node's ws and browsers fail the connection on one
// that is not). Invalid bytes can only be inside JSON strings of a valid
// line; each becomes U+FFFD, as a JSON decoder reads it (Go's, and
// JavaScript's TextDecoder). A valid line is returned as it is.
func textUTF8(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			out = append(out, "\uFFFD"...)
		} else {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return out
}

// wsPingLoop keeps the socket alive through proxies and finds dead peers:
// a ping unanswered within the stream write timeout ends the connection.
func wsPingLoop(ctx context.Context, ws *websocket.Conn, cfg *server) {
	t := time.NewTicker(cfg.env.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, done := context.WithTimeout(ctx, cfg.env.StreamWriteTimeout)
		err := ws.Ping(pctx)
		done()
		if err != nil {
			return
		}
	}
}

// wsReadLoop forwards the client's text frames to the agent. The first must
// be initialize (else the socket closes with 1002, as in the TypeScript
// SDK's server); binary frames are ignored; what is not one JSON-RPC object
// is answered with a JSON-RPC error, as are requests the daemon refuses.
//
// Each message is charged to --inflight-bytes as it arrives, as a POST
// body is, and stays charged until it has been written to the agent's
// stdin: one past --max-acp-body closes the socket with 1009, one that
// finds the budget spent with 1013 (try again later).
func wsReadLoop(ctx context.Context, ws *websocket.Conn, c *acp.Conn, cfg *server, r *http.Request, log *slog.Logger) {
	initialized := false
	for {
		typ, data, charged, err := route.ReadWSMessage(ctx, ws, cfg.env.MaxACPBody, cfg.env.Budget)
		if err != nil {
			cfg.env.Budget.Give(charged)
			if route.IsOverloaded(err) {
				log.Info("websocket message refused: in-flight budget spent", "limit_bytes", cfg.env.Budget.Max())
				route.CloseOverloaded(ws)
			}
			return
		}
		if typ != websocket.MessageText {
			continue
		}
		done := wsHandle(ctx, ws, c, cfg, r, log, data, &initialized)
		cfg.env.Budget.Give(charged)
		if done {
			return
		}
	}
}

// wsHandle forwards one text message; it reports whether the socket is
// done (closed for a protocol error, or the budget spent).
func wsHandle(ctx context.Context, ws *websocket.Conn, c *acp.Conn, cfg *server, r *http.Request, log *slog.Logger, data []byte, initialized *bool) bool {
	// A message with raw line breaks is compacted into a copy: charged
	// before it is made.
	compacted, err := route.ChargeCompaction(cfg.env.Budget, data)
	defer cfg.env.Budget.Give(compacted)
	if err != nil {
		route.CloseOverloaded(ws)
		return true
	}
	f, err := parseStdFrame(data)
	if err != nil {
		code, msg := -32600, "Invalid Request"
		switch {
		case errors.Is(err, errBatch):
			msg = "JSON-RPC batches are not supported"
		case !json.Valid(data):
			code, msg = -32700, "Parse error"
		case isAmbiguous(data) || f.Kind == domain.FrameRequest:
			// An ambiguous member, or a request id no answer could carry.
			msg = "Invalid Request: " + route.ProblemFor(ctx, err).Detail
		}
		wsReply(ctx, ws, cfg, nil, code, msg)
		return false
	}
	isInit := f.Kind == domain.FrameRequest && f.Method == "initialize"
	if !*initialized && !isInit {
		ws.Close(websocket.StatusProtocolError, "first message must be initialize") //nolint:errcheck // closing anyway
		return true
	}
	if *initialized && isInit {
		wsReply(ctx, ws, cfg, f.ID, -32600, "initialize is not allowed on an existing connection")
		return false
	}
	*initialized = true
	session, _ := domain.SessionID(f.Data)
	_, err = authorizeACPStd(ctx, cfg, r, c.ID(), c.Agent(), f)
	if err == nil {
		// Held, and charged, until it is written to the agent's stdin.
		_, err = c.Post(ctx, f, session, false)
	}
	if err != nil {
		log.Debug("websocket message refused", "err", err)
		if f.Kind == domain.FrameRequest {
			wsReply(ctx, ws, cfg, f.ID, -32603, route.ProblemFor(ctx, err).Detail)
		}
	}
	return false
}

// isAmbiguous reports whether a refused message was refused for an
// ambiguous member (parsed again: only on this error path).
func isAmbiguous(data []byte) bool {
	_, err := domain.ParseFrame(data)
	return errors.Is(err, domain.ErrAmbiguousKey)
}

// wsReply sends a JSON-RPC error response (id null when id is nil). The
// library serialises concurrent writes, so it may interleave with the
// writer loop, but only between whole frames.
func wsReply(ctx context.Context, ws *websocket.Conn, cfg *server, id []byte, code int, msg string) {
	if id == nil {
		id = []byte("null")
	}
	m, _ := json.Marshal(msg)
	b := make([]byte, 0, 64+len(id)+len(m))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"message":`...)
	b = append(b, m...)
	b = append(b, "}}"...)
	wctx, done := context.WithTimeout(ctx, cfg.env.StreamWriteTimeout)
	defer done()
	_ = ws.Write(wctx, websocket.MessageText, b)
}
