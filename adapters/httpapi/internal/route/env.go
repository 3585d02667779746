package route

import (
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/app/authz"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Env is what the route families read of the daemon's configuration, built
// once by httpapi.New from its Config, the same for every family, so that a
// family in a package of its own sees the same budget, chain and limits as
// the rest.
type Env struct {
	// Chain is the auth chain (policies, then the token check).
	Chain *authz.Chain
	// Budget is --inflight-bytes, charged by every body and WebSocket
	// message held.
	Budget *Inflight
	// MaxACPBody bounds one ACP message (a POST body, a WebSocket text
	// frame).
	MaxACPBody int64
	// Heartbeat is the idle time before an SSE keep-alive comment (or a
	// WebSocket ping).
	Heartbeat time.Duration
	// StreamWriteTimeout bounds one stream write, to drop dead peers.
	StreamWriteTimeout time.Duration
	// TokenHeader names a second header the bearer token is taken from
	// (PresentedAuthorization).
	TokenHeader string
	// AllowedOrigin reports whether the CORS settings allow a cross-origin
	// origin, which a WebSocket upgrade is checked against too.
	AllowedOrigin func(origin string) bool
	// CountAuth, when set, counts one decision of the chain for /metrics.
	CountAuth func(a domain.Action, decision, by string)
	// Streams, when set, holds the open streams and WebSockets (Revocable),
	// judged again after a reload.
	Streams *Streams
}
