// Package seqring is the storage under the two bounded logs readers resume
// from by sequence number: the ACP replay buffer (app/acp EventLog) and a
// managed process's output (app/processes). It numbers items, keeps them
// oldest first with their byte cost, and drops the oldest on request (Ring);
// wakes waiting readers (Wake) and runs every reader's wait loop (Follow: a
// reader whose request ends first gets what is already there); holds
// payload bytes compactly, the older ones in a spill file when given one
// (Spool, under the ACP replay buffer); and a Pool is the budget several
// logs share (--replay-total, --process-log-total), evicting from the
// largest first. The logs keep their own locking, budget policy and
// reader positions.
// App packages never import each other, so the piece both need lives below
// app/internal.
package seqring
