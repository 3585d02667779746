package e2e

// The fault suite, budgets part (issue 20): every byte a client can make
// the daemon hold is charged before it is held (WebSocket messages,
// process input, process logs), HTTP/2 streams count against the
// connection limit, and a POST runs on what the auth chain judged. Each
// memory test asserts the daemon's peak RSS (VmHWM) stays under the
// memory bound of docs/limits.md for the flags it runs with.

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// One h2c connection, 240 PUT streams whose bodies stall, opened at once
// without regard for the server's stream limit (issue 20: all 240 in
// flight, 253 descriptors; each PUT opens a temporary file). With
// --max-conns 5 the connection and 4 streams are served; every other
// stream is answered 503 at once (it opens no file) or refused by the
// protocol's own stream limit (100 a connection); the 4 are cut by
// --read-idle-timeout as an HTTP/1.1 body would be (408); the daemon's
// descriptors stay bounded throughout.
func TestFaultH2Streams(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: []string{"--max-conns", "5", "--read-idle-timeout", "2s", "--log-level", "info"}})
	pid := d.Cmd.Process.Pid
	addr := strings.TrimPrefix(d.URL, "http://")
	fds0 := openFDs(t, pid)
	c := dialH2(t, addr)
	const streams = 240
	start := time.Now()
	for i := range streams {
		c.request(uint32(2*i+1), "PUT", addr, "/v1/fs/file?path=h2-"+itoa(i), []byte("x"), false)
	}
	maxFDs := fds0
	answered := func(m map[uint32]h2Stream) bool {
		maxFDs = max(maxFDs, openFDs(t, pid))
		n := 0
		for _, s := range m {
			if s.ended || s.reset != 0 {
				n++
			}
		}
		return n == streams
	}
	if !c.wait(30*time.Second, answered) {
		t.Fatalf("not every stream was answered: %v", summarize(c.snapshot()))
	}
	sum := summarize(c.snapshot())
	t.Logf("answers after %v: %v; descriptors %d before, at most %d during", time.Since(start).Round(time.Millisecond), sum, fds0, maxFDs)
	if sum["408"] > 4 || sum["408"] == 0 || sum["408"]+sum["503"]+sum["refused"] != streams {
		t.Fatalf("answers %v, want at most 4 served (408 once stalled) and the rest 503 or refused", sum)
	}
	if maxFDs > fds0+8 {
		t.Fatalf("descriptors grew from %d to %d under %d stalled streams", fds0, maxFDs, streams)
	}
	// Nothing is held: a stream on the same connection is served.
	c.request(2*streams+1, "GET", addr, "/v1/health", nil, true)
	if !c.wait(10*time.Second, func(m map[uint32]h2Stream) bool { return m[2*streams+1].ended }) {
		t.Fatal("health after the attack: no answer")
	}
	if s := c.snapshot()[2*streams+1]; !strings.Contains(string(s.body), `"ok"`) {
		t.Fatalf("health after the attack: %q", s.body)
	}
	logPeakRSS(t, d, "after 240 stalled h2c streams")
}

