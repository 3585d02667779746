package wasmpolicy

import (
	"cmp"
	"sync"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/abi"
)

// decisionCache remembers the decisions of one policy that declared them
// cacheable (guest.Cacheable), each under what it depended on: the vary
// block of its answer names the fields, headers and query parameters the
// policy read, and the key is their values in the request. A later
// request with the same values gets the same decision without a module
// call.
//
// Why this is sound: a cacheable policy promises its decision is a
// function of its configuration and of what it read. Given the same values
// for what it read, it takes the same path, reads the same things and
// decides the same; so an entry is valid for any request matching it,
// whatever else differs. A reload starts a new Policy, so a new cache.
//
// Why it matters: a Go guest's call costs 10 to 15 µs on a daemon busy
// with other work (its code and data are cold), against a few µs in a hot
// loop; the ACP round trip is about 200 µs, and the project's goal is a
// chain of two policies within 10 % of none.
//
// It is bounded: at most maxVaryShapes distinct vary blocks (a policy has
// a few decision paths), keys up to maxKeyBytes, maxEntries entries; when
// full it is emptied, so a caller sending endless distinct tokens costs
// hits, never memory.
type decisionCache struct {
	mu      sync.Mutex
	shapes  []varyShape
	entries map[string]domain.Decision
	// limit overrides maxEntries (tests).
	limit int
}

// varyShape is one distinct vary block the policy answered with.
type varyShape struct {
	raw  string // the block as the guest wrote it, to recognise it again
	vary *abi.Vary
}

const (
	maxVaryShapes = 16
	maxVaryBlock  = 4096 // larger blocks are not cached (instance.authorize)
	maxKeyBytes   = 2048
	maxEntries    = 4096
)

// keys recycles key buffers.
var keys = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// lookup returns the decision remembered for a request alike in what some
// earlier decision read, if any. Decisions that read any of the fields in
// unknown (a bit per abi.Field*: values rec does not hold yet) are not
// candidates.
func (c *decisionCache) lookup(rec abi.RequestView, unknown uint32) (domain.Decision, bool) {
	buf := keys.Get().(*[]byte)
	defer keys.Put(buf)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.shapes {
		if c.shapes[i].vary.Fields&unknown != 0 {
			continue
		}
		key := c.key((*buf)[:0], i, rec)
		*buf = key
		if len(key) > maxKeyBytes {
			continue
		}
		if d, ok := c.entries[string(key)]; ok {
			return d, true
		}
	}
	return domain.Decision{}, false
}

// store remembers d for requests alike to rec in what the answer's vary
// block names.
func (c *decisionCache) store(rec abi.RequestView, answer []byte, d domain.Decision) {
	raw, ok := abi.VaryBlock(answer)
	if !ok {
		return
	}
	buf := keys.Get().(*[]byte)
	defer keys.Put(buf)
	c.mu.Lock()
	defer c.mu.Unlock()
	shape := -1
	for i, s := range c.shapes {
		if s.raw == string(raw) {
			shape = i
			break
		}
	}
	if shape < 0 {
		if len(c.shapes) == maxVaryShapes {
			return
		}
		vary, ok := abi.ParseVary(answer)
		if !ok {
			return
		}
		c.shapes = append(c.shapes, varyShape{raw: string(raw), vary: vary})
		shape = len(c.shapes) - 1
	}
	key := c.key((*buf)[:0], shape, rec)
	*buf = key
	if len(key) > maxKeyBytes {
		return
	}
	if c.entries == nil || len(c.entries) >= cmp.Or(c.limit, maxEntries) {
		c.entries = make(map[string]domain.Decision)
	}
	c.entries[string(key)] = d
}

// key is the shape's index followed by rec's values of what it names.
func (c *decisionCache) key(dst []byte, shape int, rec abi.RequestView) []byte {
	dst = append(dst, byte(shape))
	return rec.AppendKey(dst, c.shapes[shape].vary)
}
