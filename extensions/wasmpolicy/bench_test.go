package wasmpolicy

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// benchRequest is a typical ACP POST as the HTTP adapter describes it.
var benchRequest = domain.AuthRequest{
	Method: "POST", Route: "/v1/acp/{server_id}", OperationID: "post_v1_acp",
	Path: "/v1/acp/demo", Query: map[string][]string{"agent": {"mock"}},
	Headers: map[string][]string{
		"authorization": {"Bearer secret-token"},
		"content-type":  {"application/json"},
		"accept":        {"application/json"},
		"user-agent":    {"acp-http-client/0.4.2"},
	},
	RemoteAddr: "127.0.0.1:50312", ServerID: "demo", Agent: "mock",
	RPC: &domain.RPCInfo{Kind: "request", ID: "7", Method: "session/prompt"},
}

// BenchmarkDecision measures one decision of a pooled no-op Go policy
// (the fixture answering allow), from domain.AuthRequest to Decision. The
// goal is a p50 under 20 µs.
func BenchmarkDecision(b *testing.B) {
	set, _ := load(b, Spec{Path: fixtureWasm})
	ctx := context.Background()
	durs := make([]time.Duration, 0, 1<<16)
	for b.Loop() {
		start := time.Now()
		d, err := set.Authorize(ctx, benchRequest)
		durs = append(durs, time.Since(start))
		if err != nil || !d.Allowed() {
			b.Fatalf("got %+v, %v", d, err)
		}
	}
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(durs[len(durs)*99/100].Nanoseconds())/1e3, "p99-µs")
}

// BenchmarkAnswer compares the answers alone: the fixture answers a fixed
// pass (what ABI v1 called allow) or a fixed grant with a principal, doing
// the same work otherwise. A grant must cost no more than an allow did.
func BenchmarkAnswer(b *testing.B) {
	for _, answer := range []string{"pass", "grant"} {
		b.Run(answer, func(b *testing.B) {
			set, _ := load(b, Spec{Path: fixtureWasm, Config: []byte(`{"fixed":"` + answer + `"}`)})
			ctx := context.Background()
			want := domain.Pass
			if answer == "grant" {
				want = domain.Grant
			}
			durs := make([]time.Duration, 0, 1<<16)
			for b.Loop() {
				start := time.Now()
				d, err := set.Authorize(ctx, benchRequest)
				durs = append(durs, time.Since(start))
				if err != nil || d.Verdict != want {
					b.Fatalf("got %+v, %v", d, err)
				}
			}
			slices.Sort(durs)
			b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(durs[len(durs)*99/100].Nanoseconds())/1e3, "p99-µs")
		})
	}
}

// BenchmarkEndlessLoop measures how long a call that never returns takes
// to be answered (fail closed) under the default 25 ms limit: the goal is
// the limit plus a few milliseconds. Each iteration first makes a normal
// call, so a fresh instance is ready and its start-up is not counted.
func BenchmarkEndlessLoop(b *testing.B) {
	set, _ := load(b, Spec{Path: fixtureWasm, CallTimeout: DefaultCallTimeout, Instances: 1})
	ctx := context.Background()
	loop := benchRequest
	loop.Headers = map[string][]string{"x-fixture": {"loop"}}
	var durs []time.Duration
	for b.Loop() {
		if d, err := set.Authorize(ctx, benchRequest); err != nil || !d.Allowed() {
			b.Fatalf("warm-up call: %+v, %v", d, err)
		}
		start := time.Now()
		d, err := set.Authorize(ctx, loop)
		durs = append(durs, time.Since(start))
		if d.By = ""; err != nil || d != failedDecision {
			b.Fatalf("got %+v, %v", d, err)
		}
	}
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Microseconds())/1e3, "p50-ms")
	b.ReportMetric(float64(durs[len(durs)-1].Microseconds())/1e3, "max-ms")
}

// BenchmarkChainOfTwo is two pooled no-op policies in one Set, both
// passing: the in-process cost the ACP round trip pays for a chain of two.
func BenchmarkChainOfTwo(b *testing.B) { benchChain(b, nil) }

// BenchmarkChainOfTwoCached is BenchmarkChainOfTwo with both policies
// declaring their decisions cacheable: after the first request, what the
// chain costs when the decision cache answers.
func BenchmarkChainOfTwoCached(b *testing.B) {
	set := benchChain(b, []byte(`{"cache": true}`))
	if n := set.policies[0].calls.Load() + set.policies[1].calls.Load(); n != 2 {
		b.Fatalf("%d module calls, want one per policy", n)
	}
}

// benchChain measures a Set of two fixtures configured by config.
func benchChain(b *testing.B, config []byte) *Set {
	h := &Host{cache: testHost(b).cache, logger: testHost(b).logger}
	set, err := h.Load(context.Background(), []Spec{
		{Path: fixtureWasm, Name: "a", Config: config, CallTimeout: relaxed},
		{Path: fixtureWasm, Name: "b", Config: config, CallTimeout: relaxed},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { set.Close(context.Background()) })
	ctx := context.Background()
	durs := make([]time.Duration, 0, 1<<16)
	for b.Loop() {
		start := time.Now()
		d, err := set.Authorize(ctx, benchRequest)
		durs = append(durs, time.Since(start))
		if err != nil || d.Verdict != domain.Pass {
			b.Fatalf("got %+v, %v", d, err)
		}
	}
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(durs[len(durs)*99/100].Nanoseconds())/1e3, "p99-µs")
	return set
}
