package httpapi

import (
	"cmp"
	"log/slog"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi/acpstd"
	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi/internal/route"
	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi/processapi"
	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/app/agents"
	"github.com/sandbox-agent-go/sandbox-agent/app/authz"
	"github.com/sandbox-agent-go/sandbox-agent/app/files"
	"github.com/sandbox-agent-go/sandbox-agent/app/processes"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// Problem is an application/problem+json body (RFC 9457); the one mapping
// from errors to problems is internal/route's.
type Problem = route.Problem

// Inflight is the daemon's budget of request bodies and WebSocket messages
// held in memory (--inflight-bytes). The composition root makes one and
// gives it to Config.Inflight and to the OpenCode API, so that both draw
// on one budget and the memory bound counts it once.
type Inflight = route.Inflight

// NewInflight returns a budget of max bytes.
func NewInflight(max int64) *Inflight { return route.NewInflight(max) }

// Config is what the HTTP adapter needs; cmd/sandbox-agent fills it.
type Config struct {
	Version   string
	Logger    *slog.Logger
	Instances *acp.Instances

	// Token enables bearer auth on /v1/* when non-empty; Tokens, when set,
	// replaces it with a set that can change at run time (--token-file,
	// reloaded on SIGHUP). The check runs after the policies (Authorizer).
	Token  string
	Tokens *authz.Tokens
	CORS   CORS

	// CheckHost refuses (421) a request whose Host is not localhost, a
	// loopback address or one of AllowedHosts: set for a loopback
	// listener, so a DNS-rebinding web page cannot reach it.
	CheckHost    bool
	AllowedHosts []string

	// MaxACPBody bounds one ACP POST body. Zero fields take DefaultConfig's
	// value.
	MaxACPBody int64
	// InflightBytes bounds the request bodies and WebSocket messages held
	// at once, from their first byte until handled (an ACP POST until it
	// is answered; default 256 MiB; 503, or close 1013, past it).
	InflightBytes int64
	// Inflight, when set, is that budget itself, shared with whoever else
	// holds bodies (the OpenCode API); InflightBytes is then its size.
	Inflight *Inflight
	// ReadIdleTimeout cuts a request body that delivers nothing for this
	// long (408; default 60 s).
	ReadIdleTimeout time.Duration
	// Heartbeat is the idle time before an SSE keep-alive comment (15 s).
	Heartbeat time.Duration
	// StreamWriteTimeout bounds one SSE write, to drop dead peers (30 s).
	StreamWriteTimeout time.Duration

	// UI, when set, serves the inspector at /ui/ (and redirects /ui). It
	// sits outside /v1/, so it needs no token.
	UI http.Handler
	// Docs, when set, serves the API documentation at /docs (and /docs/...),
	// from files embedded in the binary; like UI it needs no token.
	Docs http.Handler

	// Catalog, when set, serves /v1/agents (list, describe, install).
	Catalog *agents.Catalog

	// Files, when set, serves /v1/fs/*; Config serves /v1/config/*.
	Files  *files.Files
	Config *files.ConfigStore
	// MaxUpload bounds one PUT /v1/fs/file or upload-batch body in bytes
	// (413 past it); zero means no limit.
	MaxUpload int64

	// Authorizer, when set, is the auth policies: the first step of the
	// auth chain on every /v1 request, before the token check; see
	// internal/route (auth.go) and app/authz.
	Authorizer ports.Authorizer

	// Processes, when set, serves /v1/processes/*; see processapi.
	Processes *processes.Service

	// TokenHeader names a second header the bearer token is taken from
	// (before Authorization), for a router in front of the daemon that
	// drops Authorization, as agent-sandbox's sandbox-router does. Empty:
	// Authorization only.
	TokenHeader string
	// HealthPublic serves GET /v1/health without the auth chain (no token,
	// no policy), for liveness and readiness probes.
	HealthPublic bool
	// Reloads, when set, are the SIGHUP reload counters /metrics shows.
	Reloads *Reloads
	// ConnLimit, when set, counts HTTP/2 streams against the connection
	// limit its Listener enforces (--max-conns).
	ConnLimit *ConnLimit
	// OpenCode, when set, serves OpenCode's API at /opencode (see
	// opencode.go).
	OpenCode OpenCode

	// MetricsPublic serves GET /metrics without the bearer token even when
	// one is set, for scrapers that cannot send it; see metrics.go.
	MetricsPublic bool
	// MemoryLimits are the memory figures the daemon derived at start
	// (the box, its share, the budgets, the Go soft limit), shown on
	// /metrics as sandbox_agent_memory_limit_bytes{limit}.
	MemoryLimits []MemoryLimit

	env     *route.Env // built by fill from the fields above
	metrics *httpMetrics
}

// DefaultConfig holds the defaults New applies to zero fields; the
// daemon's flags read theirs from here.
func DefaultConfig() Config {
	return Config{
		MaxACPBody:         domain.DefaultMaxACPMessage,
		InflightBytes:      256 << 20,
		ReadIdleTimeout:    60 * time.Second,
		Heartbeat:          15 * time.Second,
		StreamWriteTimeout: 30 * time.Second,
	}
}

func (c *Config) fill() {
	d := DefaultConfig()
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.MaxACPBody = cmp.Or(max(c.MaxACPBody, 0), d.MaxACPBody)
	c.InflightBytes = cmp.Or(max(c.InflightBytes, 0), d.InflightBytes)
	c.ReadIdleTimeout = cmp.Or(max(c.ReadIdleTimeout, 0), d.ReadIdleTimeout)
	c.Heartbeat = cmp.Or(max(c.Heartbeat, 0), d.Heartbeat)
	c.StreamWriteTimeout = cmp.Or(max(c.StreamWriteTimeout, 0), d.StreamWriteTimeout)
	if c.metrics == nil {
		c.metrics = newHTTPMetrics()
	}
	if c.env == nil {
		c.env = &route.Env{
			Chain:              c.newChain(),
			Budget:             cmp.Or(c.Inflight, route.NewInflight(c.InflightBytes)),
			MaxACPBody:         c.MaxACPBody,
			Heartbeat:          c.Heartbeat,
			StreamWriteTimeout: c.StreamWriteTimeout,
			TokenHeader:        c.TokenHeader,
			AllowedOrigin:      c.CORS.allowed,
			CountAuth:          c.metrics.countAuth,
			Streams:            route.NewStreams(),
		}
	}
}

// New builds the daemon's HTTP handler.
func New(cfg Config) http.Handler {
	cfg.fill()
	if cfg.Reloads != nil {
		cfg.Reloads.attach(cfg.env.Streams)
	}
	hm := cfg.metrics
	hm.inflight = cfg.env.Budget
	mux := http.NewServeMux()
	register(mux, &cfg)
	mux.Handle("GET /metrics", metricsHandler(&cfg, hm))

	var h http.Handler = problemOnMiss(mux, &cfg)
	// Two credentials are refused inside CORS (an allowed origin can read
	// why) and behind the browser guard: its Host check comes first, and
	// every answer says nosniff.
	h = oneCredential(h, cfg.TokenHeader)
	h = cfg.CORS.wrap(h)
	h = guardBrowsers(h, &cfg)
	h = requestContext(h, cfg.Logger)
	h = hm.observe(h, mux)
	h = readIdle(h, cfg.ReadIdleTimeout)
	if cfg.ConnLimit != nil {
		h = cfg.ConnLimit.Streams(h)
	}
	return h
}

// HTTP2Config bounds what one HTTP/2 connection may make the daemon hold:
// 100 streams at once (a refused one is reset by the protocol; those
// served count against --max-conns, see ConnLimit), frames of 16 KiB, the
// protocol's own minimum, and 64 KiB of request body received and not yet
// read per connection and per stream (flow control): without it a client
// could park 1 MiB of unread body per connection, and read buffers of 1
// MiB frames, on each of --max-conns connections.
func HTTP2Config() *http.HTTP2Config {
	return &http.HTTP2Config{
		MaxConcurrentStreams:          MaxStreamsPerConn,
		MaxReadFrameSize:              16 << 10,
		MaxReceiveBufferPerConnection: 64 << 10,
		MaxReceiveBufferPerStream:     64 << 10,
	}
}

// MaxStreamsPerConn is the HTTP/2 streams one connection may have open.
const MaxStreamsPerConn = 100

// newChain assembles the auth chain from the parts the daemon has.
func (c *Config) newChain() *authz.Chain {
	chain := &authz.Chain{Policies: c.Authorizer, Tokens: c.Tokens}
	if chain.Tokens == nil {
		chain.Tokens = authz.NewTokens(c.Token)
	}
	if c.Instances != nil {
		chain.Instances = c.Instances
	}
	if c.Catalog != nil && c.Catalog.Agents != nil {
		chain.Agents = c.Catalog.Agents
	}
	if c.Files != nil {
		chain.FSHome = c.Files.Home
	}
	if c.Config != nil {
		chain.ConfigBase = c.Config.Base
	}
	return chain
}

// register adds every route to mux and returns the API (for its document).
func register(mux *http.ServeMux, cfg *Config) huma.API {
	api := NewAPI(mux, cfg.Version)
	// The chain's middleware, before any operation is registered.
	cfg.env.UseAuth(api, func(op *huma.Operation) bool {
		return cfg.HealthPublic && op.OperationID == opHealth
	})
	registerRoot(mux, api, cfg)
	registerACP(api, cfg)
	acpstd.Register(api, cfg.env, cfg.Instances)
	if cfg.Catalog != nil {
		registerAgents(api, cfg)
	}
	if cfg.Files != nil {
		registerFS(api, cfg)
	}
	if cfg.Config != nil {
		registerConfig(api, cfg)
	}
	if cfg.Processes != nil {
		processapi.Register(api, cfg.env, cfg.Processes)
	}
	if cfg.OpenCode != nil {
		mountOpenCode(mux, cfg)
	}
	if cfg.UI != nil {
		mux.Handle("GET /ui/", cfg.UI)
		mux.Handle("GET /ui", cfg.UI)
	}
	if cfg.Docs != nil {
		mux.Handle("GET /docs", cfg.Docs)
		mux.Handle("GET /docs/", cfg.Docs)
	}
	return api
}

// OpenAPI returns the document the daemon serves at /openapi.json.
func OpenAPI(version string) *huma.OpenAPI {
	cfg := everyRoute(Config{Version: version})
	cfg.fill()
	return register(http.NewServeMux(), &cfg).OpenAPI()
}

// everyRoute is cfg with every optional use case set, to values that are
// never called, so that all the daemon's routes are registered (the
// document, and the test that the served document is that one).
func everyRoute(cfg Config) Config {
	cfg.Catalog = &agents.Catalog{}
	cfg.Files, cfg.Config = &files.Files{}, &files.ConfigStore{}
	cfg.Processes = &processes.Service{}
	return cfg
}

// NewAPI creates the huma API on mux with the daemon's conventions: no
// $schema links in bodies, the document at /openapi.json and /openapi.yaml.
// huma's own /docs page is off: it loads its renderer from a CDN, and the
// daemon serves an embedded one instead (Config.Docs).
func NewAPI(mux *http.ServeMux, version string) huma.API {
	config := huma.DefaultConfig("Sandbox Agent", version)
	config.CreateHooks = nil // no $schema field or Link header on responses
	config.SchemasPath = ""
	config.DocsPath = ""
	config.OpenAPI.Info.Description = "Runs coding agents that speak ACP over stdio and exposes them over HTTP."
	config.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {Type: "http", Scheme: "bearer"},
	}
	return humago.New(mux, config)
}
