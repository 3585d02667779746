// Package processapi is the processes API (/v1/processes) over HTTP, with
// the TypeScript SDK 0.4.2's operation ids, shapes and frames: run to
// completion, start, list, signal, delete, write input, resize, the log as
// JSON or an SSE stream, and a tty's terminal as a WebSocket. The use case
// itself is app/processes; this package only translates HTTP to it.
//
// It is a route family of its own, with its own stream and WebSocket
// frames, so it lives apart from the rest of the HTTP API; httpapi.New
// registers it on the same huma API, and it is built from the same parts
// (internal/route: the auth chain, the problem mapping, charged bodies and
// WebSocket messages), so it answers as every route does.
package processapi
