// Package httpapi is the inbound HTTP adapter: huma operations for every
// route of docs/api.md, auth and CORS middleware, browser guards, limits and
// metrics, assembled into the daemon's one handler (New). Route families
// that stand on their own live in packages below it, which New registers;
// what they share (registering an operation with its action, the auth
// chain's middleware, the single place where errors become problem+json
// responses, bounded and charged bodies, the SSE writer) is
// internal/route.
//
// Why raw handlers inside huma for ACP: the ACP routes are a byte pipe. huma
// would decode and re-encode JSON bodies (and its sse package re-encodes
// data and cannot send comments), so those operations read the request body
// themselves and write their response through a huma.StreamResponse, while
// still being registered with huma so the OpenAPI document describes them.
package httpapi
