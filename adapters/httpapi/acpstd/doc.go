// Package acpstd is ACP's standard remote transport, the "Streamable HTTP &
// WebSocket Transport" RFD, at /acp/{agent}: a POST per JSON-RPC message
// (initialize creates a connection and names it in Acp-Connection-Id), SSE
// streams of a connection or one of its sessions, a WebSocket carrying
// every message both ways, and DELETE. A connection is an instance of the
// agent (acp.Instances.Connect), so everything /v1/acp offers applies to
// it.
//
// It is a transport of its own beside the daemon's /v1/acp, with its own
// headers, framing and WebSocket loop, so it lives apart from the rest of
// the HTTP API; it is registered on the same huma API by httpapi.New and
// built from the same parts (internal/route: the auth chain, the problem
// mapping, charged bodies, the SSE writer), so it answers as every route
// does.
package acpstd
