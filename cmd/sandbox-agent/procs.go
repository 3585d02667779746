package main

import (
	"os"
	"runtime"
)

// relayProcs sizes the daemon's Go scheduler: half the Ps Go would use
// (one per CPU the process may use), at least one.
//
// Why not one P per CPU: the daemon relays bytes between clients and agents,
// and the agents, which do the real work, run on the same CPUs. Each request
// hands data between goroutines several times; with an idle P at hand, every
// hand-off also wakes a spare thread that spins on a CPU the agent or the
// client is waiting for. On a 2-vCPU machine, as sandboxes often are, one P
// measured a 10-25% lower round-trip p50 and a third less daemon CPU per
// request, for 10% less throughput with 32 clients driving 32 agents flat
// out (e2e benchmarks RoundTrip/daemon* and ConcurrentClients; docs/benchmarks.md,
// "Transport against direct stdio"; docs/RATIONALE.md). An explicit GOMAXPROCS in the environment wins, and agents
// never inherit the daemon's choice, since it is not put in the environment.
// Setting it stops Go from re-reading a changed cgroup CPU limit while the
// daemon runs; sandboxes get their limit before it starts.
func relayProcs(goDefault int) int {
	return max(1, goDefault/2)
}

// sizeScheduler applies relayProcs unless GOMAXPROCS is set, and returns the
// number of Ps in use.
func sizeScheduler() int {
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		runtime.GOMAXPROCS(relayProcs(runtime.GOMAXPROCS(0)))
	}
	return runtime.GOMAXPROCS(0)
}
