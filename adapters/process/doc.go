// Package process runs agents as operating-system processes with os/exec.
//
// Why a process group per agent: agents are often launchers (npx, a shell
// script, node) that start the real agent as a grandchild. exec.Cmd signals
// one pid, which would leave the grandchild running after a DELETE. Each agent
// is therefore started with Setpgid, so its pid is also its group id, and
// every signal goes to -pgid. On Linux the direct child also gets
// Pdeathsig=SIGKILL so it dies with the daemon even when the daemon is killed.
//
// Why os.Pipe instead of cmd.StdinPipe: with *os.File ends exec starts no
// copying goroutines, Wait returns when the process exits (not when every
// holder of its stdout has closed it), and the parent's stdin end supports
// SetWriteDeadline, so a write to an agent that stopped reading can give up.
package process
