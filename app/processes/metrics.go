package processes

import (
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// metrics counts what the processes API does, for /metrics.
type metrics struct {
	spawns        atomic.Uint64
	spawnFailures atomic.Uint64
	runs          atomic.Uint64
	runTimeouts   atomic.Uint64

	mu    sync.Mutex
	exits map[ExitKey]uint64
}

// ExitKey labels a process exit: its exit code, or the signal that ended it.
type ExitKey struct {
	Code   string // decimal exit code; "" when a signal ended the process
	Signal string // signal name; "" for a normal exit
}

func (m *metrics) spawned()     { m.spawns.Add(1) }
func (m *metrics) spawnFailed() { m.spawnFailures.Add(1) }

func (m *metrics) exited(st domain.ExitStatus) {
	var k ExitKey
	if st.Code != nil {
		k.Code = strconv.Itoa(*st.Code)
	} else {
		k.Signal = st.Signal
		if k.Signal == "" {
			k.Signal = "unknown"
		}
	}
	m.mu.Lock()
	if m.exits == nil {
		m.exits = map[ExitKey]uint64{}
	}
	m.exits[k]++
	m.mu.Unlock()
}

// ExitCount is how many processes ended one way.
type ExitCount struct {
	ExitKey
	Count uint64
}

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
		snap.LogBytes += pr.log.size()
		snap.LogGaps += pr.log.gaps.Load()
	}
	snap.RunsActive = max(live-snap.Running, 0)
	snap.Spawns = s.metrics.spawns.Load()
	snap.SpawnFailures = s.metrics.spawnFailures.Load()
	snap.Runs = s.metrics.runs.Load()
	snap.RunTimeouts = s.metrics.runTimeouts.Load()
	s.metrics.mu.Lock()
	for k, n := range s.metrics.exits {
		snap.Exits = append(snap.Exits, ExitCount{ExitKey: k, Count: n})
	}
	s.metrics.mu.Unlock()
	sort.Slice(snap.Exits, func(i, j int) bool {
		a, b := snap.Exits[i], snap.Exits[j]
		if a.Code != b.Code {
			return a.Code < b.Code
		}
		return a.Signal < b.Signal
	})
	return snap
}
