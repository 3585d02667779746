package abi

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// The string fields of a request record, in table order. A later ABI
// revision may append fields; readers ignore indices they do not know, and
// a field missing from the record reads as "".
const (
	FieldMethod = iota
	FieldRoute
	FieldOperationID
	FieldPath
	FieldRemoteAddr
	FieldServerID
	FieldAgent
	FieldRPCKind // "" when the request is not an ACP POST
	FieldRPCID   // the id's JSON text, e.g. 7 or "abc"
	FieldRPCMethod
	// Fields added by ABI v2.
	FieldAction    // e.g. "acp.start"
	FieldImplies   // further actions, comma-separated, e.g. "agent.install"
	FieldFSPath    // resolved filesystem path of fs.* and config.* actions
	FieldFSDest    // destination of a move
	FieldPrincipal // who an earlier policy authenticated the request as
	NumFields
)

// Sizes of the request record's parts, in bytes.
const (
	recordHeader = 12 // S, H, Q
	fieldEntry   = 8  // off, len
	pairEntry    = 16 // name off, name len, value off, value len
)

var le = binary.LittleEndian

// AppendRequest encodes r as a request record (see ABI.md) and appends it
// to dst. Header and query entries are sorted by name, values in their
// original order. Header names are written in lower case (LowerASCII),
// as the ABI promises, whatever case r holds them in (the daemon's HTTP adapter
// lowers them already; a policy test case or another caller may not):
// names that differ only in case become one name, their values in the
// order of the original names' sort. Guests look headers up in any case,
// and the decision cache keys on the lower-case names a guest read, so a
// name left in capitals would be read by the policy but missing from the
// key, and one decision would be reused for requests the policy would
// decide otherwise.
func AppendRequest(dst []byte, r *domain.AuthRequest) []byte {
	var rpcKind, rpcID, rpcMethod string
	if r.RPC != nil {
		rpcKind, rpcID, rpcMethod = r.RPC.Kind, r.RPC.ID, r.RPC.Method
	}
	fields := [NumFields]string{
		FieldMethod: r.Method, FieldRoute: r.Route, FieldOperationID: r.OperationID,
		FieldPath: r.Path, FieldRemoteAddr: r.RemoteAddr, FieldServerID: r.ServerID,
		FieldAgent: r.Agent, FieldRPCKind: rpcKind, FieldRPCID: rpcID, FieldRPCMethod: rpcMethod,
		FieldAction: string(r.Action), FieldImplies: joinActions(r.Implies),
		FieldFSPath: r.FSPath, FieldFSDest: r.FSDest, FieldPrincipal: r.Principal,
	}
	headerNames, nh := sortedKeys(r.Headers)
	queryNames, nq := sortedKeys(r.Query)
	headerEntries := lowerNames(headerNames)

	base := len(dst)
	tables := recordHeader + NumFields*fieldEntry + (nh+nq)*pairEntry
	dst = slices.Grow(dst, tables+estimate(fields[:], r.Headers, r.Query))
	dst = dst[:base+tables]
	le.PutUint32(dst[base:], NumFields)
	le.PutUint32(dst[base+4:], uint32(nh))
	le.PutUint32(dst[base+8:], uint32(nq))
	at := base + recordHeader
	put := func(s string) {
		le.PutUint32(dst[at:], uint32(len(dst)-base))
		le.PutUint32(dst[at+4:], uint32(len(s)))
		dst = append(dst, s...)
		at += fieldEntry
	}
	for _, s := range fields {
		put(s)
	}
	for i, name := range headerNames {
		for _, v := range r.Headers[name] {
			put(headerEntries[i])
			put(v)
		}
	}
	for _, name := range queryNames {
		for _, v := range r.Query[name] {
			put(name)
			put(v)
		}
	}
	return dst
}

// lowerNames returns the header names to write for names (sorted
// already), lowered with LowerASCII, and reorders names to match: by
// lowered name, the original order breaking ties. Names in lower case
// already, the common case, cost nothing.
func lowerNames(names []string) []string {
	if !slices.ContainsFunc(names, hasUpperASCII) {
		return names
	}
	type pair struct{ lower, name string }
	pairs := make([]pair, len(names))
	for i, n := range names {
		pairs[i] = pair{LowerASCII(n), n}
	}
	slices.SortStableFunc(pairs, func(a, b pair) int { return strings.Compare(a.lower, b.lower) })
	lower := make([]string, len(names))
	for i, p := range pairs {
		names[i], lower[i] = p.name, p.lower
	}
	return lower
}

// LowerASCII is s with A to Z lowered. Header names are compared this
// way throughout the ABI (the host's record, the guest's lookups, the
// vary block, the cache key), so all of them agree on which entries a
// name means; HTTP header names are ASCII.
func LowerASCII(s string) string {
	if !hasUpperASCII(s) {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		b[i] = lower(c)
	}
	return string(b)
}

// EqualFoldASCII reports whether a and b are equal under LowerASCII.
func EqualFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

