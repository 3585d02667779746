package httpapi

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// metricsDenyDeletes is a policy that denies DELETE of ACP instances.
type metricsDenyDeletes struct{}

func (metricsDenyDeletes) Authorize(_ context.Context, req domain.AuthRequest) (domain.Decision, error) {
	if req.OperationID == "delete_v1_acp" {
		return domain.Decision{Message: "no", By: "nodelete"}, nil
	}
	return domain.Decision{Verdict: domain.Pass}, nil
}

func metricsServer(t *testing.T, cfg Config) *httptest.Server {
	t.Helper()
	instances := acp.NewInstances(acp.DefaultOptions(), &porttest.FakeRunner{Agent: porttest.RPCAgent(nil)}, porttest.LaunchOnly("mock"))
	t.Cleanup(func() { _ = instances.Close(context.Background()) })
	cfg.Instances = instances
	srv := httptest.NewServer(New(cfg))
	t.Cleanup(srv.Close)
	return srv
}

// scrape fetches /metrics and returns its samples keyed by their full
// series name (labels included, as written), checking every line's syntax.
func scrape(t *testing.T, srv *httptest.Server, headers ...string) map[string]float64 {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL+"/metrics", nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("Content-Type %q", ct)
	}
	sampleLine := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"(,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")*\})?) (\S+)$`)
	typeLine := regexp.MustCompile(`^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram)$`)
	out := map[string]float64{}
	typed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		if m := typeLine.FindStringSubmatch(line); m != nil {
			typed[m[1]] = true
			out["# TYPE "+m[1]+" "+m[2]] = 1
			continue
		}
		if strings.HasPrefix(line, "# HELP ") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("malformed exposition line %q", line)
		}
		v, err := strconv.ParseFloat(m[len(m)-1], 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		family := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(strings.SplitN(m[1], "{", 2)[0], "_bucket"), "_sum"), "_count")
		if !typed[family] && !typed[strings.SplitN(m[1], "{", 2)[0]] {
			t.Fatalf("sample %q before its # TYPE line", line)
		}
		out[m[1]] = v
	}
	return out
}

func TestMetricsExposition(t *testing.T) {
	srv := metricsServer(t, Config{Authorizer: metricsDenyDeletes{}})

	before := scrape(t, srv)
	for _, want := range []string{
		"# TYPE sandbox_agent_instances gauge",
		"# TYPE sandbox_agent_agent_spawns_total counter",
		"# TYPE sandbox_agent_agent_exits_total counter",
		"# TYPE sandbox_agent_acp_frames_total counter",
		"# TYPE sandbox_agent_acp_bytes_total counter",
		"# TYPE sandbox_agent_sse_subscribers gauge",
		"# TYPE sandbox_agent_replay_buffer_bytes gauge",
		"# TYPE sandbox_agent_replay_budget_bytes gauge",
		"# TYPE sandbox_agent_acp_inflight_body_bytes gauge",
		"# TYPE sandbox_agent_replay_gaps_total counter",
		"# TYPE sandbox_agent_sse_slow_subscribers_dropped_total counter",
		"# TYPE sandbox_agent_acp_late_responses_total counter",
		"# TYPE sandbox_agent_http_request_duration_seconds histogram",
		"# TYPE sandbox_agent_auth_decisions_total counter",
		"# TYPE go_goroutines gauge",
		"# TYPE process_resident_memory_bytes gauge",
		`sandbox_agent_acp_frames_total{direction="to_agent"}`,
		`sandbox_agent_instances{state="running"}`,
	} {
		if _, ok := before[want]; !ok {
			t.Errorf("missing %s", want)
		}
	}
	if v := before[`sandbox_agent_acp_frames_total{direction="to_agent"}`]; v != 0 {
		t.Errorf("frames to agent before any POST = %v", v)
	}
	if before["go_goroutines"] < 1 || before["process_resident_memory_bytes"] < 1 {
		t.Errorf("process figures: goroutines %v, rss %v", before["go_goroutines"], before["process_resident_memory_bytes"])
	}

	msg := `{"jsonrpc":"2.0","id":1,"method":"initialize"}`
	if st, body := send(t, srv, "POST", "/v1/acp/one?agent=mock", msg, "Content-Type", "application/json"); st != 200 {
		t.Fatalf("POST: %d %s", st, body)
	}
	if st, _ := send(t, srv, "GET", "/v1/nope", ""); st != 404 {
		t.Fatalf("unknown route: %d", st)
	}
	if st, _ := send(t, srv, "DELETE", "/v1/acp/one", ""); st != 403 {
		t.Fatalf("denied DELETE: %d", st)
	}

	after := scrape(t, srv)
	for series, want := range map[string]float64{
		`sandbox_agent_acp_frames_total{direction="to_agent"}`:                                                                 1,
		`sandbox_agent_acp_bytes_total{direction="to_agent"}`:                                                                  float64(len(msg) + 1),
		`sandbox_agent_acp_frames_total{direction="from_agent"}`:                                                               1,
		`sandbox_agent_agent_spawns_total`:                                                                                     1,
		`sandbox_agent_instances{state="running"}`:                                                                             1,
		`sandbox_agent_http_request_duration_seconds_count{method="POST",route="/v1/acp/{server_id}",status="200"}`:            1,
		`sandbox_agent_http_request_duration_seconds_bucket{method="POST",route="/v1/acp/{server_id}",status="200",le="+Inf"}`: 1,
		`sandbox_agent_http_request_duration_seconds_count{method="GET",route="unmatched",status="404"}`:                       1,
		`sandbox_agent_http_request_duration_seconds_count{method="DELETE",route="/v1/acp/{server_id}",status="403"}`:          1,
		`sandbox_agent_http_request_duration_seconds_count{method="GET",route="/metrics",status="200"}`:                        1,
		`sandbox_agent_auth_decisions_total{action="acp.start",decision="open",by=""}`:                                         1,
		`sandbox_agent_auth_decisions_total{action="acp.stop",decision="deny",by="nodelete"}`:                                  1,
		`sandbox_agent_auth_decisions_total{action="metrics.read",decision="open",by=""}`:                                      2, // both scrapes
		`sandbox_agent_http_requests_in_flight`:                                                                                1, // this scrape
	} {
		if got, ok := after[series]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
}

// TestMetricsReloads: the reload counters show from the start (zeros for
// what can reload) and count each outcome.
func TestMetricsReloads(t *testing.T) {
	r := NewReloads("tokens", "policies")
	srv := metricsServer(t, Config{Reloads: r})
	got := scrape(t, srv)
	for _, series := range []string{
		`sandbox_agent_reloads_total{what="tokens",result="ok"}`, `sandbox_agent_reloads_total{what="tokens",result="failed"}`,
		`sandbox_agent_reloads_total{what="policies",result="ok"}`, `sandbox_agent_reloads_total{what="policies",result="failed"}`,
	} {
		if v, ok := got[series]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v)", series, v, ok)
		}
	}
	r.Count("tokens", nil)
	r.Count("tokens", io.ErrUnexpectedEOF)
	r.Count("tokens", io.ErrUnexpectedEOF)
	got = scrape(t, srv)
	if got[`sandbox_agent_reloads_total{what="tokens",result="ok"}`] != 1 || got[`sandbox_agent_reloads_total{what="tokens",result="failed"}`] != 2 {
		t.Errorf("after three reloads: %v", got)
	}
	if _, ok := scrape(t, metricsServer(t, Config{}))[`# TYPE sandbox_agent_reloads_total counter`]; ok {
		t.Error("a daemon without reloads shows the family")
	}
}

