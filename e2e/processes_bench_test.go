package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// BenchmarkProcessRun times POST /v1/processes/run of `true` through the
// daemon against starting `true` with os/exec directly, interleaved in the
// same run so both see the same machine load. It reports both medians and
// their difference (the goal: under 2 ms).
//
//	go test ./e2e -run '^$' -bench BenchmarkProcessRun -benchtime 300x
func BenchmarkProcessRun(b *testing.B) {
	d := harness.Start(b, harness.Options{})
	client := &http.Client{}
	body := []byte(`{"command":"true"}`)
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	viaAPI := func() time.Duration {
		start := time.Now()
		resp, err := client.Post(d.URL+"/v1/processes/run", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(out, []byte(`"exitCode":0`)) {
			b.Fatalf("run: %d %s", resp.StatusCode, out)
		}
		return time.Since(start)
	}
	direct := func() time.Duration {
		start := time.Now()
		if err := exec.Command(truePath).Run(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for range 10 { // warm up connections and caches
		viaAPI()
		direct()
	}
	var api, raw []time.Duration
	for b.Loop() {
		api = append(api, viaAPI())
		raw = append(raw, direct())
	}
	p50 := func(ds []time.Duration) time.Duration {
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2]
	}
	a, r := p50(api), p50(raw)
	b.ReportMetric(float64(a.Microseconds())/1000, "api-p50-ms")
	b.ReportMetric(float64(r.Microseconds())/1000, "exec-p50-ms")
	b.ReportMetric(float64((a-r).Microseconds())/1000, "overhead-p50-ms")
}

// BenchmarkProcessLogStream measures how fast a process's output reaches a
// client through GET /v1/processes/{id}/logs?follow=true (SSE): a process
// writes 48 MiB into its log, and the stream is read to its exit event. The
// figure (MB/s) counts the process's bytes, not the base64 on the wire.
//
//	go test ./e2e -run '^$' -bench BenchmarkProcessLogStream -benchtime 5x
func BenchmarkProcessLogStream(b *testing.B) {
	d := harness.Start(b, harness.Options{})
	const size = 48 << 20
	cfg := []byte(`{"maxConcurrentProcesses":8,"defaultRunTimeoutMs":30000,"maxRunTimeoutMs":30000,"maxOutputBytes":1048576,"maxLogBytesPerProcess":67108864,"maxInputBytesPerRequest":1024}`)
	if st, _, out := d.Do("POST", "/v1/processes/config", cfg, "Content-Type", "application/json"); st != 200 {
		b.Fatalf("config: %d %s", st, out)
	}
	b.SetBytes(size)
	for b.Loop() {
		b.StopTimer()
		st, _, out := d.Do("POST", "/v1/processes", []byte(`{"command":"head","args":["-c","50331648","/dev/zero"]}`), "Content-Type", "application/json")
		if st != 200 {
			b.Fatalf("create: %d %s", st, out)
		}
		var p procInfo
		_ = json.Unmarshal(out, &p)
		b.StartTimer()
		resp, err := http.Get(d.URL + "/v1/processes/" + p.ID + "/logs?follow=true")
		if err != nil {
			b.Fatal(err)
		}
		got := readLogStream(b, resp.Body)
		resp.Body.Close()
		b.StopTimer()
		if got != size {
			b.Fatalf("streamed %d bytes, want %d", got, size)
		}
		d.Do("DELETE", "/v1/processes/"+p.ID, nil)
		b.StartTimer()
	}
}

// readLogStream reads SSE log events to the exit event and returns the
// decoded size of their data (from the base64 length, without decoding).
func readLogStream(b *testing.B, r io.Reader) int64 {
	sr := httpclient.NewSSEReader(r, 1<<20)
	var total int64
	for {
		ev, err := sr.Next()
		if errors.Is(err, httpclient.ErrSSEEventTooLarge) {
			b.Fatal("event larger than 1 MiB")
		}
		if err != nil {
			b.Fatalf("stream ended before exit: %v", err)
		}
		switch ev.Event {
		case "exit":
			return total
		case "gap":
			b.Fatal("gap: the log was too small for the benchmark")
		case "log":
			i := bytes.Index(ev.Data, []byte(`"data":"`))
			j := bytes.Index(ev.Data[i+8:], []byte(`"`))
			data := ev.Data[i+8 : i+8+j]
			n := int64(len(data)) / 4 * 3
			n -= int64(strings.Count(string(data[max(0, len(data)-2):]), "="))
			total += n
		}
	}
}
