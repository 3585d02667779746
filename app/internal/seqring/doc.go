// Package seqring is the storage under the two bounded logs readers resume
// from by sequence number: the ACP replay buffer (app/acp EventLog) and a
// managed process's output (app/processes). It numbers items, keeps them
// oldest first with their byte cost, and drops the oldest on request; the
// logs keep their own locking, waking, budget policy and reader positions.
// App packages never import each other, so the piece both need lives below
// app/internal.
package seqring
