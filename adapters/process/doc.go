// Package process runs agents as operating-system processes with os/exec.
//
// Why a process group per agent: agents are often launchers (npx, a shell
// script, node) that start the real agent as a grandchild. exec.Cmd signals
// one pid, which would leave the grandchild running after a DELETE. Each agent
// is therefore started with Setpgid, so its pid is also its group id, and
// every signal goes to -pgid. On Linux the direct child also gets
// Pdeathsig=SIGKILL so it dies with the daemon even when the daemon is killed.
//
// Why a supervisor per agent (Linux, Runner.Supervisor): a process group does
// not hold a descendant that calls setsid, and Pdeathsig reaches only the
// direct child, so a SIGKILLed daemon used to leave the agent's children
// running. The supervisor (Supervise, the daemon's binary re-executed) sits
// between the daemon and the agent: it is a child subreaper, so orphans of
// the agent's tree are reparented to it rather than to init and it can always
// find them; it gets SIGTERM when the daemon dies (and watches its parent
// pid in case that is missed); when the agent exits, or on that signal, it
// SIGKILLs every descendant left, reports the agent's exit status on a pipe,
// and exits. The agent inherits the daemon's pipes directly, so the
// passthrough gains no copy. cgroups would do the same with a freezer, but
// need a delegated hierarchy the daemon cannot count on in a sandbox.
//
// Why os.Pipe instead of cmd.StdinPipe: with *os.File ends exec starts no
// copying goroutines, Wait returns when the process exits (not when every
// holder of its stdout has closed it), and the parent's stdin end supports
// SetWriteDeadline, so a write to an agent that stopped reading can give up.
package process
