package processapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"

	"github.com/coder/websocket"
	"github.com/danielgtaylor/huma/v2"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi/internal/route"
	"github.com/sandbox-agent-go/sandbox-agent/app/processes"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// The terminal WebSocket of a tty process, with the SDK's frames. Server to
// client: the terminal's output as binary messages (the buffered output
// first, then live), and JSON text frames {"type":"ready","processId"} on
// open, {"type":"exit","exitCode"} once the process has exited and all its
// output was sent, {"type":"error","message"} for a frame that failed.
// Client to server, JSON text frames: {"type":"input","data","encoding"?}
// (utf8 unless encoding is base64), {"type":"resize","cols","rows"},
// {"type":"close"}.

type procWSInput struct {
	route.RawRequest
	ID          string `path:"id" doc:"Process ID."`
	AccessToken string `query:"access_token" doc:"The bearer token, for clients that cannot send headers (browsers' WebSocket)."`
}

// terminalFrame is any client frame; Type says which fields count.
type terminalFrame struct {
	Type     string `json:"type"`
	Data     string `json:"data"`
	Encoding string `json:"encoding"`
	Cols     int    `json:"cols"`
	Rows     int    `json:"rows"`
}

func registerTerminalWS(api huma.API, env *route.Env, svc *processes.Service) {
	route.Register(api, huma.Operation{
		OperationID: "get_v1_process_terminal_ws", Method: http.MethodGet, Path: "/v1/processes/{id}/terminal/ws",
		Summary: "Open a WebSocket to a process's terminal",
		Description: "Upgrades to a WebSocket. Server frames: the terminal's output as binary messages (buffered output first), JSON text frames " +
			"`{\"type\":\"ready\",\"processId\"}`, `{\"type\":\"exit\",\"exitCode\"}`, `{\"type\":\"error\",\"message\"}`. Client frames (JSON text): " +
			"`{\"type\":\"input\",\"data\",\"encoding\"?}` (utf8 unless base64), `{\"type\":\"resize\",\"cols\",\"rows\"}`, `{\"type\":\"close\"}`. " +
			"409 for a process without a terminal. Cross-origin upgrades are refused unless the origin is allowed by --cors-allow-origin.",
		Tags: procTags, Security: route.Bearer,
		Responses: map[string]*huma.Response{
			"101": {Description: "Switched to the WebSocket protocol."},
		},
	}, route.Act(domain.ActionProcessWrite), func(ctx context.Context, in *procWSInput) (*huma.StreamResponse, error) {
		tty, err := svc.IsTTY(in.ID)
		if err != nil {
			return nil, err
		}
		if !tty {
			msg := "process is not running in tty mode"
			return nil, domain.Conflict(msg)
		}
		if err := checkUpgrade(in.Request(), env.AllowedOrigin); err != nil {
			return nil, err
		}
		id := in.ID
		return &huma.StreamResponse{Body: func(hctx huma.Context) {
			r, w := route.Unwrap(hctx)
			// checkUpgrade has vetted the origin already.
			c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true, CompressionMode: websocket.CompressionDisabled})
			if err != nil {
				route.Logger(r.Context()).Debug("terminal websocket refused", "err", err)
				return
			}
			// A hijacked connection outlives the request's context rules:
			// the reader ends this one when the peer goes.
			wctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
			defer cancel()
			defer route.Revocable(hctx.Context(), func() { go route.CloseRevoked(c) })()
			serveTerminal(wctx, cancel, c, svc, id, env)
		}}, nil
	})
}

// checkUpgrade answers with a problem what the WebSocket library would
// answer in plain text: a request that is not a WebSocket upgrade (400),
// and a cross-origin upgrade from an origin CORS does not allow (403). A
// WebSocket is not subject to CORS, so without the origin check any web
// page could type into a terminal of a daemon that has no token.
func checkUpgrade(r *http.Request, allowed func(origin string) bool) error {
	if err := route.CheckHandshake(r); err != nil {
		return err
	}
	if route.SameOrigin(r, allowed) {
		return nil
	}
	msg := "cross-origin WebSocket from " + r.Header.Get("Origin") + " is not allowed (see --cors-allow-origin)"
	return domain.PermissionDenied(msg)
}

