package httpapi

import "github.com/sandbox-agent-go/sandbox-agent/app/processes"

// writeProcessMetrics adds the processes API's figures to /metrics.
func writeProcessMetrics(e expo, s processes.MetricsSnapshot) {
	const p = "sandbox_agent_"
	e.family(p+"processes", "gauge", "Managed processes by state, and runs in progress.")
	e.sample(p+"processes", i64(int64(s.Running)), "state", "running")
	e.sample(p+"processes", i64(int64(s.Exited)), "state", "exited")
	e.sample(p+"processes", i64(int64(s.RunsActive)), "state", "run")
	e.one(p+"process_spawns_total", "counter", "Managed processes started.", u64(s.Spawns))
	e.one(p+"process_runs_total", "counter", "Runs (POST /v1/processes/run) started.", u64(s.Runs))
	e.one(p+"process_run_timeouts_total", "counter", "Runs killed at their timeout.", u64(s.RunTimeouts))
	e.one(p+"process_spawn_failures_total", "counter", "Processes and runs that failed to start.", u64(s.SpawnFailures))
	e.family(p+"process_exits_total", "counter", "Processes and runs that ended, by exit code (or signal when code is empty).")
	for _, x := range s.Exits {
		e.sample(p+"process_exits_total", u64(x.Count), "code", x.Code, "signal", x.Signal)
	}
	e.one(p+"process_log_bytes", "gauge", "Bytes held in process logs, per-entry overhead included.", i64(s.LogBytes))
	e.one(p+"process_log_budget_bytes", "gauge", "What the --process-log-total budget holds: every process log plus the output runs are capturing.", i64(s.LogBudgetBytes))
	e.one(p+"process_log_gaps_total", "counter", "Log readers told their position had been evicted (live processes).", u64(s.LogGaps))
}
