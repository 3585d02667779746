package route

import (
	"strconv"
	"sync/atomic"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Inflight is the daemon-wide budget of request bodies and WebSocket
// messages held in memory (--inflight-bytes). Without it, many large POSTs
// (or messages) to an agent that reads nothing each hold their whole body
// while they wait for its stdin, and the daemon's memory is whatever the
// clients choose.
type Inflight struct {
	max  int64
	used atomic.Int64
}

// NewInflight returns a budget of max bytes.
func NewInflight(max int64) *Inflight { return &Inflight{max: max} }

// Take charges n bytes, or charges nothing and reports false when that
// would pass the budget.
func (b *Inflight) Take(n int64) bool {
	if b.used.Add(n) > b.max {
		b.used.Add(-n)
		return false
	}
	return true
}

// Give returns n bytes charged by Take (nothing on a nil budget).
func (b *Inflight) Give(n int64) {
	if b != nil && n != 0 {
		b.used.Add(-n)
	}
}

// Max is the budget's size in bytes.
func (b *Inflight) Max() int64 { return b.max }

// Used is what is charged now.
func (b *Inflight) Used() int64 { return b.used.Load() }

// Overloaded is the 503 of a spent budget.
func (b *Inflight) Overloaded() error {
	msg := "request bodies waiting for agents already hold " + strconv.FormatInt(b.max, 10) + " bytes (--inflight-bytes); retry later"
	return domain.Overloaded(msg, b.max)
}
