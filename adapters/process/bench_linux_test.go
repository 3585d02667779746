package process

import (
	"context"
	"testing"
)

// BenchmarkStartStop is the cost of one agent's life, start to gone (the
// test binary as a "cat" agent, stopped by closing stdin), with and without
// the supervisor: what the supervisor adds to every spawn.
func BenchmarkStartStop(b *testing.B) {
	for _, sup := range []bool{false, true} {
		name := "direct"
		if sup {
			name = "supervised"
		}
		b.Run(name, func(b *testing.B) {
			supervisedTests = sup
			defer func() { supervisedTests = false }()
			r := testRunner()
			spec := agentSpec(b, "cat")
			for b.Loop() {
				p, err := r.Start(context.Background(), spec)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Stop(context.Background()); err != nil {
					b.Fatal(err)
				}
				p.Stdout().Close()
				p.Stderr().Close()
			}
		})
	}
}
