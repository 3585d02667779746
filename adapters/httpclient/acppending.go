package httpclient

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// JSON-RPC error code given to requests the transport answers itself.
const rpcInternalError = -32603

// maxAnswered is how many answered ids are remembered to drop a second
// copy of a response.
const maxAnswered = 4096

// pendingTable is the table of an ACPConn's requests sent and not yet
// answered to the reader, and the gate every agent line passes to reach
// the inbox. It makes each request answered exactly once, by the first of:
// the stream's copy of the agent's response; a JSON-RPC error the
// transport gives (a refused POST, a replay gap, a failed connection); or,
// when the stream can no longer deliver it, the request's held 200 body.
// A second copy of a response (the stream's after a transport answer, a
// replay) is dropped: the ids answered lately are remembered.
//
// A held body goes to the inbox at once when the daemon gave its event id
// (domain.EventIDHeader) and the stream has been read up to the event
// before it: nothing can come before it any more, and the stream's copy,
// one wake-up later in the common case, is then dropped as a second copy.
//
// It owns no goroutine: the Write goroutine adds requests, POST goroutines
// hold bodies and refuse requests, the receiver delivers events and
// reports gaps, and whoever fails the connection answers everything. Every
// answer is pushed into the inbox under the table's lock (lock order:
// table, then inbox), so two answers for one id cannot both pass.
type pendingTable struct {
	in *inbox

	mu       sync.Mutex
	pending  map[string]*pendingRequest // by domain.Frame.IDKey
	answered map[string]struct{}
	ring     []string // answered ids, oldest first
	streamed uint64   // the id of the last stream event passed through (delivered or dropped)
}

// pendingRequest is a request sent by the client and not yet answered to it.
type pendingRequest struct {
	id   json.RawMessage
	held []byte // the synchronous POST's 200 body, waiting for the stream's copy
}

func newPendingTable(in *inbox) *pendingTable {
	return &pendingTable{in: in, pending: map[string]*pendingRequest{}, answered: map[string]struct{}{}}
}

// add registers request f, about to be sent; an earlier request with the
// same id is forgotten, answered or not.
func (t *pendingTable) add(f domain.Frame) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := f.IDKey()
	delete(t.answered, key)
	t.pending[key] = &pendingRequest{id: bytes.Clone(f.ID)}
}

// hold keeps request f's 200 body until the stream delivers its copy, or
// delivers it now when eventID (the response's event id, 0 if unknown)
// is the next event the stream would deliver.
func (t *pendingTable) hold(f domain.Frame, body []byte, eventID uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := f.IDKey()
	p, ok := t.pending[key]
	if !ok || len(body) == 0 {
		return
	}
	if eventID > 0 && eventID == t.streamed+1 {
		t.in.push(body)
		t.markAnsweredLocked(key)
		t.streamed = eventID
		return
	}
	p.held = body
}

// passed records that the stream has passed event seq without delivering
// it (a line that is not JSON, an adapter notice).
func (t *pendingTable) passed(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.streamed = max(t.streamed, seq)
}

// holding reports whether a held body waits for the stream's copy.
func (t *pendingTable) holding() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.pending {
		if p.held != nil {
			return true
		}
	}
	return false
}

// deliver passes one agent line from the stream (event seq) to the inbox,
// unless it is a response to a request already answered.
func (t *pendingTable) deliver(f domain.Frame, data []byte, seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.streamed = max(t.streamed, seq)
	if f.Kind == domain.FrameResponse {
		key := f.IDKey()
		if _, dup := t.answered[key]; dup {
			return // answered already (a held copy after a gap, or a transport error)
		}
		if _, ok := t.pending[key]; ok {
			t.markAnsweredLocked(key)
		}
	}
	t.in.push(bytes.Clone(data))
}

// refuse answers request f, if still pending, with a JSON-RPC error
// carrying msg and, when valid JSON, data (the daemon's problem document).
func (t *pendingTable) refuse(f domain.Frame, msg string, data json.RawMessage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := f.IDKey()
	if _, ok := t.pending[key]; !ok {
		return
	}
	t.in.push(rpcError(f.ID, msg, data))
	t.markAnsweredLocked(key)
}

// answerAll answers every pending request: with its held 200 body when
// there is one, else with a JSON-RPC error saying why.
func (t *pendingTable) answerAll(why string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.answerAllLocked(why)
}

// failAll ends the inbox with err after answering every pending request
// (see answerAll). Only the first end counts: it reports whether this was
// it.
func (t *pendingTable) failAll(err error) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ended, _ := t.in.result(); ended {
		return false
	}
	t.answerAllLocked(err.Error())
	return t.in.end(err)
}

func (t *pendingTable) answerAllLocked(why string) {
	for key, p := range t.pending {
		if p.held != nil {
			t.in.push(p.held)
		} else {
			t.in.push(rpcError(p.id, why, nil))
		}
		t.markAnsweredLocked(key)
	}
}

func (t *pendingTable) markAnsweredLocked(key string) {
	delete(t.pending, key)
	if _, ok := t.answered[key]; ok {
		return
	}
	t.answered[key] = struct{}{}
	t.ring = append(t.ring, key)
	if len(t.ring) > maxAnswered {
		delete(t.answered, t.ring[0])
		t.ring = t.ring[1:]
	}
}

// rpcError is a JSON-RPC error response for id; data, when valid JSON, is
// attached as error.data (the daemon's problem document).
func rpcError(id json.RawMessage, msg string, data json.RawMessage) []byte {
	m, _ := json.Marshal(msg)
	b := []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":` + strconv.Itoa(rpcInternalError) + `,"message":` + string(m))
	if len(data) > 0 && json.Valid(data) {
		var buf bytes.Buffer
		if json.Compact(&buf, data) == nil {
			b = append(b, `,"data":`...)
			b = append(b, buf.Bytes()...)
		}
	}
	return append(b, "}}"...)
}
