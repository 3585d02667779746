package httpapi

import (
	"context"
	"errors"
	"io"

	"github.com/coder/websocket"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// readWSMessage reads the next message of ws as it arrives, into a buffer
// charged to budget as it grows, before the bytes are read into it: a
// message is never buffered whole first, and never past limit (the
// library closes the socket with 1009 message too big one byte past it).
// A binary message is read and dropped (nil data, nothing held). It
// returns what was charged, to be given back once the message has been
// handled, also on error; an error of kind overloaded means the budget is
// spent (closeOverloaded).
func readWSMessage(ctx context.Context, ws *websocket.Conn, limit int64, budget *inflight) (websocket.MessageType, []byte, int64, error) {
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
	b, charged, err := readChargedFrom(r, limit+2, 512, budget)
	return typ, b, charged, err
}

// isOverloaded reports whether err is the budget's refusal.
func isOverloaded(err error) bool {
	e, ok := domain.AsError(err)
	return ok && e.Kind == domain.KindOverloaded
}

// closeOverloaded ends a socket whose message found no room in the
// in-flight budget: 1013 try again later, as a 503 with Retry-After says
// for a POST. What the message was charged is given back by the caller;
// the rest of it is read and dropped by the close handshake.
func closeOverloaded(ws *websocket.Conn) {
	const reason = "overloaded: messages waiting for agents fill --inflight-bytes; retry later"
	ws.Close(websocket.StatusTryAgainLater, reason) //nolint:errcheck // closing anyway
}

// wsTooBig reports whether err is the library's refusal of a message past
// the read limit (it has closed the socket with 1009 already).
func wsTooBig(err error) bool { return errors.Is(err, websocket.ErrMessageTooBig) }
