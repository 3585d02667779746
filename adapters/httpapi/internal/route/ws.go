package route

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/coder/websocket"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// ReadWSMessage reads the next message of ws as it arrives, into a buffer
// charged to budget as it grows, before the bytes are read into it: a
// message is never buffered whole first, and never past limit (the
// library closes the socket with 1009 message too big one byte past it).
// A binary message is read and dropped (nil data, nothing held). It
// returns what was charged, to be given back once the message has been
// handled, also on error; an error of kind overloaded means the budget is
// spent (CloseOverloaded).
func ReadWSMessage(ctx context.Context, ws *websocket.Conn, limit int64, budget *Inflight) (websocket.MessageType, []byte, int64, error) {
	ws.SetReadLimit(limit)
	typ, r, err := ws.Reader(ctx)
	if err != nil {
		return 0, nil, 0, err
	}
	if typ != websocket.MessageText {
		_, err := io.Copy(io.Discard, r)
		return typ, nil, 0, err
	}
	// The library fails the read one byte past limit; the buffer never
	// needs more than limit+1.
	b, charged, err := ReadChargedFrom(r, PlusOne(PlusOne(limit)), 512, budget)
	return typ, b, charged, err
}

// IsOverloaded reports whether err is the budget's refusal.
func IsOverloaded(err error) bool {
	e, ok := domain.AsError(err)
	return ok && e.Kind == domain.KindOverloaded
}

// CloseOverloaded ends a socket whose message found no room in the
// in-flight budget: 1013 try again later, as a 503 with Retry-After says
// for a POST. What the message was charged is given back by the caller;
// the rest of it is read and dropped by the close handshake.
func CloseOverloaded(ws *websocket.Conn) {
	const reason = "overloaded: messages waiting for agents fill --inflight-bytes; retry later"
	ws.Close(websocket.StatusTryAgainLater, reason) //nolint:errcheck // closing anyway
}

// IsWebSocketUpgrade reports whether r asks for a WebSocket.
func IsWebSocketUpgrade(r *http.Request) bool {
	return HeaderHasToken(r.Header, "Upgrade", "websocket")
}

// CheckHandshake checks a WebSocket upgrade the way the WebSocket library's
// Accept will (RFC 6455 §4.2.1), before anything is started for it: the
// library answers a bad handshake in text/plain, where every other error
// of the API is a problem, and only once the route has done its work (an
// ACP connection would start and stop an agent for nothing).
func CheckHandshake(r *http.Request) error {
	if r.ProtoMajor != 1 {
		return Invalid("a WebSocket needs an HTTP/1.1 upgrade (WebSocket over HTTP/2 is not served)")
	}
	if r.Method != http.MethodGet {
		return WithStatus(http.StatusMethodNotAllowed, domain.InvalidRequest("a WebSocket upgrade must be a GET"))
	}
	if !HeaderHasToken(r.Header, "Connection", "upgrade") || !HeaderHasToken(r.Header, "Upgrade", "websocket") {
		return Invalid("invalid WebSocket handshake: needs Connection: Upgrade and Upgrade: websocket")
	}
	if v := r.Header.Get("Sec-WebSocket-Version"); v != "13" {
		return Invalid("unsupported Sec-WebSocket-Version %q (want 13)", v)
	}
	keys := r.Header.Values("Sec-WebSocket-Key")
	if len(keys) != 1 {
		return Invalid("invalid WebSocket handshake: needs exactly one Sec-WebSocket-Key")
	}
	if k, err := base64.StdEncoding.DecodeString(keys[0]); err != nil || len(k) != 16 {
		return Invalid("invalid WebSocket handshake: Sec-WebSocket-Key must be 16 bytes in base64")
	}
	return nil
}

// HeaderHasToken reports whether a comma-separated header lists token (in
// any case), as Connection and Upgrade do.
func HeaderHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// SameOrigin refuses cross-site WebSocket hijacking: a browser page may
// open a socket to any host, with the user's cookies, and only its Origin
// header tells. A WebSocket is not subject to CORS, so the upgrade is
// checked here: no Origin (a non-browser client), an origin allowed by
// the CORS settings, or the request's own host is fine.
func SameOrigin(r *http.Request, allowed func(origin string) bool) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || allowed != nil && allowed(origin) {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}
