package e2e

// Round trip over ACP's standard transport (/acp/{agent}) against
// /v1/acp, in one run, in alternating warm blocks as BenchmarkRoundTrip's
// "goal" does, so that a change in the machine's load moves all legs alike:
//
//	go test ./e2e -run '^$' -bench 'StdTransportRoundTrip' -benchtime 10x
//
// v1: POST /v1/acp/{id}, answer in the body. ws: one text frame each way
// over a WebSocket. shttp: Streamable HTTP, POST (202) then the answer on
// the connection's SSE stream, over HTTP/1.1 keep-alive connections, as
// Node's fetch speaks it. shttp-h2c: the same over one h2c connection.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// shttpLeg drives one Streamable HTTP connection.
type shttpLeg struct {
	client  *http.Client
	url, id string
	answers chan string
}

func newSHTTPLeg(b *testing.B, d *harness.Daemon, client *http.Client) *shttpLeg {
	req, _ := http.NewRequest(http.MethodPost, d.URL+"/acp/mock", strings.NewReader(initMsg))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	l := &shttpLeg{client: client, url: d.URL + "/acp/mock", id: resp.Header.Get("Acp-Connection-Id"), answers: make(chan string, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	sreq, _ := http.NewRequestWithContext(ctx, http.MethodGet, l.url, nil)
	sreq.Header.Set("Accept", "text/event-stream")
	sreq.Header.Set("Acp-Connection-Id", l.id)
	sresp, err := client.Do(sreq)
	if err != nil || sresp.StatusCode != 200 {
		b.Fatalf("stream: %v %v", sresp, err)
	}
	go func() {
		defer sresp.Body.Close()
		r := httpclient.NewSSEReader(sresp.Body, 0)
		for {
			ev, err := r.Next()
			if err != nil {
				close(l.answers)
				return
			}
			l.answers <- string(ev.Data)
		}
	}()
	return l
}

func (l *shttpLeg) echo(b *testing.B, i int) time.Duration {
	msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":"r%d","method":"bench/echo","params":{}}`, i)
	want := fmt.Sprintf(`"id":"r%d"`, i)
	start := time.Now()
	req, _ := http.NewRequest(http.MethodPost, l.url, strings.NewReader(msg))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Acp-Connection-Id", l.id)
	resp, err := l.client.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		b.Fatalf("POST: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	for a := range l.answers {
		if strings.Contains(a, want) {
			return time.Since(start)
		}
	}
	b.Fatal("stream ended")
	return 0
}

func wsEcho(b *testing.B, c *wsClient, i int) time.Duration {
	want := []byte(fmt.Sprintf(`"id":"r%d"`, i))
	start := time.Now()
	if err := c.writeFrame(0x1, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":"r%d","method":"bench/echo","params":{}}`, i))); err != nil {
		b.Fatal(err)
	}
	for {
		_, p, err := c.read(10 * time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if bytes.Contains(p, want) {
			return time.Since(start)
		}
	}
}

func BenchmarkStdTransportRoundTrip(b *testing.B) {
	d := harness.Start(b, harness.Options{Args: []string{"--log-level", "warn"}})
	if st, body := d.Post("/v1/acp/rt?agent=mock", initMsg); st != 200 {
		b.Fatalf("%d %s", st, body)
	}
	v1 := newPoster(d.URL+"/v1/acp/rt", []byte(`"echoedMethod"`))

	ws, err := dialWS(b, "ws"+strings.TrimPrefix(d.URL, "http")+"/acp/mock")
	if err != nil || ws.Resp.StatusCode != http.StatusSwitchingProtocols {
		b.Fatalf("websocket: %v", err)
	}
	if err := ws.writeFrame(0x1, []byte(initMsg)); err != nil {
		b.Fatal(err)
	}
	if _, _, err := ws.read(10 * time.Second); err != nil {
		b.Fatal(err)
	}

	h1 := newSHTTPLeg(b, d, &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}})
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	h2 := newSHTTPLeg(b, d, &http.Client{Transport: &http.Transport{Protocols: &p}})

	var v1d, wsd, h1d, h2d []time.Duration
	i := 0
	const block = 300
	for b.Loop() {
		for range block {
			i++
			v1d = append(v1d, v1.post(b, i))
		}
		for range block {
			i++
			wsd = append(wsd, wsEcho(b, ws, i))
		}
		for range block {
			i++
			h1d = append(h1d, h1.echo(b, i))
		}
		for range block {
			i++
			h2d = append(h2d, h2.echo(b, i))
		}
	}
	v, w := quantile(v1d, 0.5), quantile(wsd, 0.5)
	b.ReportMetric(float64(v.Microseconds()), "v1-p50-µs")
	b.ReportMetric(float64(w.Microseconds()), "ws-p50-µs")
	b.ReportMetric(float64(quantile(h1d, 0.5).Microseconds()), "shttp-p50-µs")
	b.ReportMetric(float64(quantile(h2d, 0.5).Microseconds()), "shttp-h2c-p50-µs")
	b.ReportMetric(float64(quantile(wsd, 0.99).Microseconds()), "ws-p99-µs")
	b.ReportMetric(float64(quantile(v1d, 0.99).Microseconds()), "v1-p99-µs")
	b.ReportMetric(float64(w)/float64(v), "ws/v1")
}
