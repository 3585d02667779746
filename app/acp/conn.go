package acp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Transport is how a connection of ACP's standard transport (the
// "Streamable HTTP & WebSocket" RFD, served at /acp/{agent}) reaches its
// client.
type Transport uint8

const (
	// TransportHTTP is Streamable HTTP: POSTs in, SSE streams out.
	TransportHTTP Transport = iota + 1
	// TransportWebSocket is one socket carrying every message both ways.
	TransportWebSocket
)

// noStream tags an event that no stream of its connection carries: the
// response to a request answered in its POST's body (initialize). It cannot
// be a session id, which comes from an HTTP header and so holds no NUL.
const noStream = "\x00"

// MaxSessionStreams bounds the session streams one connection remembers,
// so a client cannot grow the daemon's memory by naming new sessions.
const MaxSessionStreams = 1024

// routes is the stream table of one Streamable HTTP connection. Each agent
// message goes out on exactly one stream: its session's stream when one is
// open at the moment the message is appended to the event log, else the
// connection's stream. The decision is recorded in the event (Event.Stream),
// so every stream reads the one event log through its own cursor and takes
// only its own events; nothing is queued per stream.
//
// Session of a message: params.sessionId for agent requests and
// notifications; for a response, the session of the POST that carried the
// request (pendingRequest.session).
type routes struct {
	transport Transport

	mu     sync.Mutex
	open   map[string]bool   // streams with a reader now: "" is the connection stream
	resume map[string]uint64 // where each closed stream's reader stopped
}

func newRoutes(t Transport) *routes {
	return &routes{transport: t, open: map[string]bool{}, resume: map[string]uint64{}}
}

// streamOf decides which stream carries an event; p is the pending request
// a response answers, if any. It runs on the agent's stdout goroutine, so it
// only takes a short lock. On a nil table (a /v1/acp instance) it is "".
func (r *routes) streamOf(f domain.Frame, p *pendingRequest) string {
	if r == nil || r.transport != TransportHTTP {
		return ""
	}
	var session string
	switch {
	case p != nil && !p.async:
		return noStream // answered in the POST's body
	case p != nil:
		session = p.session
	case f.Kind == domain.FrameRequest || f.Kind == domain.FrameNotification:
		session, _ = domain.SessionID(f.Data)
	}
	if session == "" {
		return ""
	}
	r.mu.Lock()
	open := r.open[session]
	r.mu.Unlock()
	if open {
		return session
	}
	return ""
}

// Conn is an instance created through ACP's standard transport: its
// connection id (Acp-Connection-Id) is its server id, so it is also listed,
// streamed and deleted through /v1/acp. Posting, streaming and deleting go
// through the same instance machinery as /v1/acp.
type Conn struct {
	s  *Instances
	in *instance
}

// ID is the connection id, which is also the server id.
func (c *Conn) ID() string { return c.in.id }

// Agent is the agent the connection runs.
func (c *Conn) Agent() string { return c.in.agent }

// Transport is how the connection was opened.
func (c *Conn) Transport() Transport { return c.in.routes.transport }

// newConnID returns an unguessable id (a random UUID), so one client cannot
// address another's connection by guessing.
func newConnID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Connect starts a new instance of agent for a standard-transport
// connection. Its errors are those of a first POST to /v1/acp (unsupported
// agent, not installed, spawn failure), returned before any connection
// exists.
func (s *Instances) Connect(ctx context.Context, agent string, t Transport) (*Conn, error) {
	in, err := s.instanceFor(ctx, PostRequest{ServerID: newConnID(), Agent: agent, HasAgent: true, routes: newRoutes(t)})
	if err != nil {
		return nil, err
	}
	return &Conn{s: s, in: in}, nil
}

// Conn finds a standard-transport connection of agent by id. Anything else
// (an unknown id, a /v1/acp instance, another agent's connection) is 404:
// a client learns nothing about ids it did not create here.
func (s *Instances) Conn(id, agent string) (*Conn, error) {
	s.mu.Lock()
	in := s.byID[id]
	s.mu.Unlock()
	if in == nil || in.routes == nil || in.agent != agent {
		return nil, ErrUnknownConnection
	}
	return &Conn{s: s, in: in}, nil
}

