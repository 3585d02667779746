package process

import (
	"context"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// BenchmarkStartStop is the cost of one agent's life, start to gone (the
// test binary as a "cat" agent, stopped by closing stdin), started with
// os/exec ("direct": a process group only) and under the supervisor (a
// sub-supervisor forked without exec): what the supervisor adds to a
// spawn. Both legs run in the same process, one after the other.
//
//	go test ./adapters/process -run '^$' -bench StartStop -count 5
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

// BenchmarkProcessStartWait is a user process's life, `true` started and
// waited for, with os/exec and under the supervisor.
func BenchmarkProcessStartWait(b *testing.B) {
	for _, sup := range []bool{false, true} {
		name := "direct"
		if sup {
			name = "supervised"
		}
		b.Run(name, func(b *testing.B) {
			s := &Starter{}
			if sup {
				s.Supervisor = testSupervisor()
			}
			for b.Loop() {
				p, err := s.Start(context.Background(), domain.ProcessSpec{Command: "/bin/true"})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := p.Wait(); err != nil {
					b.Fatal(err)
				}
				p.IO().Stdout.Close()
				p.IO().Stderr.Close()
			}
		})
	}
}
