package acp

import (
	"sync/atomic"

	"github.com/sandbox-agent-go/sandbox-agent/app/internal/exits"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Metrics counts what the ACP use cases do, so an operator can watch a
// daemon that runs unattended for weeks: spawns and exits, the bytes on the
// pipe each way, stdin writes that gave up, responses nobody waited for any
// more. It is updated from the hot path with single atomic adds and never
// takes a lock there (exits, rare, take a small one).
//
// Every method is safe for concurrent use. Instances owns one and hands
// each instance a pointer to it.
type Metrics struct {
	spawns             atomic.Uint64
	spawnFailures      atomic.Uint64
	framesToAgent      atomic.Uint64
	bytesToAgent       atomic.Uint64
	framesFromAgent    atomic.Uint64
	bytesFromAgent     atomic.Uint64
	lateResponses      atomic.Uint64
	stdinWriteFailures atomic.Uint64
	retiredGaps        atomic.Uint64 // gaps of instances already removed

	exits exits.Counter
}

// ExitKey labels an agent exit: its exit code, or the signal that ended it.
type ExitKey = exits.ExitKey

func (m *Metrics) spawned() {
	m.spawns.Add(1)
}

func (m *Metrics) spawnFailed() {
	m.spawnFailures.Add(1)
}

// toAgent counts one frame of n bytes (newline included) written to stdin.
func (m *Metrics) toAgent(n int) {
	m.framesToAgent.Add(1)
	m.bytesToAgent.Add(uint64(n))
}

// fromAgent counts one line of n bytes read from stdout.
func (m *Metrics) fromAgent(n int) {
	m.framesFromAgent.Add(1)
	m.bytesFromAgent.Add(uint64(n))
}

// lateResponse counts a response that found no waiting request: its POST
// timed out or its client left before the agent answered.
func (m *Metrics) lateResponse() {
	m.lateResponses.Add(1)
}

func (m *Metrics) stdinWriteFailed() {
	m.stdinWriteFailures.Add(1)
}

func (m *Metrics) exited(st domain.ExitStatus) { m.exits.Add(st) }

// retire keeps the gap count of an instance that is leaving the table, so
// the daemon-wide total never goes down. Called under Instances.mu, in the
// same step that removes the instance, so a snapshot counts it exactly once.
func (m *Metrics) retire(in *instance) {
	m.retiredGaps.Add(in.log.Stats().Gaps)
}

// ExitCount is how many agents ended one way.
type ExitCount = exits.ExitCount

// MetricsSnapshot is the state of the ACP use cases at one moment: the
// counters since start, and gauges summed over the live instances.
type MetricsSnapshot struct {
	Spawns, SpawnFailures                         uint64
	FramesToAgent, BytesToAgent                   uint64
	FramesFromAgent, BytesFromAgent               uint64
	LateResponses, StdinWriteFailures, ReplayGaps uint64
	Exits                                         []ExitCount // sorted by code, then signal
	Running, Exited, Subscribers, PendingRequests int
	BufferedEvents                                int
	BufferedBytes                                 int64
	// ReplayBudgetBytes is what the shared --replay-total budget holds:
	// the replay buffers plus agent lines being read.
	ReplayBudgetBytes int64
}

// Metrics returns the daemon's ACP counters and gauges. It is cheap enough
// to call on every scrape: one pass over the instance table.
func (s *Instances) Metrics() MetricsSnapshot {
	m := &s.metrics
	s.mu.Lock()
	all := make([]*instance, 0, len(s.byID))
	for _, in := range s.byID {
		all = append(all, in)
	}
	gaps := m.retiredGaps.Load()
	for _, in := range all {
		gaps += in.log.Stats().Gaps
	}
	s.mu.Unlock()

	snap := MetricsSnapshot{
		Spawns:             m.spawns.Load(),
		SpawnFailures:      m.spawnFailures.Load(),
		FramesToAgent:      m.framesToAgent.Load(),
		BytesToAgent:       m.bytesToAgent.Load(),
		FramesFromAgent:    m.framesFromAgent.Load(),
		BytesFromAgent:     m.bytesFromAgent.Load(),
		LateResponses:      m.lateResponses.Load(),
		StdinWriteFailures: m.stdinWriteFailures.Load(),
		ReplayGaps:         gaps,
		ReplayBudgetBytes:  s.replay.Total(),
	}
	for _, in := range all {
		info := in.info()
		if info.State == "running" {
			snap.Running++
		} else {
			snap.Exited++
		}
		snap.Subscribers += info.Subscribers
		snap.PendingRequests += info.PendingRequests
		snap.BufferedEvents += info.BufferedEvents
		snap.BufferedBytes += info.BufferedBytes
	}
	snap.Exits = m.exits.Snapshot()
	return snap
}
