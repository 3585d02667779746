package opencode

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Config is what the adapter needs; cmd/sandbox-agent fills it.
type Config struct {
	// Instances runs the agents (one instance per agent, shared by its
	// sessions).
	Instances *acp.Instances
	// Store keeps sessions and messages (OpenStore).
	Store *Store
	// Agents lists the agent catalogue (GET /v1/agents?config=true): the
	// providers and models OpenCode clients choose from. Nil lists none
	// but DefaultAgent.
	Agents func(ctx context.Context) []domain.AgentInfo
	// Installed reports whether an agent can start without installing
	// (for the agent.install an action implies); nil: always.
	Installed func(agent string) bool
	// DefaultAgent runs sessions whose client names no provider.
	DefaultAgent string
	// Directory is the working directory of sessions whose client names
	// none.
	Directory string
	// Home is reported as the home directory (GET /path).
	Home string
	// Version is the daemon's version (a session's version).
	Version string
	Logger  *slog.Logger

	// MaxBody bounds one request body (default 32 MiB); InflightBytes all
	// request bodies held at once (default 128 MiB; 503 past it), unless
	// Inflight is given: the daemon's own budget (--inflight-bytes), which
	// this API then shares with the rest of the HTTP API.
	MaxBody       int64
	InflightBytes int64
	Inflight      Budget
	// EventBytes is the event stream's buffer (default 16 MiB): a
	// subscriber that falls further behind is disconnected, and resyncs
	// as OpenCode clients do when their stream ends.
	EventBytes int64
	// MaxSubscribers bounds open event streams (default 256; 503 past).
	MaxSubscribers int
	// MaxTurns bounds the prompts running or waiting for their turn over
	// all sessions (default 512; 429 past): each is a goroutine, a
	// prompt on an agent and a session held in memory, and sessions are
	// as many as a client creates.
	MaxTurns int
	// Heartbeat is the idle time before a server.heartbeat event (10 s);
	// StreamWriteTimeout bounds one write to a stream (30 s).
	Heartbeat          time.Duration
	StreamWriteTimeout time.Duration
	// RequestTimeout bounds initialize, session/new and session/load
	// (default 120 s). Prompts have none: a turn lasts as long as the
	// agent works.
	RequestTimeout time.Duration
	// AnswerDelay is how long a synchronous prompt's answer waits after
	// the turn's events have been sent to the event streams (default
	// 100 ms, negative for none; see settle).
	AnswerDelay time.Duration
	// AbortGrace is how long an aborted turn waits for the agent to end
	// it (stopReason cancelled) before it is ended here (default 10 s).
	AbortGrace time.Duration
	// MaxPartBytes bounds the text of one part (default 8 MiB); past it a
	// part stops growing and says it was cut.
	MaxPartBytes int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (c *Config) fill() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.DefaultAgent == "" {
		c.DefaultAgent = "mock"
	}
	if c.Directory == "" {
		c.Directory = "/"
	}
	if c.Home == "" {
		c.Home = c.Directory
	}
	if c.MaxBody <= 0 {
		c.MaxBody = 32 << 20
	}
	if c.InflightBytes <= 0 {
		c.InflightBytes = 128 << 20
	}
	if c.EventBytes <= 0 {
		c.EventBytes = 16 << 20
	}
	if c.MaxSubscribers <= 0 {
		c.MaxSubscribers = 256
	}
	if c.MaxTurns <= 0 {
		c.MaxTurns = 512
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = 10 * time.Second
	}
	if c.StreamWriteTimeout <= 0 {
		c.StreamWriteTimeout = 30 * time.Second
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 120 * time.Second
	}
	if c.AnswerDelay == 0 {
		c.AnswerDelay = 100 * time.Millisecond
	}
	if c.AbortGrace <= 0 {
		c.AbortGrace = 10 * time.Second
	}
	if c.MaxPartBytes <= 0 {
		c.MaxPartBytes = 8 << 20
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Adapter serves OpenCode's HTTP API (mounted at /opencode) over ACP
// instances. It owns: the runtimes of the sessions touched since start
// (sessions), the ACP connections (conns, one per agent), the pending
// permissions and questions, and the event stream (bus).
//
// Goroutines: one reader per agent connection (agentConn.read), one per
// asynchronous prompt (until its turn ends) and one per event stream
// (the request's own). Close stops them all.
type Adapter struct {
	cfg   Config
	log   *slog.Logger
	store *Store
	bus   *acp.EventLog
	ids   idGen
	mux   *http.ServeMux

	ctx    context.Context // the adapter's lifetime
	cancel context.CancelFunc
	wg     sync.WaitGroup

	inflight Budget       // request bodies held
	turns    atomic.Int64 // prompts running or waiting, all sessions (MaxTurns)

	mu          sync.Mutex
	closed      bool
	conns       map[string]*connSlot // by agent
	sessions    map[string]*session  // by OpenCode session id: those in use, and at most about maxResident others (trim)
	asks        map[string]*ask      // pending permissions and questions, by id
	subscribers int
	config      json.RawMessage   // PATCH /config, kept in memory
	defaults    map[string]string // agent → its default model (catalog)
	trimAt      int               // trim sessions past this many
	trimming    bool
}

// connSlot serialises starting an agent's connection: sem is a one-slot
// semaphore held while dialing. users counts the callers of connFor
// holding it (guarded by Adapter.mu): a slot with no connection and no
// user is dropped, so agents that never connected (a provider no agent
// answers to) leave nothing behind.
type connSlot struct {
	sem   chan struct{}
	conn  *agentConn
	users int
}

// New builds the adapter. Close it when the daemon stops.
func New(cfg Config) (*Adapter, error) {
	cfg.fill()
	if cfg.Instances == nil || cfg.Store == nil {
		return nil, errors.New("opencode: Instances and Store are required")
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &Adapter{
		cfg: cfg, log: cfg.Logger, store: cfg.Store,
		bus:      acp.NewEventLog(cfg.EventBytes),
		ctx:      ctx,
		cancel:   cancel,
		inflight: cfg.Inflight,
		conns:    map[string]*connSlot{},
		sessions: map[string]*session{},
		trimAt:   maxResident,
		asks:     map[string]*ask{},
		defaults: map[string]string{},
	}
	if a.inflight == nil {
		a.inflight = &budget{max: cfg.InflightBytes}
	}
	a.ids.now = cfg.Now
	cfg.Store.mu.Lock()
	cfg.Store.busy = a.busy
	cfg.Store.onEvict = a.evicted
	cfg.Store.mu.Unlock()
	a.mux = a.routes()
	cfg.Store.kickEnforce() // retention, once at start
	return a, nil
}

// Close ends every event stream and connection reader and waits for the
// adapter's goroutines. The agents' instances are the daemon's to stop
// (acp.Instances.Close). It is idempotent.
func (a *Adapter) Close(ctx context.Context) error {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.cancel()
	a.bus.Close()
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ServeHTTP serves a request whose path is below /opencode (the prefix is
// stripped here). Auth, the browser guards and CORS are the mounting
// adapter's (httpapi).
//
// The escaped path is kept (RawPath): the mux routes on it, so an id
// holding encoded slashes or dots ("..%2F..%2Fetc") is one segment, an
// id that does not exist, rather than a path the mux would clean and
// redirect to without the /opencode prefix.
func (a *Adapter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r2 := r.Clone(r.Context())
	r2.URL.Path = stripPrefix(r.URL.Path)
	r2.URL.RawPath = ""
	if r.URL.RawPath != "" {
		r2.URL.RawPath = stripPrefix(r.URL.RawPath)
	}
	a.mux.ServeHTTP(w, r2)
}

// stripPrefix is a request path below /opencode without the prefix.
func stripPrefix(p string) string {
	p = strings.TrimPrefix(p, "/opencode")
	if p == "" {
		p = "/"
	}
	return p
}

// spawn runs fn in a goroutine Close waits for, unless the adapter is
// closed (then it reports false and runs nothing): no goroutine starts
// after Close has begun waiting.
func (a *Adapter) spawn(fn func()) bool {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return false
	}
	a.wg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
		fn()
	}()
	return true
}

// busy reports whether a session is running (or waiting to run) a turn:
// the store never evicts it.
func (a *Adapter) busy(id string) bool {
	a.mu.Lock()
	s := a.sessions[id]
	a.mu.Unlock()
	return s != nil && s.busy()
}

// evicted forgets sessions the store deleted to stay in its bounds and
// tells the clients.
func (a *Adapter) evicted(ids []string) {
	for _, id := range ids {
		a.mu.Lock()
		s := a.sessions[id]
		delete(a.sessions, id)
		a.mu.Unlock()
		if s != nil {
			s.detach()
		}
		a.log.Info("opencode: session evicted (retention or --opencode-max-db)", "session", id)
		a.publish("session.deleted", map[string]any{"info": map[string]string{"id": id}, "sessionID": id})
	}
}

// publish appends an event of no session to the stream (tagged with the
// default directory) and returns its sequence number.
func (a *Adapter) publish(typ string, props any) uint64 {
	return a.publishIn(a.cfg.Directory, typ, props)
}

// publishIn appends an event about directory dir. The event log's stream
// tag (acp.Event.Stream, which routes ACP connections' events) carries the
// directory here: /global/event wraps each event with it and /event can
// filter on it, without decoding the event again.
func (a *Adapter) publishIn(dir, typ string, props any) uint64 {
	b, err := json.Marshal(event{Type: typ, Properties: props})
	if err != nil {
		a.log.Error("opencode: encoding an event failed", "type", typ, "err", err)
		return 0
	}
	return a.bus.AppendTo(b, dir)
}

// now is the clock in milliseconds, as OpenCode times everything.
func (a *Adapter) now() int64 { return a.cfg.Now().UnixMilli() }

// Budget is a byte budget shared by concurrent holders: Take charges n
// bytes, or nothing and false when that would pass it; Give returns them;
// Used is what is charged now. The daemon's --inflight-bytes budget
// (httpapi.Inflight) is one.
type Budget interface {
	Take(n int64) bool
	Give(n int64)
	Used() int64
}

// budget is the adapter's own Budget when it is given none.
type budget struct {
	mu   sync.Mutex
	used int64
	max  int64
}

func (b *budget) Take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

func (b *budget) Give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

func (b *budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
