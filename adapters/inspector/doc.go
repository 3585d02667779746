// Package inspector serves the daemon's web inspector at /ui/: a few static
// files (plain HTML, CSS and JavaScript modules, no build step) embedded in
// the binary, so `go build` alone produces a daemon with a UI.
//
// The inspector is a client like any other: it speaks only the public HTTP
// API (agents, ACP instances and their SSE streams, files, config), sending
// the bearer token the user types in. The static files themselves need no
// token, so a browser can load the page before it knows one.
//
// The package also serves the API documentation at /docs (Docs): Swagger UI
// from the Go module github.com/swaggest/swgui, which embeds its built
// files, so the docs work offline under the same Content-Security-Policy.
package inspector
