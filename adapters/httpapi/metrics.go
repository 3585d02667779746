package httpapi

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi/internal/route"
	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// The /metrics route renders the Prometheus text exposition format (0.0.4)
// by hand: a dozen families do not justify client_golang and its
// dependencies. The ACP counters come from acp.Instances.Metrics; this file
// adds what only the HTTP side sees (latency by route and status, in-flight
// requests, slow stream readers dropped, policy decisions) and the process
// figures (goroutines, RSS, open files).

// latencyBuckets are the upper bounds, in seconds, of the request latency
// histogram: sub-millisecond ACP round trips up to two-minute timeouts.
var latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// httpMetrics is what the HTTP adapter counts itself. Safe for concurrent
// use; the hot path takes a read lock and does atomic adds.
type httpMetrics struct {
	inflight    *route.Inflight // the ACP body budget, for its gauge
	start       time.Time
	inFlight    atomic.Int64
	slowDropped atomic.Uint64

	mu      sync.RWMutex
	latency map[routeKey]*histogram

	authMu sync.Mutex
	auth   map[authMetricKey]uint64
}

type routeKey struct{ method, route, status string }

// authMetricKey labels an auth decision: never the principal (unbounded,
// and who someone is does not belong in metrics), only the action, the
// outcome and who decided (a policy's name, "token" or "").
type authMetricKey struct{ action, decision, by string }

func newHTTPMetrics() *httpMetrics {
	return &httpMetrics{start: time.Now(), latency: map[routeKey]*histogram{}, auth: map[authMetricKey]uint64{}}
}

// histogram is a fixed-bucket latency histogram with atomic counters.
type histogram struct {
	buckets []atomic.Uint64 // non-cumulative; the last one is +Inf
	sumNs   atomic.Int64
}

func (h *histogram) observe(d time.Duration) {
	s := d.Seconds()
	i := sort.SearchFloat64s(latencyBuckets, s) // first bound >= s
	h.buckets[i].Add(1)
	h.sumNs.Add(int64(d))
}

func (m *httpMetrics) observeRequest(k routeKey, d time.Duration) {
	m.mu.RLock()
	h := m.latency[k]
	m.mu.RUnlock()
	if h == nil {
		m.mu.Lock()
		if h = m.latency[k]; h == nil {
			h = &histogram{buckets: make([]atomic.Uint64, len(latencyBuckets)+1)}
			m.latency[k] = h
		}
		m.mu.Unlock()
	}
	h.observe(d)
}

// observe times every request until its status is written (for a stream:
// until it opens, so hour-long streams do not swamp the histogram) and
// labels it with the ServeMux pattern that matched, never the raw path, so
// the number of series stays bounded.
func (m *httpMetrics) observe(next http.Handler, mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ow := &observedWriter{ResponseWriter: w, m: m, start: time.Now()}
		_, pattern := mux.Handler(r)
		ow.key.method = methodLabel(r.Method)
		ow.key.route = routeLabel(pattern)
		m.inFlight.Add(1)
		defer func() {
			m.inFlight.Add(-1)
			ow.record(http.StatusOK) // a handler that wrote nothing answered 200
		}()
		next.ServeHTTP(ow, r)
	})
}

func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

func routeLabel(pattern string) string {
	if pattern == "" {
		return "unmatched"
	}
	if _, path, ok := strings.Cut(pattern, " "); ok {
		return path
	}
	return pattern
}

// observedWriter records the status and latency of a response and notices
// stream writes that hit their deadline (a reader too slow to keep up).
// It keeps the underlying writer's capabilities: Flush through FlushError,
// sendfile through ReadFrom, deadlines and hijacking through Unwrap.
type observedWriter struct {
	http.ResponseWriter
	m        *httpMetrics
	start    time.Time
	key      routeKey
	recorded bool
	slow     bool
}

func (w *observedWriter) record(status int) {
	if w.recorded {
		return
	}
	w.recorded = true
	w.key.status = strconv.Itoa(status)
	w.m.observeRequest(w.key, time.Since(w.start))
}

func (w *observedWriter) failed(err error) {
	if err != nil && !w.slow && errors.Is(err, os.ErrDeadlineExceeded) {
		// Only SSE streams set write deadlines (the server has none), so
		// this is a subscriber dropped for not reading.
		w.slow = true
		w.m.slowDropped.Add(1)
	}
}

func (w *observedWriter) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		w.record(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *observedWriter) Write(b []byte) (int, error) {
	w.record(http.StatusOK)
	n, err := w.ResponseWriter.Write(b)
	w.failed(err)
	return n, err
}

func (w *observedWriter) FlushError() error {
	w.record(http.StatusOK)
	err := http.NewResponseController(w.ResponseWriter).Flush()
	w.failed(err)
	return err
}

func (w *observedWriter) ReadFrom(r io.Reader) (int64, error) {
	w.record(http.StatusOK)
	var n int64
	var err error
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(struct{ io.Writer }{w.ResponseWriter}, r)
	}
	w.failed(err)
	return n, err
}

