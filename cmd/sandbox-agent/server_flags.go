package main

import (
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi"
	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
)

// The daemon's listen address by default, as the reference's; the api
// commands' --endpoint default points at it.
const (
	defaultHost = "127.0.0.1"
	defaultPort = "2468"
)

// serverFlags is everything `sandbox-agent server` accepts. To add a flag:
// add a field here and one line to register (or, for a feature of its own,
// a sub-struct with its own register method, as policyFlags does). Take
// the default from the option struct that owns it (acp.DefaultOptions,
// ...), not a new constant. pflag gives --name, -x shorthands, repeatable
// values and interleaved positional arguments; cobra prints the help.
type serverFlags struct {
	host, port, token                 string
	noToken, noTelemetry, corsCreds   bool
	corsOrigins, corsMethods, corsHdr stringList
	logFormat, logLevel               string
	asyncMethods                      string
	maxACPBody, replayBytes           int64
	replayDir                         string
	maxFrame                          int
	stopGrace                         time.Duration
	stdinWriteTimeout, streamWrite    time.Duration
	metricsPublic                     bool
	agentsFile                        string
	runAs                             string
	fsRoot, fsBackend                 string
	maxUpload                         int64
	fsLimits                          fsLimits
	policy                            policyFlags
	limits                            limitFlags
	auth                              authFlags
	opencode                          openCodeFlags
	tokenFromEnv                      bool // token came from SANDBOX_AGENT_TOKEN
	tokenHidden                       bool // --token, taken off the command line by the re-exec
}

// register defines the server's flags on fs, in the order --help lists
// them.
func (f *serverFlags) register(fs *pflag.FlagSet) {
	d, h := acp.DefaultOptions(), httpapi.DefaultConfig()
	fs.SortFlags = false
	fs.StringVarP(&f.host, "host", "H", defaultHost, "address to listen on")
	fs.StringVarP(&f.port, "port", "p", defaultPort, "port to listen on")
	fs.StringVarP(&f.token, "token", "t", "", "require this bearer token on /v1, /acp and /metrics requests (default: $SANDBOX_AGENT_TOKEN, else no token; on Linux the daemon takes it off its command line at start)")
	fs.BoolVarP(&f.noToken, "no-token", "n", false, "run without a token: the default; a token given by --token, --token-file or $SANDBOX_AGENT_TOKEN still wins (logged)")
	fs.VarP(&f.corsOrigins, "cors-allow-origin", "O", "allow this CORS origin (repeatable; '*' for any)")
	fs.VarP(&f.corsMethods, "cors-allow-method", "M", "allow this CORS method (repeatable; default any)")
	fs.VarP(&f.corsHdr, "cors-allow-header", "A", "allow this CORS header (repeatable; default any)")
	fs.BoolVarP(&f.corsCreds, "cors-allow-credentials", "C", false, "allow credentials in CORS requests")
	fs.BoolVar(&f.noTelemetry, "no-telemetry", false, "accepted for compatibility; the daemon never phones home")
	fs.StringVar(&f.logFormat, "log-format", "auto", "auto (coloured on a terminal, else JSON), text, color or json")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.asyncMethods, "async-methods", joinSet(d.AsyncMethods), "comma-separated ACP methods answered 202 at once (response on SSE); empty for none")
	fs.Int64Var(&f.maxACPBody, "max-acp-body", h.MaxACPBody, "largest ACP POST body in bytes; unless given, at most --inflight-bytes")
	fs.Int64Var(&f.replayBytes, "replay-bytes", d.ReplayBytes, "per-instance replay buffer in bytes")
	fs.StringVar(&f.replayDir, "replay-dir", "", "directory for the files holding older replay events, one unnamed file per instance (default: $TMPDIR, else /tmp); \""+replayInMemory+"\" keeps replay in the heap")
	fs.IntVar(&f.maxFrame, "max-frame", d.MaxFrameBytes, "largest line an agent may write to stdout, in bytes")
	fs.DurationVar(&f.stopGrace, "stop-grace", d.StopGrace, "time between SIGTERM and SIGKILL when stopping an agent")
	fs.DurationVar(&f.stdinWriteTimeout, "stdin-write-timeout", d.WriteTimeout, "give up a write to an agent's stdin (502) when the agent reads nothing for this long")
	fs.DurationVar(&f.streamWrite, "stream-write-timeout", h.StreamWriteTimeout, "drop an event stream whose reader takes nothing for this long")
	fs.BoolVar(&f.metricsPublic, "metrics-public", false, "serve GET /metrics without the bearer token even when --token is set")
	fs.StringVar(&f.agentsFile, "agents-file", "", "JSON file of operator-defined agents: {\"agents\":[{\"id\",\"command\",\"args\",\"env\"}]}")
	fs.StringVar(&f.runAs, "run-as", "", "run agents and processes as this user (name or uid), with its groups and HOME; API writes and agent installs become that user's (the daemon must be root; Linux)")
	fs.StringVar(&f.fsRoot, "fs-root", "", "confine /v1/fs and /v1/config to this directory (paths, links and tar entries cannot leave it)")
	fs.StringVar(&f.fsBackend, "fs", "os", "filesystem behind /v1/fs and /v1/config: os or memory")
	fs.Int64Var(&f.maxUpload, "max-upload", 0, "largest PUT /v1/fs/file or upload-batch body in bytes (0: no limit)")
	for _, name := range []string{"max-acp-body", "replay-bytes", "max-frame"} {
		setMin(fs, name, "1")
	}
	setMin(fs, "stdin-write-timeout", "1ns")
	setMin(fs, "stream-write-timeout", "1ns")
	f.fsLimits.register(fs)
	f.policy.register(fs)
	f.limits.register(fs)
	f.auth.register(fs)
	f.opencode.register(fs)
}

// applyEnv fills what comes from the environment when the flag is not
// given. The token is read here rather than used as the flag's default so
// that --help never prints it; after the re-exec that hid it from
// /proc/PID/environ and --token from /proc/PID/cmdline (hideToken), it
// comes from the descriptor the previous image handed over, as the flag's
// or the variable's it was.
func (f *serverFlags) applyEnv(fs *pflag.FlagSet) error {
	tok, fromFlag, handed, err := handedToken()
	if err != nil {
		return err
	}
	if !handed {
		tok = os.Getenv(tokenEnv)
	}
	if !fs.Changed("token") {
		f.token = tok
		f.tokenFromEnv = f.token != "" && !fromFlag
		f.tokenHidden = f.token != "" && fromFlag
	}
	return nil
}

// joinSet lists a set's members, sorted, separated by commas.
func joinSet(set map[string]bool) string {
	var out []string
	for k, ok := range set {
		if ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}