// summarize counts streams by outcome: the problem status, "refused" for
// a stream reset before any answer, "other".
func summarize(m map[uint32]h2Stream) map[string]int {
	out := map[string]int{}
	for _, s := range m {
		switch {
		case s.status() != 0:
			out[itoa(s.status())]++
		case s.reset != 0 && !s.headers:
			out["refused"]++
		case !s.ended:
			out["open"]++
		default:
			out["other"]++
		}
	}
	return out
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

// issueSizes reports whether the memory rows run at the sizes of issue 20
// and the daemon's defaults (SANDBOX_AGENT_E2E_ISSUE_SIZES=1; gigabytes of
// loopback traffic, for the closing note's figures), rather than scaled
// down against small budgets (the fault suite).
func issueSizes() bool { return os.Getenv("SANDBOX_AGENT_E2E_ISSUE_SIZES") == "1" }

// budgets are the flags a memory row runs with, and the bound of
// docs/limits.md for them ("Memory bound"): the soft memory limit the daemon derives, 64
// MiB + --inflight-bytes + --replay-total + --process-log-total + 1 MiB per
// --max-instances + 16 KiB per --max-conns.
type budgets struct {
	inflight, replay, processLogs int64
	instances, conns              int
}

// defaults are the daemon's defaults.
var defaultBudgets = budgets{inflight: 256 << 20, replay: 512 << 20, processLogs: 256 << 20, instances: 100, conns: 4096}

// small are the scaled-down rows' budgets.
var smallBudgets = budgets{inflight: 16 << 20, replay: 16 << 20, processLogs: 16 << 20, instances: 40, conns: 300}

func (b budgets) args() []string {
	return []string{
		"--inflight-bytes", strconv.FormatInt(b.inflight, 10), "--replay-total", strconv.FormatInt(b.replay, 10),
		"--process-log-total", strconv.FormatInt(b.processLogs, 10),
		"--max-instances", strconv.Itoa(b.instances), "--max-conns", strconv.Itoa(b.conns),
	}
}

func (b budgets) boundKiB() int64 {
	return (64<<20 + b.inflight + b.replay + b.processLogs + int64(b.instances)<<20 + int64(b.conns)*16<<10) >> 10
}

// rowBudgets picks the budgets of a memory row.
func rowBudgets() budgets {
	if issueSizes() {
		return defaultBudgets
	}
	return smallBudgets
}

// assertUnderBound fails when the daemon's peak RSS passed the bound.
func assertUnderBound(t *testing.T, d *harness.Daemon, b budgets, what string) {
	t.Helper()
	peak := logPeakRSS(t, d, what)
	t.Logf("bound for these flags: %.1f MiB", float64(b.boundKiB())/1024)
	if peak > b.boundKiB() {
		t.Fatalf("peak RSS %.1f MiB is past the memory bound %.1f MiB", float64(peak)/1024, float64(b.boundKiB())/1024)
	}
}

// wsOutcome reads what a socket got after its message: a response with
// id 2 ("answered"), a close code, or an error.
func wsOutcome(c *wsClient, timeout time.Duration) string {
	for {
		_, p, err := c.read(timeout)
		var ce *errClosed
		switch {
		case errors.As(err, &ce):
			return strconv.Itoa(ce.code)
		case err != nil:
			return "dropped"
		case strings.Contains(string(p), `"id":2`):
			return "answered"
		}
	}
}

// Issue 20, row 2: WebSocket clients on /acp/mock each send initialize and
// one message of tens of megabytes. Each message is charged to
// --inflight-bytes as it arrives (never buffered whole first): those that
// find the budget spent are closed with 1013 (try again later), one past
// --max-acp-body with 1009, the rest reach the agent; the daemon stays
// under its memory bound, and every charge is given back.
func TestFaultWebSocketMessagesCharged(t *testing.T) {
	t.Parallel()
	b := rowBudgets()
	clients, size, maxBody := 20, 6<<20, int64(8<<20)
	if issueSizes() {
		clients, size, maxBody = 80, 30_000_000, 32<<20
	}
	d := harness.Start(t, harness.Options{Args: append(b.args(), "--max-acp-body", strconv.FormatInt(maxBody, 10), "--log-level", "info")})
	conns := make([]*wsClient, clients)
	for i := range conns {
		conns[i], _ = wsConnectTo(t, d, "mock")
	}
	outcomes := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.sendLarge(`{"jsonrpc":"2.0","id":2,"method":"x/big","params":{"pad":"`, 'x', size, `"}}`)
			out := wsOutcome(c, 60*time.Second)
			if err != nil && out == "dropped" {
				out = "write failed"
			}
			mu.Lock()
			outcomes[out]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	// One past the cap, once the budget has room again.
	over, _ := wsConnectTo(t, d, "mock")
	over.sendLarge(`{"jsonrpc":"2.0","id":2,"method":"x/big","params":{"pad":"`, 'x', int(maxBody)+1, `"}}`)
	overOut := wsOutcome(over, 60*time.Second)
	t.Logf("%d clients × %d bytes: %v; the one past --max-acp-body: %s", clients, size, outcomes, overOut)
	if overOut != "1009" {
		t.Errorf("a message past --max-acp-body got %q, want close 1009", overOut)
	}
	if outcomes["1013"] == 0 || outcomes["answered"] == 0 || outcomes["1013"]+outcomes["answered"] != clients {
		t.Errorf("outcomes %v: want some refused with 1013 and the rest answered", outcomes)
	}
	assertUnderBound(t, d, b, "under WebSocket messages past the in-flight budget")
	harness.Eventually(t, 10*time.Second, "in-flight charge given back", func() bool {
		return d.Metrics()["sandbox_agent_acp_inflight_body_bytes"] == 0
	})
}

// Issue 20, row 3 (terminal half): terminal sockets each send one input
// frame of megabytes with maxInputBytesPerRequest at its 64 KiB default.
// A frame is read against the input limit as JSON may carry it (6 × 64 KiB
// + 4 KiB) and charged as it arrives: past it the socket is closed with
// 1009 after at most that much was read, never buffered whole.
func TestFaultTerminalInputCharged(t *testing.T) {
	t.Parallel()
	b := rowBudgets()
	clients, size := 30, 2<<20
	if issueSizes() {
		clients, size = 100, 20_000_000
	}
	d := harness.Start(t, harness.Options{Args: append(b.args(), "--log-level", "info")})
	var info struct{ ID string }
	if st, body := d.JSONDo("POST", "/v1/processes", map[string]any{"command": "cat", "tty": true}, &info); st != 200 {
		t.Fatalf("create: %d %s", st, body)
	}
	url := "ws" + strings.TrimPrefix(d.URL, "http") + "/v1/processes/" + info.ID + "/terminal/ws"
	outcomes := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range clients {
		c, err := dialWS(t, url)
		if err != nil || c.Resp.StatusCode != 101 {
			t.Fatalf("terminal upgrade: %v", err)
		}
		if got := c.readText(t, 10*time.Second); !strings.Contains(got, `"ready"`) {
			t.Fatalf("terminal: %s", got)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.sendLarge(`{"type":"input","data":"`, 'a', size, `"}`)
			out := ""
			for out == "" {
				_, _, err := c.read(30 * time.Second)
				var ce *errClosed
				switch {
				case errors.As(err, &ce):
					out = strconv.Itoa(ce.code)
				case err != nil:
					out = "dropped"
				}
			}
			mu.Lock()
			outcomes[out]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("%d terminal sockets × %d bytes: %v", clients, size, outcomes)
	if outcomes["1009"] != clients {
		t.Errorf("outcomes %v, want every socket closed with 1009", outcomes)
	}
	// Input within the limit still works.
	c, err := dialWS(t, url)
	if err != nil {
		t.Fatal(err)
	}
	c.readText(t, 10*time.Second)
	c.send(t, `{"type":"input","data":"hello-terminal\n"}`)
	harness.Eventually(t, 10*time.Second, "the echo of small input", func() bool {
		_, p, err := c.read(5 * time.Second)
		return err == nil && strings.Contains(string(p), "hello-terminal")
	})
	assertUnderBound(t, d, b, "under oversized terminal frames")
}

// Issue 20, row 3 (HTTP half): input POSTs of megabytes to a process with
// maxInputBytesPerRequest at 64 KiB. A body announcing more than the limit
// allows is refused on its Content-Length (413, nothing read); one without
// a length is cut where it passes it; neither is read whole first.
func TestFaultProcessInputCharged(t *testing.T) {
	t.Parallel()
	b := rowBudgets()
	clients, size := 20, 5<<20
	if issueSizes() {
		clients, size = 60, 20_000_000
	}
	d := harness.Start(t, harness.Options{Args: append(b.args(), "--log-level", "info")})
	var info struct{ ID string }
	if st, body := d.JSONDo("POST", "/v1/processes", map[string]any{"command": "cat", "interactive": true}, &info); st != 200 {
		t.Fatalf("create: %d %s", st, body)
	}
	statuses := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := io.MultiReader(strings.NewReader(`{"data":"`), io.LimitReader(repeatReader('Q'), int64(size)), strings.NewReader(`"}`))
			req, _ := http.NewRequest("POST", d.URL+"/v1/processes/"+info.ID+"/input", body)
			req.Header.Set("Content-Type", "application/json")
			if i%2 == 0 {
				req.ContentLength = int64(size + len(`{"data":""}`))
			}
			resp, err := http.DefaultClient.Do(req)
			st := "error"
			if err == nil {
				st = strconv.Itoa(resp.StatusCode)
				resp.Body.Close()
			}
			mu.Lock()
			statuses[st]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("%d input POSTs × %d bytes: %v", clients, size, statuses)
	if statuses["413"] == 0 || statuses["413"]+statuses["error"] != clients {
		t.Errorf("statuses %v, want every one refused with 413 (or cut off)", statuses)
	}
	if st, body := d.JSONDo("POST", "/v1/processes/"+info.ID+"/input", map[string]any{"data": "aGk="}, nil); st != 200 {
		t.Fatalf("small input: %d %s", st, body)
	}
	assertUnderBound(t, d, b, "under oversized process input")
}

// repeatReader is an endless stream of one byte.
type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// Issue 20, row 5: the process config raised to its ceilings, then many
// processes each writing tens of megabytes. Every log draws on
// --process-log-total, which the config route cannot raise: the largest
// logs lose their oldest entries (readers get a gap) and the daemon stays
// under its bound. Values past a --process-max-* flag are refused (400).
func TestFaultProcessLogsBudget(t *testing.T) {
	t.Parallel()
	b := rowBudgets()
	procs, size := 8, 10_000_000
	if issueSizes() {
		procs, size = 24, 70_000_000
	}
	d := harness.Start(t, harness.Options{Args: append(b.args(), "--log-level", "info")})
	cfg := map[string]any{"maxConcurrentProcesses": 1024, "defaultRunTimeoutMs": 30000, "maxRunTimeoutMs": 300000,
		"maxOutputBytes": 1048576, "maxLogBytesPerProcess": 67108864, "maxInputBytesPerRequest": 65536}
	if st, body := d.JSONDo("POST", "/v1/processes/config", cfg, nil); st != 200 {
		t.Fatalf("config at the ceilings: %d %s", st, body)
	}
	cfg["maxLogBytesPerProcess"] = 67108864 + 1
	st, body := d.JSONDo("POST", "/v1/processes/config", cfg, nil)
	if p := parseProblem(t, body); st != 400 || !strings.Contains(p.Detail, "--process-max-log-bytes") {
		t.Fatalf("config past the ceiling: %d %s", st, body)
	}
	ids := make([]string, procs)
	for i := range ids {
		var info struct{ ID string }
		if st, body := d.JSONDo("POST", "/v1/processes", map[string]any{"command": "head", "args": []string{"-c", strconv.Itoa(size), "/dev/zero"}}, &info); st != 200 {
			t.Fatalf("create: %d %s", st, body)
		}
		ids[i] = info.ID
	}
	for _, id := range ids {
		harness.Eventually(t, 60*time.Second, "process "+id+" exits", func() bool {
			var info struct{ Status string }
			d.JSONDo("GET", "/v1/processes/"+id, nil, &info)
			return info.Status == "exited"
		})
	}
	held := d.Metrics()["sandbox_agent_process_log_budget_bytes"]
	t.Logf("%d processes × %d bytes of output: logs hold %.1f MiB (--process-log-total %d MiB)", procs, size, held/(1<<20), b.processLogs>>20)
	if held > float64(b.processLogs) {
		t.Errorf("logs hold %v bytes, past --process-log-total", held)
	}
	var logs struct {
		Gap *struct{ LastSequence, OldestAvailable uint64 }
	}
	if st, body := d.JSONDo("GET", "/v1/processes/"+ids[0]+"/logs?since=0", nil, &logs); st != 200 || logs.Gap == nil {
		t.Errorf("a reader from the start got no gap: %d %.200s", st, body)
	}
	assertUnderBound(t, d, b, "under process output past --process-log-total")

	// The ceilings are flags: a daemon started with a smaller one refuses
	// what this one took.
	d2 := harness.Start(t, harness.Options{Args: []string{"--process-max-log-bytes", "8388608", "--process-max-concurrent", "16"}})
	cfg["maxLogBytesPerProcess"] = 67108864
	if st, body := d2.JSONDo("POST", "/v1/processes/config", cfg, nil); st != 400 || !strings.Contains(string(body), "maxConcurrentProcesses must be at most 16") {
		t.Fatalf("config past --process-max-concurrent: %d %s", st, body)
	}
	cfg["maxConcurrentProcesses"] = 16
	if st, body := d2.JSONDo("POST", "/v1/processes/config", cfg, nil); st != 400 || !strings.Contains(string(body), "maxLogBytesPerProcess must be at most 8388608") {
		t.Fatalf("config past --process-max-log-bytes: %d %s", st, body)
	}
}

// Issue 20, the race of the judged agent, hammered with the agenttokens
// example policy: alice may use mock only. She POSTs without ?agent to ids
// that do not exist yet, in a loop, while the admin starts the test agent
// under each of them. Judged as acp.start (no agent named), her POST is
// granted; it must then start an instance of its own (it cannot: no
// agent, 400) or fail, and never reach the admin's test agent (1 round in
// 25 did). On /acp/{agent}, a connection id of the admin's test
// connection reached through alice's /acp/mock is 404, never delivered.
func TestFaultJudgedAgentRace(t *testing.T) {
	t.Parallel()
	d := policyDaemon(t, "agenttokens", `{"tokens": {"alice": {"label": "alice", "agents": ["mock"]}}}`,
		append(withAdminFile(t), harness.WithTestAgent(t, "--log-level", "info")...)...)
	post := func(token, path, body string, headers ...string) (int, string) {
		h := append([]string{"Content-Type", "application/json", "Authorization", "Bearer " + token}, headers...)
		st, _, b := d.Do("POST", path, []byte(body), h...)
		return st, string(b)
	}
	rounds := 60
	statuses := map[int]int{}
	for r := range rounds {
		id := "race-" + itoa(r)
		stop := make(chan struct{})
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ; n++ {
					st, b := post("alice", "/v1/acp/"+id, `{"jsonrpc":"2.0","id":7,"method":"probe"}`)
					mu.Lock()
					statuses[st]++
					mu.Unlock()
					if st == 200 || strings.Contains(b, "echoedMethod") {
						t.Errorf("round %d: alice's POST reached the admin's test agent: %d %s", r, st, b)
					}
					select {
					case <-stop:
						if n > 2 {
							return
						}
					default:
					}
				}
			}()
		}
		if st, b := post("admin-tok", "/v1/acp/"+id+"?agent=test", policyInit); st != 200 {
			t.Fatalf("round %d: admin start: %d %s", r, st, b)
		}
		close(stop)
		wg.Wait()
		d.Do("DELETE", "/v1/acp/"+id, nil, "Authorization", "Bearer admin-tok")
	}
	t.Logf("%d rounds, alice's answers: %v", rounds, statuses)
	if statuses[403] == 0 {
		t.Errorf("alice was never judged on the admin's instance: %v", statuses)
	}

	// /acp/{agent}: the admin's connection to test, named by alice on
	// /acp/mock, is unknown there; on /v1/acp it is the test agent's.
	st, h, b := d.Do("POST", "/acp/test", []byte(stdInit), "Content-Type", "application/json", "Authorization", "Bearer admin-tok")
	conn := h.Get("Acp-Connection-Id")
	if st != 200 || conn == "" {
		t.Fatalf("admin connection: %d %s", st, b)
	}
	for range 20 {
		if st, b := post("alice", "/acp/mock", `{"jsonrpc":"2.0","id":7,"method":"probe"}`, "Acp-Connection-Id", conn); st != 404 {
			t.Fatalf("alice on /acp/mock with the admin's test connection: %d %s", st, b)
		}
		if st, b := post("alice", "/acp/test", `{"jsonrpc":"2.0","id":7,"method":"probe"}`, "Acp-Connection-Id", conn); st != 403 {
			t.Fatalf("alice on /acp/test: %d %s", st, b)
		}
		if st, b := post("alice", "/v1/acp/"+conn, `{"jsonrpc":"2.0","id":7,"method":"probe"}`); st != 403 {
			t.Fatalf("alice on /v1/acp/<connection>: %d %s", st, b)
		}
	}
}

// Issue 20: the fields the daemon reads inside params (the session id it
// routes on) and in the JSON bodies it decodes (a move's destination, a
// command) follow the top-level rule: a duplicate or a case variant that
// Go's decoder would read into the same field is a 400 "ambiguous", before
// anything acts on either (the daemon routed and checked A while the Go
// mock acted on B).
func TestFaultAmbiguousParams(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: []string{"--log-level", "info"}})
	if st, b := d.Post("/v1/acp/amb?agent=mock", initMsg); st != 200 {
		t.Fatalf("initialize: %d %s", st, b)
	}
	st, b := d.Post("/v1/acp/amb", `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	var res struct {
		Result struct{ SessionID string } `json:"result"`
	}
	if st != 200 || json.Unmarshal(b, &res) != nil || res.Result.SessionID == "" {
		t.Fatalf("session/new: %d %s", st, b)
	}
	sid := res.Result.SessionID
	prompt := func(params string) string {
		return `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{` + params + `,"prompt":[{"type":"text","text":"hi"}]}}`
	}
	for _, params := range []string{
		`"sessionId":"` + sid + `","SESSIONID":"other"`,
		`"sessionid":"other","sessionId":"` + sid + `"`,
		"\"sessionId\":\"" + sid + "\",\"\u017fessionId\":\"other\"",
		`"sessionId":"` + sid + `","sessionId":"other"`,
	} {
		st, b := d.Post("/v1/acp/amb", prompt(params))
		if p := parseProblem(t, b); st != 400 || !strings.Contains(p.Detail, "ambiguous") || !strings.Contains(p.Detail, "params member") {
			t.Fatalf("%s: %d %s", params, st, b)
		}
	}
	// The same on a WebSocket: a JSON-RPC error, nothing forwarded.
	c, _ := wsConnectTo(t, d, "mock")
	c.send(t, `{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"a","SessionId":"b","prompt":[]}}`)
	if got := c.readText(t, 10*time.Second); !strings.Contains(got, `"error"`) || !strings.Contains(got, "ambiguous") {
		t.Fatalf("websocket: %s", got)
	}

	// JSON bodies the daemon decodes.
	if st, _, b := d.Do("PUT", "/v1/fs/file?path=amb.txt", []byte("x")); st != 200 {
		t.Fatalf("put: %d %s", st, b)
	}
	st, _, b = d.Do("POST", "/v1/fs/move", []byte(`{"from":"amb.txt","to":"a.txt","TO":"b.txt"}`), "Content-Type", "application/json")
	if p := parseProblem(t, b); st != 400 || !strings.Contains(p.Detail, "ambiguous") {
		t.Fatalf("move: %d %s", st, b)
	}
	if st, _, _ := d.Do("GET", "/v1/fs/stat?path=amb.txt", nil); st != 200 {
		t.Fatalf("the refused move moved the file: stat %d", st)
	}
	st, _, b = d.Do("POST", "/v1/processes/run", []byte(`{"command":"true","Command":"false"}`), "Content-Type", "application/json")
	if p := parseProblem(t, b); st != 400 || !strings.Contains(p.Detail, "ambiguous") {
		t.Fatalf("run: %d %s", st, b)
	}
	// Maps match names exactly: variables differing by case are fine.
	st, _, b = d.Do("POST", "/v1/processes/run", []byte(`{"command":"sh","args":["-c","echo $Ab$AB"],"env":{"Ab":"x","AB":"y"}}`), "Content-Type", "application/json")
	if st != 200 || !strings.Contains(string(b), `"stdout":"xy\n"`) {
		t.Fatalf("env by case: %d %s", st, b)
	}
}