func serveTerminal(ctx context.Context, cancel context.CancelFunc, c *websocket.Conn, svc *processes.Service, id string, env *route.Env) {
	defer c.CloseNow() //nolint:errcheck // idempotent
	send := func(v any) error {
		b, _ := json.Marshal(v)
		wctx, done := context.WithTimeout(ctx, env.StreamWriteTimeout)
		defer done()
		return c.Write(wctx, websocket.MessageText, b)
	}
	sendError := func(msg string) { _ = send(map[string]string{"type": "error", "message": msg}) }

	f, err := svc.Follow(ctx, id, domain.StreamPTY, nil)
	if err != nil {
		sendError(err.Error())
		c.Close(websocket.StatusPolicyViolation, "unknown process") //nolint:errcheck
		return
	}
	defer f.Close()
	if err := send(map[string]string{"type": "ready", "processId": id}); err != nil {
		return
	}

	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer cancel()
		for {
			// Read as it arrives, charged to --inflight-bytes until it
			// is written to the terminal, bounded by the input limit the
			// configuration sets now (1009 past it, 1013 when the budget
			// is spent).
			typ, b, charged, err := route.ReadWSMessage(ctx, c, inputBodyLimit(svc), env.Budget)
			if err != nil {
				env.Budget.Give(charged)
				if route.IsOverloaded(err) {
					route.CloseOverloaded(c)
				}
				return
			}
			if typ != websocket.MessageText {
				sendError("binary input is not supported; send JSON text frames")
				continue
			}
			done := terminalFrameIn(ctx, c, svc, id, env, b, sendError)
			env.Budget.Give(charged)
			if done {
				return
			}
		}
	}()

	for {
		chunks, _, err := f.Next(env.Heartbeat)
		for _, ch := range chunks {
			wctx, done := context.WithTimeout(ctx, env.StreamWriteTimeout)
			werr := c.Write(wctx, websocket.MessageBinary, ch.Data)
			done()
			if werr != nil {
				cancel()
				<-readerDone
				return
			}
		}
		switch {
		case errors.Is(err, processes.ErrEnded):
			info := f.Exit()
			_ = send(map[string]any{"type": "exit", "exitCode": info.ExitCode})
			c.Close(websocket.StatusNormalClosure, "process exited") //nolint:errcheck
			cancel()
			<-readerDone
			return
		case err != nil:
			<-readerDone
			return
		case len(chunks) == 0:
			// Idle: make sure the peer is still there.
			pctx, done := context.WithTimeout(ctx, env.StreamWriteTimeout)
			perr := c.Ping(pctx)
			done()
			if perr != nil && ctx.Err() == nil {
				cancel()
			}
		}
	}
}

// terminalFrameIn handles one client frame of a terminal socket; it
// reports whether the socket is done (closed, or the budget spent).
func terminalFrameIn(ctx context.Context, c *websocket.Conn, svc *processes.Service, id string, env *route.Env, b []byte, sendError func(string)) bool {
	// Decoding holds the data twice more (the string, then its bytes).
	extra := route.DecodeCost * int64(len(b))
	if !env.Budget.Take(extra) {
		route.CloseOverloaded(c)
		return true
	}
	defer env.Budget.Give(extra)
	if err := route.CheckJSONMembers(b, reflect.TypeFor[terminalFrame]()); err != nil {
		sendError(clientMessage(err))
		return false
	}
	var fr terminalFrame
	if err := json.Unmarshal(b, &fr); err != nil {
		sendError("invalid terminal frame: " + err.Error())
		return false
	}
	switch fr.Type {
	case "input":
		enc := fr.Encoding
		enc = cmp.Or(enc, "utf8")
		data, err := decodeInput(fr.Data, enc)
		if err == nil {
			_, err = svc.Input(ctx, id, data)
		}
		if err != nil {
			sendError(clientMessage(err))
		}
	case "resize":
		if err := svc.Resize(id, fr.Cols, fr.Rows); err != nil {
			sendError(clientMessage(err))
		}
	case "close":
		c.Close(websocket.StatusNormalClosure, "") //nolint:errcheck
		return true
	default:
		sendError("unknown terminal frame type " + strconvQuote(fr.Type))
	}
	return false
}

// clientMessage is the text of an error as a problem's detail would say it.
func clientMessage(err error) string {
	return route.ProblemFor(context.Background(), err).Detail
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
