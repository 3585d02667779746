package main

import (
	"log/slog"
	"os"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/process"
)

// The hidden subcommand `sandbox-agent _supervisor` is the daemon's process
// supervisor (process.ServeSupervisor), started once per daemon with its
// socket on fd 3. It is dispatched before main, and before any
// command-line parsing; it is not part of the documented CLI.
func init() {
	if len(os.Args) > 1 && os.Args[1] == process.SupervisorCommand {
		os.Exit(process.ServeSupervisor())
	}
}

// newSupervisor returns the daemon's process supervisor: this binary,
// re-executed once through /proc/self/exe on Linux so that replacing or
// deleting the file on disk (an upgrade) does not break it. Nil where
// there is no supervisor (not Linux); processes then start with os/exec.
func newSupervisor() *process.Supervisor {
	exe := "/proc/self/exe"
	if _, err := os.Stat(exe); err != nil {
		if exe, err = os.Executable(); err != nil {
			return nil
		}
	}
	return process.NewSupervisor(exe, process.SupervisorCommand)
}

// startSupervisor starts the process supervisor at daemon start, so the
// first spawn does not pay for it and a host where it cannot run is known
// at once: agents and processes then start with os/exec, in process
// groups, and what leaves a group (setsid) can outlive its leader.
func startSupervisor(log *slog.Logger, protect func(pid int) (release func())) *process.Supervisor {
	sup := newSupervisor()
	if sup == nil {
		return nil
	}
	sup.Protect = protect
	if err := sup.Start(); err != nil {
		log.Warn("no process supervisor: descendants that leave their process group can outlive their agent or process", "err", err)
		sup.Close()
		return nil
	}
	return sup
}
