package abi

import (
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// A decision's vary block says what the decision depended on, so the host
// may reuse it (see ABI.md, "Decision cache"). It is optional: an answer
// whose flags byte has FlagVary set carries it between the header and the
// text.
//
//	u32 field mask      bit i set: string field i was read
//	u32 H, u32 Q        numbers of header and query names read
//	H x (u32 len, name) header names, lower case
//	Q x (u32 len, name) query names
//
// Why names and not values: the host already has the values (it wrote the
// record), so the guest only says which parts it looked at, and the host
// builds the cache key from its own copy.

// FlagVary is the answer flag (byte 1) announcing a vary block.
const FlagVary = 1

// Vary is what a decision depended on: the string fields, header names
// and query names the policy read. A policy that declares its decisions
// cacheable promises that nothing else went into them: not the clock, not
// randomness, not state from earlier requests.
type Vary struct {
	Fields  uint32   // bit i: field i (Field*)
	Headers []string // lower case
	Query   []string
}

// AppendDecisionVary is AppendDecision with a vary block: the decision may
// be reused for any request equal to this one in everything v names.
func AppendDecisionVary(dst []byte, d domain.Decision, v *Vary) []byte {
	start := len(dst)
	dst = AppendDecision(dst, d)
	text := len(dst) - (start + answerHeader)
	dst[start+1] |= FlagVary
	// Insert the block before the text: append it, then rotate it into
	// place (no temporary buffer: allocations are dear in a wasm guest).
	blockStart := len(dst)
	dst = le.AppendUint32(dst, v.Fields)
	dst = le.AppendUint32(dst, uint32(len(v.Headers)))
	dst = le.AppendUint32(dst, uint32(len(v.Query)))
	for _, h := range v.Headers {
		dst = le.AppendUint32(dst, uint32(len(h)))
		for i := range len(h) {
			dst = append(dst, lower(h[i]))
		}
	}
	for _, q := range v.Query {
		dst = le.AppendUint32(dst, uint32(len(q)))
		dst = append(dst, q...)
	}
	if text > 0 {
		rotate(dst[start+answerHeader:], len(dst)-blockStart)
	}
	return dst
}

// rotate moves the last n bytes of b to its front, keeping the order of
// both parts.
func rotate(b []byte, n int) {
	reverse(b)
	reverse(b[:n])
	reverse(b[n:])
}

func reverse(b []byte) {
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// answerText returns the text of an answer record, after any vary block,
// and the block itself (nil when absent). ok is false when the block does
// not fit.
func answerText(b []byte) (text, block []byte, ok bool) {
	if b[1]&FlagVary == 0 {
		return b[answerHeader:], nil, true
	}
	rest := b[answerHeader:]
	if len(rest) < 12 {
		return nil, nil, false
	}
	at := 12
	names := uint64(le.Uint32(rest[4:])) + uint64(le.Uint32(rest[8:]))
	for range names {
		if len(rest)-at < 4 {
			return nil, nil, false
		}
		n := uint64(le.Uint32(rest[at:]))
		if n > uint64(len(rest)-at-4) {
			return nil, nil, false
		}
		at += 4 + int(n)
	}
	return rest[at:], rest[:at], true
}

// VaryBlock returns the vary block of an answer record as written; ok is
// false when it has none (or a malformed one, which ParseAnswer refuses).
func VaryBlock(b []byte) (block []byte, ok bool) {
	if len(b) < answerHeader {
		return nil, false
	}
	_, block, ok = answerText(b)
	return block, ok && block != nil
}

// ParseVary reads the vary block of an answer record; ok as for VaryBlock.
func ParseVary(b []byte) (v *Vary, ok bool) {
	block, ok := VaryBlock(b)
	if !ok {
		return nil, false
	}
	v = &Vary{Fields: le.Uint32(block)}
	nh := int(le.Uint32(block[4:]))
	at := 12
	next := func() string {
		n := int(le.Uint32(block[at:]))
		s := string(block[at+4 : at+4+n])
		at += 4 + n
		return s
	}
	for range nh {
		v.Headers = append(v.Headers, next())
	}
	for at < len(block) {
		v.Query = append(v.Query, next())
	}
	return v, true
}

// AppendKey appends to dst what record v holds in the parts vary names:
// two records with equal keys for the same Vary are alike in everything a
// decision with that Vary depended on. Each part is length-prefixed, so
// different contents never make equal keys.
func (v RequestView) AppendKey(dst []byte, vary *Vary) []byte {
	for i := range 32 {
		if vary.Fields&(1<<i) != 0 {
			f := v.Field(i)
			dst = le.AppendUint32(dst, uint32(len(f)))
			dst = append(dst, f...)
		}
	}
	dst = v.appendPairs(dst, vary.Headers, v.h, v.HeaderAt)
	return v.appendPairs(dst, vary.Query, v.q, v.QueryAt)
}

// appendPairs appends, for each name, how many entries carry it and their
// values in order.
func (v RequestView) appendPairs(dst []byte, names []string, n int, at func(int) ([]byte, []byte)) []byte {
	for _, name := range names {
		countAt := len(dst)
		dst = le.AppendUint32(dst, 0)
		count := uint32(0)
		for i := range n {
			k, val := at(i)
			if string(k) == name {
				count++
				dst = le.AppendUint32(dst, uint32(len(val)))
				dst = append(dst, val...)
			}
		}
		le.PutUint32(dst[countAt:], count)
	}
	return dst
}