func (w *observedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// countAuth counts one decision of the auth chain.
func (m *httpMetrics) countAuth(action domain.Action, decision, by string) {
	m.authMu.Lock()
	m.auth[authMetricKey{string(action), decision, by}]++
	m.authMu.Unlock()
}

// metricsHandler serves GET /metrics. It goes through the auth chain as
// the metrics.read action (policies, then the token check) unless
// cfg.MetricsPublic says scrapers may read it without one (the figures
// contain no ids, paths, payloads or principals).
func metricsHandler(cfg *Config, m *httpMetrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !cfg.MetricsPublic {
			req := cfg.env.AuthRequest(r, http.MethodGet, "/metrics", "get_metrics")
			cfg.env.Chain.Plain(&req, domain.ActionMetricsRead)
			if ctx, err := cfg.env.Authorize(r.Context(), req); err != nil {
				route.WriteAuthProblem(w, ctx, err)
				return
			}
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		bw := bufio.NewWriterSize(w, 16<<10)
		var snap acp.MetricsSnapshot
		if cfg.Instances != nil {
			snap = cfg.Instances.Metrics()
		}
		writeMetrics(bw, snap, m)
		writeMemoryLimits(expo{bw}, cfg.MemoryLimits)
		if cfg.Processes != nil {
			writeProcessMetrics(expo{bw}, cfg.Processes.Metrics())
		}
		cfg.Reloads.write(expo{bw})
		_ = bw.Flush()
	})
}

// MemoryLimit is one memory figure of the daemon, in bytes, labelled by
// what it is ("box", "share", "replay_total", ...).
type MemoryLimit struct {
	Limit string
	Bytes int64
}

func writeMemoryLimits(e expo, limits []MemoryLimit) {
	if len(limits) == 0 {
		return
	}
	const name = "sandbox_agent_memory_limit_bytes"
	e.family(name, "gauge", "The memory the daemon may use (box: its cgroup limit, else physical memory), its share of it, the budgets derived from it or given as flags, and the Go soft memory limit in force.")
	for _, l := range limits {
		e.sample(name, i64(l.Bytes), "limit", l.Limit)
	}
}

// expo writes the text exposition format.
type expo struct{ w *bufio.Writer }

func (e expo) family(name, typ, help string) {
	e.w.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n")
}

// sample writes one line; labels are name, value pairs.
func (e expo) sample(name string, value string, labels ...string) {
	e.w.WriteString(name)
	if len(labels) > 0 {
		e.w.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				e.w.WriteByte(',')
			}
			e.w.WriteString(labels[i] + `="` + escapeLabel(labels[i+1]) + `"`)
		}
		e.w.WriteByte('}')
	}
	e.w.WriteString(" " + value + "\n")
}

func (e expo) one(name, typ, help, value string) {
	e.family(name, typ, help)
	e.sample(name, value)
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }

