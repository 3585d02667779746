// Package acp is the ACP use case behind /v1/acp/{server_id}: it owns every
// agent instance of the daemon (bootstrap on the first POST, post, subscribe,
// delete, list, close on shutdown), and what each one is made of: the
// per-instance event log with its cursors (replay for SSE reconnects), the
// pending-request table that matches responses to synchronous POSTs, the
// stderr tail, and the Metrics counted on that path. Options and
// DefaultOptions are its tuning knobs.
//
// It does not know how an agent id becomes a command: it asks a Launcher,
// an interface it defines and package agents implements; the composition
// root (cmd/sandbox-agent) wires the two. It reaches processes only through
// ports.AgentRunner and never sees net/http, os/exec or a sibling app
// package, so it is tested with fake ports and testing/synctest.
package acp
