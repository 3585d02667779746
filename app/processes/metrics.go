package processes

import (
	"sync/atomic"

	"github.com/sandbox-agent-go/sandbox-agent/app/internal/exits"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// metrics counts what the processes API does, for /metrics.
type metrics struct {
	spawns        atomic.Uint64
	spawnFailures atomic.Uint64
	runs          atomic.Uint64
	runTimeouts   atomic.Uint64

	exits exits.Counter
}

// ExitKey labels a process exit: its exit code, or the signal that ended it.
type ExitKey = exits.ExitKey

func (m *metrics) spawned()     { m.spawns.Add(1) }
func (m *metrics) spawnFailed() { m.spawnFailures.Add(1) }

func (m *metrics) exited(st domain.ExitStatus) { m.exits.Add(st) }

// ExitCount is how many processes ended one way.
type ExitCount = exits.ExitCount

// MetricsSnapshot is the state of the processes API at one moment.
type MetricsSnapshot struct {
	Running, Exited int // managed processes by state
	RunsActive      int // runs in progress
	Spawns          uint64
	SpawnFailures   uint64
	Runs            uint64
	RunTimeouts     uint64
	Exits           []ExitCount // managed processes and runs, sorted
	LogBytes        int64       // held in process logs, overhead included
	LogGaps         uint64      // readers told their position was evicted
	LogBudgetBytes  int64       // what --process-log-total holds: logs and run captures
}

// Metrics returns a snapshot for /metrics.
func (s *Service) Metrics() MetricsSnapshot {
	var snap MetricsSnapshot
	s.mu.Lock()
	procs := make([]*proc, 0, len(s.procs))
	for _, pr := range s.procs {
		procs = append(procs, pr)
	}
	live := s.live
	s.mu.Unlock()
	for _, pr := range procs {
		if pr.running() {
			snap.Running++
		} else {
			snap.Exited++
		}
		snap.LogBytes += pr.log.Size()
		snap.LogGaps += pr.log.gaps.Load()
	}
	snap.RunsActive = max(live-snap.Running, 0)
	snap.LogBudgetBytes = s.pool.Total()
	snap.Spawns = s.metrics.spawns.Load()
	snap.SpawnFailures = s.metrics.spawnFailures.Load()
	snap.Runs = s.metrics.runs.Load()
	snap.RunTimeouts = s.metrics.runTimeouts.Load()
	snap.Exits = s.metrics.exits.Snapshot()
	return snap
}