func u64(v uint64) string { return strconv.FormatUint(v, 10) }
func i64(v int64) string  { return strconv.FormatInt(v, 10) }
func f64(v float64) string {
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func writeMetrics(w *bufio.Writer, s acp.MetricsSnapshot, m *httpMetrics) {
	e := expo{w}
	const p = "sandbox_agent_"

	e.family(p+"instances", "gauge", "ACP server instances by agent process state.")
	e.sample(p+"instances", i64(int64(s.Running)), "state", "running")
	e.sample(p+"instances", i64(int64(s.Exited)), "state", "exited")
	e.one(p+"agent_spawns_total", "counter", "Agent processes started.", u64(s.Spawns))
	e.one(p+"agent_spawn_failures_total", "counter", "Agent processes that failed to start.", u64(s.SpawnFailures))
	e.family(p+"agent_exits_total", "counter", "Agent processes that ended, by exit code (or signal when code is empty).")
	for _, x := range s.Exits {
		e.sample(p+"agent_exits_total", u64(x.Count), "code", x.Code, "signal", x.Signal)
	}
	e.family(p+"acp_frames_total", "counter", "JSON-RPC lines on agent pipes, by direction.")
	e.sample(p+"acp_frames_total", u64(s.FramesToAgent), "direction", "to_agent")
	e.sample(p+"acp_frames_total", u64(s.FramesFromAgent), "direction", "from_agent")
	e.family(p+"acp_bytes_total", "counter", "Bytes on agent pipes, by direction.")
	e.sample(p+"acp_bytes_total", u64(s.BytesToAgent), "direction", "to_agent")
	e.sample(p+"acp_bytes_total", u64(s.BytesFromAgent), "direction", "from_agent")
	e.one(p+"acp_pending_requests", "gauge", "Requests waiting for an agent response.", i64(int64(s.PendingRequests)))
	e.one(p+"acp_late_responses_total", "counter", "Agent responses that arrived after their POST timed out or its client left.", u64(s.LateResponses))
	e.one(p+"acp_stdin_write_failures_total", "counter", "Writes to an agent's stdin that failed or gave up (agent not reading).", u64(s.StdinWriteFailures))
	e.one(p+"sse_subscribers", "gauge", "Open event streams.", i64(int64(s.Subscribers)))
	e.one(p+"replay_buffer_bytes", "gauge", "Bytes held in replay buffers, per-event overhead included.", i64(s.BufferedBytes))
	e.one(p+"replay_buffer_events", "gauge", "Events held in replay buffers.", i64(int64(s.BufferedEvents)))
	e.one(p+"replay_budget_bytes", "gauge", "Bytes charged to --replay-total: replay buffers plus agent lines being read.", i64(s.ReplayBudgetBytes))
	e.one(p+"acp_inflight_body_bytes", "gauge", "Request body and WebSocket message bytes charged to --inflight-bytes (held until handled).", i64(m.inflightBytes()))
	e.one(p+"replay_gaps_total", "counter", "Replay gaps sent: a reader's position had been evicted from the buffer.", u64(s.ReplayGaps))
	e.one(p+"sse_slow_subscribers_dropped_total", "counter", "Event streams cut because a write made no progress within the stream write timeout.", u64(m.slowDropped.Load()))

	e.family(p+"auth_decisions_total", "counter", "Auth chain decisions by action, decision (grant, identified, token, open, deny, error) and who decided (a policy's name, token, or empty).")
	m.authMu.Lock()
	aks := make([]authMetricKey, 0, len(m.auth))
	for k := range m.auth {
		aks = append(aks, k)
	}
	sort.Slice(aks, func(i, j int) bool {
		a, b := aks[i], aks[j]
		if a.action != b.action {
			return a.action < b.action
		}
		if a.decision != b.decision {
			return a.decision < b.decision
		}
		return a.by < b.by
	})
	for _, k := range aks {
		e.sample(p+"auth_decisions_total", u64(m.auth[k]), "action", k.action, "decision", k.decision, "by", k.by)
	}
	m.authMu.Unlock()

	e.one(p+"http_requests_in_flight", "gauge", "HTTP requests being served, open streams included.", i64(m.inFlight.Load()))
	writeLatency(e, p+"http_request_duration_seconds", m)

	e.one("go_goroutines", "gauge", "Goroutines that currently exist.", i64(int64(runtime.NumGoroutine())))
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() == metrics.KindUint64 {
		e.one("go_heap_objects_bytes", "gauge", "Bytes of live and not yet swept heap objects.", u64(sample[0].Value.Uint64()))
	}
	if rss, ok := residentBytes(); ok {
		e.one("process_resident_memory_bytes", "gauge", "Resident set size of the daemon in bytes.", i64(rss))
	}
	if n, ok := openFiles(); ok {
		e.one("process_open_fds", "gauge", "Open file descriptors of the daemon.", i64(int64(n)))
	}
	e.one("process_start_time_seconds", "gauge", "Start time of the daemon since the Unix epoch, in seconds.", f64(float64(m.start.UnixNano())/1e9))
}

func writeLatency(e expo, name string, m *httpMetrics) {
	e.family(name, "histogram", "HTTP request latency until the response status was written (streams: until they opened), by method, route pattern and status.")
	m.mu.RLock()
	keys := make([]routeKey, 0, len(m.latency))
	for k := range m.latency {
		keys = append(keys, k)
	}
	hs := make([]*histogram, 0, len(keys))
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.route != b.route {
			return a.route < b.route
		}
		if a.method != b.method {
			return a.method < b.method
		}
		return a.status < b.status
	})
	for _, k := range keys {
		hs = append(hs, m.latency[k])
	}
	m.mu.RUnlock()
	for i, k := range keys {
		h := hs[i]
		var cum uint64
		for b, bound := range latencyBuckets {
			cum += h.buckets[b].Load()
			e.sample(name+"_bucket", u64(cum), "method", k.method, "route", k.route, "status", k.status, "le", f64(bound))
		}
		cum += h.buckets[len(latencyBuckets)].Load()
		e.sample(name+"_bucket", u64(cum), "method", k.method, "route", k.route, "status", k.status, "le", "+Inf")
		e.sample(name+"_sum", f64(time.Duration(h.sumNs.Load()).Seconds()), "method", k.method, "route", k.route, "status", k.status)
		e.sample(name+"_count", u64(cum), "method", k.method, "route", k.route, "status", k.status)
	}
}

// residentBytes reads the daemon's RSS from /proc (Linux only).
func residentBytes() (int64, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * int64(os.Getpagesize()), true
}

// openFiles counts the daemon's open descriptors (Linux only), minus the
// one used to list them.
func openFiles() (int, bool) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, false
	}
	return len(ents) - 1, true
}

func (m *httpMetrics) inflightBytes() int64 {
	if m.inflight == nil {
		return 0
	}
	return m.inflight.Used()
}
