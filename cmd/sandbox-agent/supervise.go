package main

import (
	"os"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/process"
)

// The hidden subcommand `sandbox-agent _supervise-agent PATH ARGV...` is the
// per-agent supervisor (process.Supervise). It is dispatched before main, and
// before any command-line parsing, because the daemon starts one per agent
// and it must stay small and quick; it is not part of the documented CLI.
func init() {
	if len(os.Args) > 1 && os.Args[1] == process.SuperviseCommand {
		os.Exit(process.Supervise(os.Args[2:]))
	}
}

// supervisorExe is the binary the daemon re-executes as each agent's
// supervisor: itself, through /proc/self/exe on Linux so that replacing or
// deleting the file on disk (an upgrade) does not break starting agents.
// Empty (no supervisor) when it cannot be found.
func supervisorExe() string {
	if _, err := os.Stat("/proc/self/exe"); err == nil {
		return "/proc/self/exe"
	}
	self, err := os.Executable()
	if err != nil {
		return ""
	}
	return self
}
