// Package daemon runs sandbox-agent in the background, as `sandbox-agent
// daemon start|stop|status` does: it starts the server detached (its own
// session, stdin from /dev/null, stdout and stderr to a log file) and
// records it in a pid file plus a JSON record under the XDG state
// directory, one set per host and port; it finds it again, refusing to
// trust a pid file whose process is gone or is now another process (the
// record holds the process's start time and the boot it started in, checked
// against /proc); it stops it with SIGTERM, then SIGKILL after a bound.
//
// The health check is a function the caller gives (the composition root
// wires the Go client's GET /v1/health), so this package speaks no HTTP of
// its own. Start and Stop hold a lock file for their whole run, so two
// starts at once leave one daemon.
package daemon