// Post forwards one client frame. With wait, a request is answered with its
// response (the initialize of Streamable HTTP); otherwise it returns at once
// and the response goes out on the connection's streams. session is the
// ACP session the client sent the frame for, which routes the response.
func (c *Conn) Post(ctx context.Context, f domain.Frame, session string, wait bool) ([]byte, error) {
	a, err := c.in.post(ctx, f, !wait, session)
	return a.Data, err
}

// Close deletes the connection's instance (as DELETE /v1/acp/{id} does).
func (c *Conn) Close(ctx context.Context) { c.s.Delete(ctx, c.in.id) }

// Stream is one reader of a connection: an SSE stream of Streamable HTTP
// (the connection's, or one session's), or a WebSocket's outbound side.
type Stream struct {
	cur    *Cursor
	r      *routes
	key    string // "" connection stream, else the session
	all    bool   // a WebSocket takes every event
	pos    uint64 // last sequence number read
	closed bool
}

func streamConflict(msg string) error {
	return domain.Conflict(msg)
}

// ErrUnknownConnection is a connection id no instance of the agent has
// (the HTTP adapter answers it 404).
var ErrUnknownConnection = domain.InvalidRequest("unknown Acp-Connection-Id")

// OpenStream opens the connection's stream (session "") or a session's
// stream. Each has at most one reader at a time (409 otherwise, as in the
// TypeScript SDK's server). Without after, a stream resumes where its last
// reader stopped, so messages routed to it while nobody read are not lost
// (within the replay budget); the first connection stream starts at the
// first event. With after (Last-Event-ID), it starts after that event.
//
// A WebSocket connection has one stream, session "", carrying every event;
// it opens once, when the socket is accepted.
func (c *Conn) OpenStream(session string, after *uint64) (*Stream, error) {
	r := c.in.routes
	if r.transport == TransportWebSocket && session != "" {
		return nil, streamConflict("a WebSocket connection has no session streams")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.open[session] {
		if session == "" {
			return nil, streamConflict("the connection stream already has a reader")
		}
		return nil, streamConflict("the stream of session " + session + " already has a reader")
	}
	start, seen := r.resume[session]
	if !seen && session != "" && len(r.resume) >= MaxSessionStreams {
		return nil, streamConflict("too many session streams on this connection")
	}
	if !seen && session != "" {
		// Read before marking the stream open: every event routed to it
		// is appended after this point.
		start = c.in.log.Stats().LastEventID
	}
	if after != nil {
		start = *after
	}
	r.open[session] = true
	if _, ok := r.resume[session]; !ok {
		r.resume[session] = start
	}
	return &Stream{
		cur: c.in.log.Subscribe(&start),
		r:   r,
		key: session,
		all: r.transport == TransportWebSocket,
		pos: start,
	}, nil
}

// Read is Cursor.Read restricted to the stream's own events. Events of
// other streams are skipped (and acknowledged, so they hold up no flush
// barrier). It returns no events and no error after idle without any.
func (s *Stream) Read(ctx context.Context, buf []Event, max int, idle time.Duration) ([]Event, *Gap, error) {
	deadline := time.Now().Add(idle)
	for {
		wait := time.Until(deadline)
		if wait <= 0 {
			return buf[:0], nil, nil
		}
		evs, gap, err := s.cur.Read(ctx, buf[:0], max, wait)
		if err != nil {
			return evs, nil, err
		}
		if gap != nil {
			s.pos = gap.OldestAvailable - 1
			return evs, gap, nil
		}
		if len(evs) == 0 {
			return evs, nil, nil
		}
		s.pos = evs[len(evs)-1].Seq
		if s.all {
			return evs, nil, nil
		}
		kept := evs[:0]
		for _, e := range evs {
			if e.Stream == s.key {
				kept = append(kept, e)
			}
		}
		if len(kept) > 0 {
			return kept, nil, nil
		}
		s.cur.Ack(s.pos)
	}
}

// Ack records that everything Read returned has reached the peer. Events
// Read skipped count as delivered too, so seq (the last event returned, as
// for Cursor.Ack) may be below what is acknowledged.
func (s *Stream) Ack(seq uint64) { s.cur.Ack(max(seq, s.pos)) }

// Close releases the stream for its next reader, which resumes after the
// last event acknowledged here.
func (s *Stream) Close() {
	if s.closed {
		return
	}
	s.closed = true
	s.r.mu.Lock()
	delete(s.r.open, s.key)
	s.r.resume[s.key] = s.cur.Flushed()
	s.r.mu.Unlock()
	s.cur.Close()
}
