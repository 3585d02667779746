package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// lineCaller sends one echo request as a line and reads lines until its
// response.
type lineCaller struct {
	w io.Writer
	r *bufio.Reader
}

func (c *lineCaller) echo(b *testing.B, i int) time.Duration {
	id := fmt.Sprintf(`"id":"r%d"`, i)
	start := time.Now()
	if _, err := fmt.Fprintf(c.w, `{"jsonrpc":"2.0",%s,"method":"bench/echo","params":{}}`+"\n", id); err != nil {
		b.Fatal(err)
	}
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			b.Fatal(err)
		}
		if strings.Contains(string(line), id) {
			return time.Since(start)
		}
	}
}

// BenchmarkBridgeRoundTrip: one request/response round trip to the mock
// through "sandbox-agent acp" (a child process on pipes) and through the Go
// client's ACP connection in process, beside the daemon's own POST round
// trip over HTTP (a plain net/http client, which the Go client and the
// bridge POST through too), in alternating warm blocks. "ratio" is bridge p50 /
// daemon p50 (goal: within 1.3), "ratio-sysmon-default" the same for a
// bridge left with the runtime's default sysmon; "ratio-sse" compares with the daemon's
// round trip while the instance's event stream is open and read, as it is
// for every HTTP ACP client.
//
//	go test ./e2e -run '^$' -bench BridgeRoundTrip -benchtime 10x
func BenchmarkBridgeRoundTrip(b *testing.B) {
	d := harness.Start(b, harness.Options{Args: []string{"--log-level", "warn"}})
	if st, body := d.Post("/v1/acp/rt?agent=mock", initMsg); st != 200 {
		b.Fatalf("%d %s", st, body)
	}
	daemon := newPoster(d.URL+"/v1/acp/rt", []byte(`"echoedMethod"`))
	// The same with the event stream open and read, as every HTTP ACP
	// client (acp-http-client, the TypeScript SDK) has it.
	if st, body := d.Post("/v1/acp/rt-sse?agent=mock", initMsg); st != 200 {
		b.Fatalf("%d %s", st, body)
	}
	sse := d.Stream("/v1/acp/rt-sse")
	go func() {
		for {
			if _, err := sse.Next(); err != nil {
				return
			}
		}
	}()
	withStream := newPoster(d.URL+"/v1/acp/rt-sse", []byte(`"echoedMethod"`))

	bridge := benchBridge(b, d.URL, "")
	// The same bridge with Go's sysmon left to its deep sleep (the
	// runtime's default; cmd/sandbox-agent's sysmon_linux.go), to show
	// what keeping it awake gains, in the same run.
	bridgeDefault := benchBridge(b, d.URL, "schedtrace=0")

	conn, err := (&httpclient.Client{BaseURL: d.URL}).DialACP(context.Background(), "rt-go", "mock", &httpclient.ACPOptions{DeleteOnClose: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	goconn := &lineCaller{w: conn, r: bufio.NewReaderSize(conn, 1<<20)}
	goconn.echo(b, 0)

	var direct, streamed, viaBridge, viaDefault, viaConn []time.Duration
	legs := []func(i int){
		func(i int) { direct = append(direct, daemon.post(b, i)) },
		func(i int) { streamed = append(streamed, withStream.post(b, i)) },
		func(i int) { viaBridge = append(viaBridge, bridge.echo(b, i)) },
		func(i int) { viaDefault = append(viaDefault, bridgeDefault.echo(b, i)) },
		func(i int) { viaConn = append(viaConn, goconn.echo(b, i)) },
	}
	// The legs take turns in blocks of 50, their order turning block by
	// block, six blocks each per iteration: a change of the machine's
	// state (load, which CPU each process runs on) falls on every leg
	// alike. (Blocks of 300 in a fixed order let one leg's p50 move 2x
	// between runs while the others did not.)
	i, turn := 0, 0
	const block = 50
	for b.Loop() {
		for range 6 {
			for k := range legs {
				leg := legs[(k+turn)%len(legs)]
				for range block {
					i++
					leg(i)
				}
			}
			turn++
		}
	}
	h, hs, br, gc := quantile(direct, 0.5), quantile(streamed, 0.5), quantile(viaBridge, 0.5), quantile(viaConn, 0.5)
	b.ReportMetric(float64(h.Microseconds()), "daemon-p50-µs")
	b.ReportMetric(float64(hs.Microseconds()), "daemon+sse-p50-µs")
	b.ReportMetric(float64(br)/float64(hs), "ratio-sse")
	b.ReportMetric(float64(br.Microseconds()), "bridge-p50-µs")
	b.ReportMetric(float64(gc.Microseconds()), "goclient-p50-µs")
	b.ReportMetric(float64(quantile(viaBridge, 0.99).Microseconds()), "bridge-p99-µs")
	b.ReportMetric(float64(br)/float64(h), "ratio")
	bd := quantile(viaDefault, 0.5)
	b.ReportMetric(float64(bd.Microseconds()), "bridge-sysmon-default-p50-µs")
	b.ReportMetric(float64(bd)/float64(h), "ratio-sysmon-default")
}

// benchBridge runs "sandbox-agent acp" on pipes against the daemon at url,
// with GODEBUG set to godebug when not empty, and makes its first round
// trip (which creates its instance).
func benchBridge(b *testing.B, url, godebug string) *lineCaller {
	cmd := exec.Command(harness.Binary, "acp", "--endpoint", url, "--agent", "mock", "--log-level", "warn")
	if godebug != "" {
		cmd.Env = append(os.Environ(), "GODEBUG="+godebug)
	}
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	c := &lineCaller{w: in, r: bufio.NewReaderSize(out, 1<<20)}
	c.echo(b, 0)
	return c
}
