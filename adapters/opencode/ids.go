package opencode

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"time"
)

// OpenCode's clients sort sessions, messages and parts by id, as plain
// strings, so ids here are made the way OpenCode makes them: a prefix, 12
// hex digits of (milliseconds*4096 + a per-millisecond counter) modulo
// 2^48, and 14 random base62 characters. Message and part ids ascend with
// time; session ids descend (the 48 bits inverted), so the newest session
// sorts first. A client's own ids (the TUI sends a messageID and part ids)
// use the same scheme, so ours sort after the ones it made before.

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// idGen makes ids; one per adapter (its counter is per millisecond).
type idGen struct {
	mu   sync.Mutex
	last int64 // the last milliseconds*4096 + counter given
	now  func() time.Time
}

// next never repeats or goes back: a wall clock stepped back (NTP, a
// host's clock set by hand) would otherwise give a new message an id that
// sorts before the ones already made, and clients, which order messages
// and parts by id, would show the conversation out of order. Past the
// last id it counts on from it until the clock catches up.
func (g *idGen) next(prefix string, descending bool) string {
	g.mu.Lock()
	t := g.now().UnixMilli()*0x1000 + 1
	if t <= g.last {
		t = g.last + 1
	}
	g.last = t
	v := uint64(t) & (1<<48 - 1)
	g.mu.Unlock()
	if descending {
		v = ^v & (1<<48 - 1)
	}
	var b [6]byte
	for i := 5; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
	var sb strings.Builder
	sb.Grow(len(prefix) + 1 + 12 + 14)
	sb.WriteString(prefix)
	sb.WriteByte('_')
	sb.WriteString(hex.EncodeToString(b[:]))
	var r [14]byte
	_, _ = rand.Read(r[:])
	for _, c := range r {
		sb.WriteByte(base62[int(c)%len(base62)])
	}
	return sb.String()
}

func (g *idGen) session() string    { return g.next("ses", true) }
func (g *idGen) message() string    { return g.next("msg", false) }
func (g *idGen) part() string       { return g.next("prt", false) }
func (g *idGen) permission() string { return g.next("per", false) }
func (g *idGen) question() string   { return g.next("que", false) }

// maxClientID bounds an id a client chooses (a messageID, a part id).
const maxClientID = 64

// validClientID reports whether id, chosen by a client, is safe to keep:
// the prefix OpenCode uses for its kind, then letters, digits, '_' or '-'.
func validClientID(id, prefix string) bool {
	if len(id) > maxClientID || !strings.HasPrefix(id, prefix+"_") || len(id) == len(prefix)+1 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
