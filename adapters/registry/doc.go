// Package registry reads the ACP agent registry and downloads agent
// archives and native binaries over HTTP (ports.Registry, ports.Downloader).
//
// Every request is bounded: connecting, the TLS handshake and waiting for
// response headers have their own timeouts, and a body that stops arriving
// for StallTimeout ends the download. Errors name the URL.
package registry
