// Package process starts agents (Runner) and the user's processes
// (Starter) as operating-system processes.
//
// Why a process group each: agents are often launchers (npx, a shell
// script, node) that start the real agent as a grandchild, and a signal to
// one pid would leave it running. Each is started in a group of its own
// (or, on a terminal, a session), so its pid is the group id and every
// signal goes to -pgid.
//
// Why a supervisor (Linux, Supervisor): a group does not hold a descendant
// that calls setsid or is double-forked, and Pdeathsig reaches only a
// direct child, so such descendants, and everything once the daemon is
// SIGKILLed, used to survive. The daemon's one supervisor process (its
// binary re-executed once, ServeSupervisor) starts every agent and process
// under a sub-supervisor of its own: a child subreaper, cloned without exec
// (fork_linux.go), that kills everything its tree left once the leader has
// exited, been killed, or the supervisor is gone, and reports when nothing
// is left. One subreaper for every tree would not do: an orphan could not
// be told from another tree's. The daemon still signals the groups itself;
// the leader is reaped only after the daemon has seen its exit, so a group
// id is never signalled after it could be reused. Without a supervisor
// (other platforms, or one that cannot start) os/exec starts them, in
// groups. cgroups would do the same with a freezer, but need a delegated
// hierarchy the daemon cannot count on in a sandbox.
//
// Why os.Pipe instead of cmd.StdinPipe: the parent's ends are *os.File,
// so Wait does not depend on copying goroutines, and the stdin end
// supports SetWriteDeadline, so a write to an agent that stopped reading
// can give up. The child's ends are handed to the supervisor (SCM_RIGHTS)
// or to os/exec and closed here once it started; no byte passes through
// the supervisor.
package process
