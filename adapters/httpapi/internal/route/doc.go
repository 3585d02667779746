// Package route is what every route family of the HTTP API is built from,
// so that the families can live in packages of their own (acpstd,
// processapi, fsapi beside httpapi itself) and still behave as one API:
// registering an operation with the action the auth chain judges
// (Register, the describe functions, the chain's middleware), the single
// place where errors become problem+json responses (problem.go: errors
// are mapped once, here and nowhere else), request bodies bounded and
// charged to --inflight-bytes (body.go, inflight.go), the JSON body rules
// (jsonbody.go), the SSE writer, WebSocket reads charged as bodies are,
// and the request's logger.
//
// It is internal to adapters/httpapi: the families import it, httpapi
// wires it (Env) from its Config, and nothing outside the adapter sees it.
package route
