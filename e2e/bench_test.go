package e2e

// Transport benchmarks: the daemon against the same mock agent over direct
// stdio, and a bare loopback HTTP round trip as the floor of any HTTP proxy.
//
//	go test ./e2e -run '^$' -bench 'RoundTrip/goal' -benchtime 10x            (10 x 500 round trips per leg)
//	go test ./e2e -run '^$' -bench 'RoundTrip/^[^g]' -benchtime 3000x         (each leg alone, and a minimal proxy)
//	go test ./e2e -run '^$' -bench 'Stream' -benchtime 3x                     (100 000-update bursts)
//
// Goals (issue 2): round-trip p50 within 1.5x of direct stdio + loopback
// HTTP, streaming at least 0.6x of direct stdio, zero loss. Issue 25 raised
// them, measured side by side with the reference in interleaved rounds by
// e2e/cmd/benchcmp: p50 at most 0.9x and p99 at most 1x the reference's,
// p50 at most 1.10x the minimal proxy process (RoundTrip/minimal-proxy-process
// here), streaming at least 0.9x of direct stdio in every round.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// stdioPeer is the mock agent spoken to directly over its pipes.
type stdioPeer struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startStdioMock(b *testing.B) *stdioPeer {
	b.Helper()
	cmd := exec.Command(harness.Binary, "mock-agent-process")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &stdioPeer{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	b.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	return p
}

// call writes msg and reads lines until the one carrying idField, counting
// the lines before it.
func (p *stdioPeer) call(b *testing.B, msg, idField string) (before int) {
	if _, err := io.WriteString(p.in, msg+"\n"); err != nil {
		b.Fatal(err)
	}
	for {
		line, err := p.out.ReadSlice('\n')
		if err != nil {
			b.Fatal(err)
		}
		if bytes.Contains(line, []byte(idField)) && !bytes.Contains(line, []byte(`"method"`)) {
			return before
		}
		before++
	}
}

// quantile sorts durs and returns the q-quantile (0 ≤ q < 1).
func quantile(durs []time.Duration, q float64) time.Duration {
	slices.Sort(durs)
	return durs[int(float64(len(durs))*q)]
}

func report(b *testing.B, durs []time.Duration) {
	if len(durs) == 0 {
		return
	}
	b.ReportMetric(float64(quantile(durs, 0.50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(quantile(durs, 0.99).Microseconds()), "p99-µs")
}

// echo times one echo request over the peer's pipes.
func (p *stdioPeer) echo(b *testing.B, i int) time.Duration {
	start := time.Now()
	p.call(b, fmt.Sprintf(`{"jsonrpc":"2.0","id":"r%d","method":"bench/echo","params":{}}`, i), fmt.Sprintf(`"id":"r%d"`, i))
	return time.Since(start)
}

// poster POSTs echo requests to one URL over a keep-alive connection.
type poster struct {
	client *http.Client
	url    string
	want   []byte // when set, every answer must contain it
}

func newPoster(url string, want []byte) *poster {
	return &poster{client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}, url: url, want: want}
}

// tryPost sends request number i and returns how long the answer took; it
// is safe off the benchmark's goroutine.
func (p *poster) tryPost(i int) (time.Duration, error) {
	msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":"r%d","method":"bench/echo","params":{}}`, i)
	start := time.Now()
	resp, err := p.client.Post(p.url, "application/json", strings.NewReader(msg))
	if err != nil {
		return 0, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if resp.StatusCode != 200 || (p.want != nil && !bytes.Contains(body, p.want)) {
		return 0, fmt.Errorf("%d %s", resp.StatusCode, body)
	}
	return d, nil
}

func (p *poster) post(b *testing.B, i int) time.Duration {
	d, err := p.tryPost(i)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// timePosts POSTs a fresh echo request to url per iteration and reports p50
// and p99.
func timePosts(b *testing.B, url string, want []byte) {
	p := newPoster(url, want)
	var durs []time.Duration
	i := 0
	for b.Loop() {
		i++
		durs = append(durs, p.post(b, i))
	}
	report(b, durs)
}

// startHTTPEcho runs the bare echo server in its own process, as the daemon
// is, and returns its URL.
func startHTTPEcho(b *testing.B) string {
	return startTestAgentServer(b, "-http", "127.0.0.1:0")
}

// startTestAgentServer runs testagent in one of its HTTP modes and returns
// the URL it listens on.
func startTestAgentServer(b *testing.B, args ...string) string {
	cmd := exec.Command(harness.TestAgent, args...)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	return "http://" + strings.TrimSpace(strings.TrimPrefix(line, "listening "))
}

func BenchmarkRoundTrip(b *testing.B) {
	// The goal's three legs in turn, a block of requests each, so that a
	// change in the machine's load moves all of them alike while each leg
	// still runs warm, back to back; "ratio" is daemon p50 / (stdio p50 +
	// HTTP p50), the goal's number. An iteration is one block of each.
	b.Run("goal", func(b *testing.B) {
		p := startStdioMock(b)
		p.call(b, initMsg, `"id":1`)
		bare := newPoster(startHTTPEcho(b), nil)
		d := harness.Start(b, harness.Options{Args: []string{"--log-level", "warn"}})
		if st, body := d.Post("/v1/acp/rt?agent=mock", initMsg); st != 200 {
			b.Fatalf("%d %s", st, body)
		}
		daemon := newPoster(d.URL+"/v1/acp/rt", []byte(`"echoedMethod"`))
		var stdio, bareHTTP, through []time.Duration
		i := 0
		const block = 500
		for b.Loop() {
			for range block {
				i++
				stdio = append(stdio, p.echo(b, i))
			}
			for range block {
				i++
				bareHTTP = append(bareHTTP, bare.post(b, i))
			}
			for range block {
				i++
				through = append(through, daemon.post(b, i))
			}
		}
		s, h, t := quantile(stdio, 0.5), quantile(bareHTTP, 0.5), quantile(through, 0.5)
		b.ReportMetric(float64(s.Microseconds()), "stdio-p50-µs")
		b.ReportMetric(float64(h.Microseconds()), "http-p50-µs")
		b.ReportMetric(float64(t.Microseconds()), "daemon-p50-µs")
		b.ReportMetric(float64(t)/float64(s+h), "ratio")
	})
	b.Run("direct-stdio", func(b *testing.B) {
		p := startStdioMock(b)
		p.call(b, initMsg, `"id":1`)
		var durs []time.Duration
		i := 0
		for b.Loop() {
			i++
			durs = append(durs, p.echo(b, i))
		}
		report(b, durs)
	})
	// In one process with its client: the floor of loopback HTTP, which a
	// daemon in its own process cannot reach.
	b.Run("loopback-http", func(b *testing.B) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
		}))
		defer srv.Close()
		timePosts(b, srv.URL, nil)
	})
	// The same bare server in its own process, as the daemon is: this is
	// the loopback HTTP round trip a separate daemon cannot avoid.
	b.Run("loopback-http-process", func(b *testing.B) {
		timePosts(b, startHTTPEcho(b), nil)
	})
	// The least any HTTP-to-stdio proxy must do: one handler writes to the
	// agent's stdin, one goroutine reads its stdout and hands the answer
	// back. It bounds what the daemon's own design adds.
	b.Run("minimal-proxy", func(b *testing.B) {
		p := startStdioMock(b)
		p.call(b, initMsg, `"id":1`)
		answers := make(chan []byte, 1)
		go func() {
			for {
				line, err := p.out.ReadBytes('\n')
				if err != nil {
					return
				}
				answers <- line
			}
		}()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			p.in.Write(append(body, '\n'))
			w.Header().Set("Content-Type", "application/json")
			w.Write(<-answers)
		}))
		defer srv.Close()
		timePosts(b, srv.URL, []byte(`"echoedMethod"`))
	})
	// The same minimal proxy as its own process, on the daemon's number of
	// Ps: what the daemon's design adds is the difference to "daemon".
	b.Run("minimal-proxy-process", func(b *testing.B) {
		url := startTestAgentServer(b, "-proxy", "127.0.0.1:0", strconv.Itoa(max(1, runtime.GOMAXPROCS(0)/2)), harness.Binary, "mock-agent-process")
		timePosts(b, url, []byte(`"echoedMethod"`))
	})
	// The daemon as shipped (its scheduler on half the CPUs) and with one P
	// per CPU, Go's default; cpu-µs/op is the daemon's own CPU time.
	for _, c := range schedulers {
		b.Run(c.name, func(b *testing.B) {
			d := harness.Start(b, harness.Options{Args: []string{"--log-level", "warn"}, Env: c.env})
			if st, body := d.Post("/v1/acp/rt?agent=mock", initMsg); st != 200 {
				b.Fatalf("%d %s", st, body)
			}
			cpu := processCPU(b, d.Cmd.Process.Pid)
			timePosts(b, d.URL+"/v1/acp/rt", []byte(`"echoedMethod"`))
			b.ReportMetric(float64((processCPU(b, d.Cmd.Process.Pid)-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// schedulers are the daemon's scheduler sizes the benchmarks compare: as
// shipped, and Go's default of one P per CPU.
var schedulers = []struct {
	name string
	env  []string
}{
	{"daemon", nil},
	{"daemon-all-cpus", []string{"GOMAXPROCS=" + strconv.Itoa(runtime.NumCPU())}},
}

// BenchmarkConcurrentClients: 32 clients, each driving its own mock agent
// with back-to-back requests; the machine's throughput, daemon and agents
// sharing its CPUs.
//
//	go test ./e2e -run '^$' -bench ConcurrentClients -benchtime 20000x
func BenchmarkConcurrentClients(b *testing.B) {
	const clients = 32
	for _, c := range schedulers {
		b.Run(c.name, func(b *testing.B) {
			d := harness.Start(b, harness.Options{Args: []string{"--log-level", "warn"}, Env: c.env})
			posters := make([]*poster, clients)
			for i := range posters {
				id := fmt.Sprintf("/v1/acp/c%d", i)
				if st, body := d.Post(id+"?agent=mock", initMsg); st != 200 {
					b.Fatalf("%d %s", st, body)
				}
				posters[i] = newPoster(d.URL+id, []byte(`"echoedMethod"`))
			}
			var left atomic.Int64
			left.Store(int64(b.N))
			errs := make(chan error, clients)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for _, p := range posters {
				wg.Go(func() {
					for i := 0; left.Add(-1) >= 0; i++ {
						if _, err := p.tryPost(i); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			close(errs)
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
		})
	}
}

// burst is the size of one streaming iteration.
const burst = 100000

func BenchmarkStream(b *testing.B) {
	newSession := `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`
	prompt := func(sid string, i int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":"p%d","method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"stream %d"}]}}`, i, sid, burst)
	}
	sessionID := func(b *testing.B, line []byte) string {
		var r struct {
			Result struct{ SessionID string } `json:"result"`
		}
		if err := json.Unmarshal(line, &r); err != nil || r.Result.SessionID == "" {
			b.Fatalf("session/new answer: %s", line)
		}
		return r.Result.SessionID
	}

	b.Run("direct-stdio", func(b *testing.B) {
		p := startStdioMock(b)
		p.call(b, initMsg, `"id":1`)
		io.WriteString(p.in, newSession+"\n")
		line, _ := p.out.ReadBytes('\n')
		sid := sessionID(b, line)
		events, i := 0, 0
		start := time.Now()
		for b.Loop() {
			i++
			n := p.call(b, prompt(sid, i), fmt.Sprintf(`"id":"p%d"`, i))
			if n < burst {
				b.Fatalf("got %d updates, want %d", n, burst)
			}
			events += n
		}
		b.ReportMetric(float64(events)/time.Since(start).Seconds(), "events/s")
	})
	b.Run("daemon", func(b *testing.B) {
		d := harness.Start(b, harness.Options{Args: []string{"--log-level", "warn"}})
		d.Post("/v1/acp/st?agent=mock", initMsg)
		_, line := d.Post("/v1/acp/st", newSession)
		sid := sessionID(b, line)
		s := d.Stream("/v1/acp/st", "Last-Event-ID", "2")
		events, lost, i := 0, 0, 0
		start := time.Now()
		for b.Loop() {
			i++
			if st, body := d.Post("/v1/acp/st", prompt(sid, i)); st != 202 {
				b.Fatalf("%d %s", st, body)
			}
			n, done := 0, fmt.Sprintf(`"id":"p%d"`, i)
			for {
				ev := s.NextWithin(b, time.Minute)
				if ev.ID == "" {
					b.Fatalf("gap frame: %s", ev.Data)
				}
				if strings.Contains(ev.Data, done) {
					break
				}
				if strings.Contains(ev.Data, "agent_message_chunk") {
					n++
				}
			}
			events += n
			lost += burst - n // "stream N" sends exactly N chunks
		}
		b.ReportMetric(float64(events)/time.Since(start).Seconds(), "events/s")
		b.ReportMetric(float64(lost), "lost")
	})
}
