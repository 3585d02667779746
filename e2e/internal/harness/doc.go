// Package harness is what the black-box tests share to drive the built
// sandbox-agent: building it (and e2e/testagent) once, starting daemons on
// a port the kernel picks and stopping them, plain requests, reading an ACP
// event stream and checking that no event on it was lost. It lives outside
// the e2e test files so that there is one of each, and so that the e2e
// tools under e2e/cmd can use it too; like the tests it drives the binary
// over HTTP and imports nothing of the daemon but its public Go client,
// whose SSE reader is the one every stream here is parsed with.
package harness
