// Package opencode is the inbound adapter of OpenCode's HTTP API, mounted
// by httpapi at /opencode: OpenCode's clients (the TUI of "opencode
// attach", "opencode run --attach", its web UI and @opencode-ai/sdk) drive
// any ACP agent the daemon runs.
//
// An OpenCode session is an ACP session of the agent its provider names
// ("mock/mock", "claude/sonnet"), on an instance of that agent started
// through app/acp (Instances.Connect), one per agent, shared by its
// sessions and visible under /v1/acp like any other. The adapter is the
// ACP client: it sends initialize, session/new (or session/load),
// session/prompt and session/cancel, answers session/request_permission
// and elicitation/create from the user's replies, and projects the
// agent's session/update notifications onto OpenCode's messages and parts
// (text with delta, reasoning, tools through their states, todos).
//
// Sessions, messages, parts and todos live in an embedded SQLite database
// (store.go), written before each event that reports them is published,
// so they survive a daemon restart; their agents restart on the next
// prompt. The event stream is an acp.EventLog (bounded, one position per
// reader, a flush barrier for the synchronous prompt).
//
// Why the store is in this package and not an outbound adapter behind a
// port: it holds OpenCode's own wire shapes, nothing else in the daemon
// reads them, and its only user is this adapter; a port would be an
// interface with one implementation at no boundary of the core.
//
// Auth, the browser guards and CORS are the mounting adapter's (httpapi),
// as for every route; this package describes each request's action
// (Describe) for the auth chain.
package opencode
