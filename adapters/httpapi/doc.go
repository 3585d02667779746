// Package httpapi is the inbound HTTP adapter: huma operations for every
// route of api.md, the SSE writer, auth and CORS middleware, and the single
// place where errors become problem+json responses (problem.go).
//
// Why raw handlers inside huma for ACP: the ACP routes are a byte pipe. huma
// would decode and re-encode JSON bodies (and its sse package re-encodes
// data and cannot send comments), so those operations read the request body
// themselves and write their response through a huma.StreamResponse, while
// still being registered with huma so the OpenAPI document describes them.
package httpapi
