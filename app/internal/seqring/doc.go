// Package seqring is the storage under the two bounded logs readers resume
// from by sequence number: the ACP replay buffer (app/acp EventLog) and a
// managed process's output (app/processes). It numbers items, keeps them
// oldest first with their byte cost, and drops the oldest on request (Ring),
// and wakes waiting readers (Wake); a Pool is the budget several logs share
// (--replay-total, --process-log-total), evicting from the largest first.
// The logs keep their own locking, budget
// policy, reader positions and wait loops (which differ: an ACP reader
// stops at once when its request ends, a process log follower first drains
// what is already there).
// App packages never import each other, so the piece both need lives below
// app/internal.
package seqring