// The memory figures the daemon derived at start are gauges, one series
// per figure.
func TestMetricsMemoryLimits(t *testing.T) {
	srv := metricsServer(t, Config{MemoryLimits: []MemoryLimit{{Limit: "box", Bytes: 512 << 20}, {Limit: "replay_total", Bytes: 48 << 20}}})
	got := scrape(t, srv)
	if got[`sandbox_agent_memory_limit_bytes{limit="box"}`] != 512<<20 || got[`sandbox_agent_memory_limit_bytes{limit="replay_total"}`] != 48<<20 {
		t.Errorf("memory limits: %v", got)
	}
	for k := range scrape(t, metricsServer(t, Config{})) {
		if strings.HasPrefix(k, "sandbox_agent_memory_limit_bytes") {
			t.Errorf("a daemon without memory limits shows %s", k)
		}
	}
}

func TestMetricsToken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		public bool
		auth   string
		want   int
	}{
		{"no token sent", false, "", 401},
		{"wrong token", false, "Bearer nope", 401},
		{"token", false, "Bearer tok", 200},
		{"public", true, "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := metricsServer(t, Config{Token: "tok", MetricsPublic: tc.public})
			req, _ := http.NewRequest("GET", srv.URL+"/metrics", nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
			if tc.want == 401 && resp.Header.Get("WWW-Authenticate") != "Bearer" {
				t.Fatalf("WWW-Authenticate %q", resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
}

// A stream reader that stops reading is cut after the stream write timeout
// and counted; the agent is never blocked by it.
func TestMetricsSlowSubscriberDropped(t *testing.T) {
	srv := metricsServer(t, Config{StreamWriteTimeout: 200 * time.Millisecond})
	if st, body := send(t, srv, "POST", "/v1/acp/s?agent=mock", `{"jsonrpc":"2.0","id":1,"method":"initialize"}`, "Content-Type", "application/json"); st != 200 {
		t.Fatalf("POST: %d %s", st, body)
	}
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	if _, err := io.WriteString(conn, "GET /v1/acp/s HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(status, "200") {
		t.Fatalf("stream status %q, %v", status, err)
	}
	// 128 MiB of events, far more than both socket buffers hold; the reader
	// reads nothing more.
	if st, body := send(t, srv, "POST", "/v1/acp/s", `{"jsonrpc":"2.0","method":"burst","params":{"n":2048,"size":65536}}`, "Content-Type", "application/json"); st != 202 {
		t.Fatalf("burst: %d %s", st, body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := scrape(t, srv)
		if m["sandbox_agent_sse_slow_subscribers_dropped_total"] == 1 && m["sandbox_agent_sse_subscribers"] == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("slow reader not dropped: dropped %v, subscribers %v",
				m["sandbox_agent_sse_slow_subscribers_dropped_total"], m["sandbox_agent_sse_subscribers"])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