func hasUpperASCII(s string) bool {
	for i := range len(s) {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// SetPrincipal rewrites the principal field of a record made by
// AppendRequest, and returns the record (which may have moved). The host
// calls it between policies when one of them authenticated the request,
// so the record is encoded once per request however long the chain.
func SetPrincipal(rec []byte, principal string) []byte {
	at := recordHeader + FieldPrincipal*fieldEntry
	if len(rec) < at+fieldEntry || le.Uint32(rec) <= FieldPrincipal {
		return rec
	}
	// The new value is appended and the field's entry repointed; the old
	// bytes stay, unreferenced.
	rec = append(rec, principal...)
	le.PutUint32(rec[at:], uint32(len(rec)-len(principal)))
	le.PutUint32(rec[at+4:], uint32(len(principal)))
	return rec
}

func joinActions(as []domain.Action) string {
	switch len(as) {
	case 0:
		return ""
	case 1:
		return string(as[0])
	}
	var b strings.Builder
	for i, a := range as {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(string(a))
	}
	return b.String()
}

// SplitActions reads the implies field.
func SplitActions(s string) []domain.Action {
	if s == "" {
		return nil
	}
	parts := strings.Split(s, ",")
	out := make([]domain.Action, len(parts))
	for i, p := range parts {
		out[i] = domain.Action(p)
	}
	return out
}

func sortedKeys(m map[string][]string) ([]string, int) {
	if len(m) == 0 {
		return nil, 0
	}
	keys := make([]string, 0, len(m))
	n := 0
	for k, vs := range m {
		keys = append(keys, k)
		n += len(vs)
	}
	slices.Sort(keys)
	return keys, n
}

func estimate(fields []string, maps ...map[string][]string) int {
	n := 0
	for _, s := range fields {
		n += len(s)
	}
	for _, m := range maps {
		for k, vs := range m {
			for _, v := range vs {
				n += len(k) + len(v)
			}
		}
	}
	return n
}

// ErrBadRecord is a request record whose tables do not fit in it.
var ErrBadRecord = errors.New("malformed request record")

// RequestView reads a request record in place, without copying or
// allocating; out-of-range offsets read as empty.
type RequestView struct {
	b       []byte
	s, h, q int
}

// ParseRequest checks that b's tables fit and returns a view of it.
func ParseRequest(b []byte) (RequestView, error) {
	if len(b) < recordHeader {
		return RequestView{}, ErrBadRecord
	}
	s, h, q := le.Uint32(b), le.Uint32(b[4:]), le.Uint32(b[8:])
	need := uint64(recordHeader) + uint64(s)*fieldEntry + (uint64(h)+uint64(q))*pairEntry
	if need > uint64(len(b)) {
		return RequestView{}, ErrBadRecord
	}
	return RequestView{b: b, s: int(s), h: int(h), q: int(q)}, nil
}

// entry reads the (off, len) pair at table position at.
func (v RequestView) entry(at int) []byte {
	off, n := le.Uint32(v.b[at:]), le.Uint32(v.b[at+4:])
	if uint64(off)+uint64(n) > uint64(len(v.b)) {
		return nil
	}
	return v.b[off : off+n]
}

// Field returns string field i (Field*), or nil when the record has none.
func (v RequestView) Field(i int) []byte {
	if i < 0 || i >= v.s {
		return nil
	}
	return v.entry(recordHeader + i*fieldEntry)
}

// NumHeaders is the number of header entries (one per value).
func (v RequestView) NumHeaders() int { return v.h }

// HeaderAt returns header entry i.
func (v RequestView) HeaderAt(i int) (name, value []byte) { return v.pair(i) }

// NumQuery is the number of query entries (one per value).
func (v RequestView) NumQuery() int { return v.q }

// QueryAt returns query entry i.
func (v RequestView) QueryAt(i int) (name, value []byte) { return v.pair(v.h + i) }

func (v RequestView) pair(i int) (name, value []byte) {
	at := recordHeader + v.s*fieldEntry + i*pairEntry
	return v.entry(at), v.entry(at + fieldEntry)
}

// AuthRequest copies the whole record into a domain.AuthRequest.
func (v RequestView) AuthRequest() domain.AuthRequest {
	f := func(i int) string { return string(v.Field(i)) }
	r := domain.AuthRequest{
		Method: f(FieldMethod), Route: f(FieldRoute), OperationID: f(FieldOperationID),
		Path: f(FieldPath), RemoteAddr: f(FieldRemoteAddr), ServerID: f(FieldServerID),
		Agent: f(FieldAgent), Action: domain.Action(f(FieldAction)), Implies: SplitActions(f(FieldImplies)),
		FSPath: f(FieldFSPath), FSDest: f(FieldFSDest), Principal: f(FieldPrincipal),
	}
	if kind := f(FieldRPCKind); kind != "" {
		r.RPC = &domain.RPCInfo{Kind: kind, ID: f(FieldRPCID), Method: f(FieldRPCMethod)}
	}
	collect := func(n int, at func(int) ([]byte, []byte)) map[string][]string {
		if n == 0 {
			return nil
		}
		m := make(map[string][]string)
		for i := range n {
			k, val := at(i)
			m[string(k)] = append(m[string(k)], string(val))
		}
		return m
	}
	r.Headers = collect(v.h, v.HeaderAt)
	r.Query = collect(v.q, v.QueryAt)
	return r
}
