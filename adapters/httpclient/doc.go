// Package httpclient is the Go client of the sandbox-agent daemon's HTTP
// API: the one the sandbox-agent command line itself uses, and a public API
// for Go programs that drive agents in a sandbox.
//
//	import "github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
//
//	c := &httpclient.Client{BaseURL: "http://127.0.0.1:2468", Token: token}
//
// It stays in adapters/ (where the project layout puts every technology
// adapter, and where the CLI finds it) rather than at the module root: the
// layout is fixed, and the path is just as importable. It imports nothing
// of the daemon but domain's value types, so using it pulls in no server
// code; the e2e tests, which may not import the daemon, use it for that
// reason.
//
// # Calls
//
// Every route has a typed call taking a context: Health; ListAgents, Agent,
// InstallAgent (InstallAgentWithProgress); FSEntries, FSStat, OpenFile
// (streamed, with a byte range), ReadFile, WriteFile (streamed from an
// io.Reader), DeleteFSEntry, Mkdir, Move, UploadBatch (a tar streamed from an
// io.Reader); MCPConfig, SetMCPConfig, DeleteMCPConfig and the skills
// equivalents; ListACPServers, ACPStderr, CloseACP; PostACP and StreamACP
// for the raw ACP transport; ProcessConfig, SetProcessConfig, RunProcess,
// CreateProcess, ListProcesses, Process, StopProcess, KillProcess,
// DeleteProcess, SendProcessInput, ResizeProcessTerminal, ProcessLogs,
// FollowProcessLogs (the live log, to the exit) and ConnectTerminal (a
// process's terminal over its WebSocket, as an io.ReadWriteCloser). Do and
// Send reach anything else.
//
// # Behind a router
//
// Router sends every request through a router in front of many sandboxes,
// such as kubernetes-sigs/agent-sandbox's sandbox-router: BaseURL is the
// router's address, Router names the sandbox (X-Sandbox-ID, namespace,
// port) and carries the router's own token; the daemon's token then goes in
// TokenHeader (DefaultTokenHeader unless set), which the daemon reads with
// --token-header.
//
// # Errors
//
// Every non-2xx answer is returned as a *Problem, the daemon's
// application/problem+json document (status, kind, the daemon's message,
// extensions, Retry-After and the raw body); get it with errors.As. A
// context that ended is the context's error (errors.Is), never a
// *Problem, and the daemon's own timeout (504) is never a context error.
// ErrDaemonUnreachable, ErrInstanceGone, ErrClosed and *AgentExitedError
// end an ACPConn; StreamACP and FollowProcessLogs end with
// ErrDaemonUnreachable on a stream the daemon stopped writing to, and a
// followed log cut before the process's exit with io.ErrUnexpectedEOF.
// No call retries on its own but an ACPConn's POSTs (see ACPConn).
//
// # ACP
//
// DialACP returns an ACPConn: an io.Reader of the agent's messages and an
// io.Writer for the client's, one JSON-RPC message per line, exactly like
// the pipes of a local agent process, so it plugs into acp-go-sdk:
//
//	conn, err := c.DialACP(ctx, "my-session", "claude", &httpclient.ACPOptions{DeleteOnClose: true})
//	...
//	defer conn.Close()
//	agent := acp.NewClientSideConnection(myClient, conn, conn)
//
// Every agent message is delivered once, unchanged, in the order the agent
// wrote it (a result never overtakes the updates before it), across event
// stream reconnects and daemon hiccups up to ACPOptions.ReconnectTimeout.
// Every client message is POSTed through the Client's net/http client, in
// order and at most once: it is sent again only when no connection could
// be made for it or the daemon refused it as overloaded (503), and what
// the caller sees when a connection breaks after a message was sent (a
// JSON-RPC error, or the response awaited on the stream) is set out under
// ACPConn. "sandbox-agent acp", the stdio bridge
// for editors, is this connection copied to stdin and stdout.
//
// # Transport
//
// One HTTP client: net/http, Client.HTTP or the package's default (bounded
// connects, kept-alive connections; an ACP message of 1 MiB or more asks
// the daemon before its body is sent, Expect: 100-continue, waiting at most
// a second for the go-ahead). The package writes no HTTP of its own.
//
// Every call taking a context returns when it ends, whatever the daemon
// does (WriteFile and UploadBatch too, while the caller's reader blocks).
// What the caller must close: an ACPConn, a Terminal, the body OpenFile
// returns; then nothing of the call is left but idle kept-alive
// connections (CloseIdleConnections).
//
// SSEReader is the package's Server-Sent Events parser, usable on its own.
package httpclient
