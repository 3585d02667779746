//go:build linux && (amd64 || arm64)

package process

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// The daemon and its supervisor talk over one SOCK_SEQPACKET socketpair:
// a packet is one frame, so no framing is needed beyond a header.
//
// Daemon → supervisor: [type][id uint64][payload]. A spawn request is
// zero or more reqData frames followed by one reqSpawn frame carrying the
// child's descriptors (SCM_RIGHTS); their payloads concatenated are a
// spawnReq (see encode). reqAck (no payload) lets the tree's
// sub-supervisor reap a leader whose exit the daemon has seen.
//
// Supervisor → daemon: fixed 16-byte events: [id uint64][kind uint32]
// [val int32], kind one of the rep* constants (repDone forwarded as
// "gone").
const (
	reqData  = 1
	reqSpawn = 2
	reqAck   = 3

	frameHeader = 9
	// frameMax keeps every frame well under the socket's default buffer
	// (about 208 KiB), which bounds a SOCK_SEQPACKET packet.
	frameMax   = 32 << 10
	eventBytes = 16
	// spawnMax bounds one request (execve itself refuses much past 2 MiB
	// of arguments and environment).
	spawnMax = 8 << 20
)

// spawnReq is one process to start.
type spawnReq struct {
	flags  uint32
	uid    uint32
	gid    uint32
	groups []uint32
	// stdio maps the leader's fds 0, 1, 2 to an index among the
	// descriptors sent with the request; -1 is /dev/null.
	stdio [3]int32
	path  string
	dir   string
	argv  []string
	env   []string
}

func (r *spawnReq) encode() ([]byte, error) {
	for _, s := range append(append([]string{r.path, r.dir}, r.argv...), r.env...) {
		if strings.IndexByte(s, 0) >= 0 {
			return nil, errors.New("argument or environment contains a NUL byte")
		}
	}
	le := binary.LittleEndian
	b := le.AppendUint32(nil, r.flags)
	b = le.AppendUint32(b, r.uid)
	b = le.AppendUint32(b, r.gid)
	b = le.AppendUint32(b, uint32(len(r.groups)))
	for _, g := range r.groups {
		b = le.AppendUint32(b, g)
	}
	for _, s := range r.stdio {
		b = le.AppendUint32(b, uint32(s))
	}
	str := func(s string) { b = le.AppendUint32(b, uint32(len(s))); b = append(b, s...) }
	str(r.path)
	str(r.dir)
	b = le.AppendUint32(b, uint32(len(r.argv)))
	for _, s := range r.argv {
		str(s)
	}
	b = le.AppendUint32(b, uint32(len(r.env)))
	for _, s := range r.env {
		str(s)
	}
	if len(b) > spawnMax {
		return nil, fmt.Errorf("arguments and environment take %d bytes, more than %d", len(b), spawnMax)
	}
	return b, nil
}

// decodeSpawn parses what encode wrote; anything else is an error.
func decodeSpawn(b []byte) (*spawnReq, error) {
	d := decoder{b: b}
	r := &spawnReq{}
	r.flags = d.u32()
	r.uid = d.u32()
	r.gid = d.u32()
	n := d.u32()
	if uint64(n)*4 > uint64(len(d.b)) {
		return nil, errors.New("bad group count")
	}
	r.groups = make([]uint32, n)
	for i := range r.groups {
		r.groups[i] = d.u32()
	}
	for i := range r.stdio {
		r.stdio[i] = int32(d.u32())
	}
	r.path = d.str()
	r.dir = d.str()
	r.argv = d.strs()
	r.env = d.strs()
	if d.err || len(d.b) != 0 {
		return nil, errors.New("malformed spawn request")
	}
	return r, nil
}

type decoder struct {
	b   []byte
	err bool
}

func (d *decoder) take(n uint64) []byte {
	if d.err || n > uint64(len(d.b)) {
		d.err = true
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) str() string { return string(d.take(uint64(d.u32()))) }

func (d *decoder) strs() []string {
	n := d.u32()
	if uint64(n)*4 > uint64(len(d.b)) {
		d.err = true
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.str()
	}
	return out
}

func frame(typ byte, id uint64, payload []byte) []byte {
	b := make([]byte, 0, frameHeader+len(payload))
	b = append(b, typ)
	b = binary.LittleEndian.AppendUint64(b, id)
	return append(b, payload...)
}

func event(id uint64, kind uint32, val int32) []byte {
	b := binary.LittleEndian.AppendUint64(make([]byte, 0, eventBytes), id)
	b = binary.LittleEndian.AppendUint32(b, kind)
	return binary.LittleEndian.AppendUint32(b, uint32(val))
}
