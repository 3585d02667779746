// Package httpclient is a small Go client of the daemon's own HTTP API,
// used by the CLI ("sandbox-agent api ..."). Problem answers become
// *Problem errors carrying the status, type and details the daemon sent.
package httpclient
