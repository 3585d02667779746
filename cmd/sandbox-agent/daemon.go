package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/daemon"
	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
)

func init() { extraCommands = append(extraCommands, newDaemonCmd) }

// Exit statuses of `daemon status`, for scripts (1 and 2 are every
// command's: an error, a usage mistake).
const (
	statusNotRunning = 3 // no daemon recorded at the address, or a stale pid file
	statusUnhealthy  = 4 // the daemon's process runs but /v1/health does not answer ok
)

// exitStatus is an error that is only an exit status: what it says is
// already printed.
type exitStatus int

func (e exitStatus) Error() string { return "exit status " + strconv.Itoa(int(e)) }

func newDaemonCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "daemon",
		Short: "Run the server in the background: start, stop, status",
		Long: `Run "sandbox-agent server" in the background, one per host and port.

start launches it detached (its own session; stdin /dev/null; stdout and
stderr to a log file) and returns once GET /v1/health answers. Its pid file,
record and log live under $XDG_STATE_HOME/sandbox-agent/daemon (default
~/.local/state/sandbox-agent/daemon) as daemon-<host>-<port>.{pid,json,log};
the previous run's log is kept as .log.1. A pid file whose process is gone, or
whose pid now belongs to another process (the record holds the process's
start time), is not trusted: nothing is signalled through it.`,
	}
	c.AddCommand(newDaemonStartCmd(), newDaemonStopCmd(), newDaemonStatusCmd())
	return c
}

// daemonFlags are the address and token flags of the daemon commands.
type daemonFlags struct {
	host, port, token, tokenFile string
	noToken                      bool
	startLimit, stopLimit        time.Duration // 0: the defaults
}

func (f *daemonFlags) register(fs *pflag.FlagSet) {
	fs.SortFlags = false
	fs.StringVarP(&f.host, "host", "H", defaultHost, "address the daemon listens on")
	fs.StringVarP(&f.port, "port", "p", defaultPort, "port the daemon listens on")
	fs.StringVarP(&f.token, "token", "t", "", "the bearer token (default: $SANDBOX_AGENT_TOKEN); start gives it to the daemon in its environment, never on its command line; stop needs none")
	fs.StringVar(&f.tokenFile, "token-file", "", "read the bearer tokens from `FILE` (see server --token-file); the health check sends the first")
	fs.BoolVarP(&f.noToken, "no-token", "n", false, "no token, even if $SANDBOX_AGENT_TOKEN is set")
}

// resolveToken applies the environment default (read here, so --help never
// prints it) and returns the token the health check sends and where it
// came from ("flag", "env", "file" or "").
func (f *daemonFlags) resolveToken(fs *pflag.FlagSet) (token, source string, err error) {
	switch {
	case f.noToken && (f.token != "" || f.tokenFile != ""):
		return "", "", usagef("--no-token cannot be combined with --token or --token-file")
	case f.token != "" && f.tokenFile != "":
		return "", "", usagef("--token and --token-file cannot be combined; put every token in the file")
	case f.noToken:
		return "", "", nil
	case f.tokenFile != "":
		list, _, err := readTokenFile(context.Background(), f.tokenFile)
		if err != nil {
			return "", "", err
		}
		if len(list) == 0 {
			return "", "", fmt.Errorf("--token-file %s holds no token", f.tokenFile)
		}
		return list[0], "file", nil
	case fs.Changed("token"):
		return f.token, "flag", checkToken(f.token, "--token")
	}
	if t := os.Getenv(tokenEnv); t != "" {
		return t, "env", checkToken(t, "$"+tokenEnv)
	}
	return "", "", nil
}

// daemonFor builds the daemon of the flags' address. The token goes to the
// health check; start also hands it to the daemon (tokenSource: "flag" or
// "env" through its environment, "file" as --token-file).
func (f *daemonFlags) daemonFor(progress io.Writer, token, tokenSource string) (*daemon.Daemon, error) {
	port, err := strconv.Atoi(f.port)
	if err != nil || port < 1 || port > 65535 {
		return nil, usagef("--port must be 1 to 65535 (a background daemon needs a fixed port), got %q", f.port)
	}
	home := homeDir()
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	args := []string{"server", "--host", f.host, "--port", f.port}
	env := withoutEnv(os.Environ(), tokenEnv)
	switch tokenSource {
	case "flag", "env":
		env = append(env, tokenEnv+"="+token)
	case "file":
		abs, err := filepath.Abs(f.tokenFile)
		if err != nil {
			return nil, err
		}
		args = append(args, "--token-file", abs)
	}
	url := "http://" + net.JoinHostPort(loopbackFor(f.host), f.port)
	client := &httpclient.Client{BaseURL: url, Token: token}
	return daemon.New(daemon.Config{
		StateDir:   daemon.StateDir(os.Getenv, home),
		Host:       f.host,
		Port:       port,
		Version:    version,
		Exe:        exe,
		Args:       args,
		Env:        env,
		Dir:        home,
		Health:     healthCheck(client),
		Progress:   progress,
		StartLimit: f.startLimit,
		StopLimit:  f.stopLimit,
	})
}

// loopbackFor is where a wildcard listener is reached.
func loopbackFor(host string) string {
	switch host {
	case "", "0.0.0.0":
		return "127.0.0.1"
	case "::", "[::]":
		return "::1"
	}
	return host
}

// healthCheck is GET /v1/health; a 401 or 403 means the daemon is up but
// wants another token (daemon.ErrUnauthorized).
func healthCheck(c *httpclient.Client) func(context.Context) error {
	return func(ctx context.Context) error {
		err := c.Health(ctx)
		var p *httpclient.Problem
		if errors.As(err, &p) && (p.Status == 401 || p.Status == 403) {
			return fmt.Errorf("%w: %d", daemon.ErrUnauthorized, p.Status)
		}
		return err
	}
}

func withoutEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

func newDaemonStartCmd() *cobra.Command {
	var f daemonFlags
	var upgrade bool
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Start the server in the background (no-op while one answers)",
		Long: `Start "sandbox-agent server --host H --port P" in the background and return
once GET /v1/health answers (progress on stderr; the result on stdout). While a
daemon started here answers at that address, start does nothing and says so
(exit status 0), whatever its version; with --upgrade, a daemon of another
version, or one that does not answer, is stopped and replaced.

It fails (exit status 1, with the end of the daemon's log) when the address is
taken by another process, or the daemon exits or does not answer within
--timeout (it is then stopped).

The token (--token, $SANDBOX_AGENT_TOKEN) reaches the daemon through its
environment, --token-file as --token-file: never on its command line, where
every local user can read it.`,
		Example: `  sandbox-agent daemon start
  SANDBOX_AGENT_TOKEN="$(openssl rand -hex 24)" sandbox-agent daemon start --port 3000
  sandbox-agent daemon start --upgrade`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			token, source, err := f.resolveToken(c.Flags())
			if err != nil {
				return err
			}
			d, err := f.daemonFor(c.ErrOrStderr(), token, source)
			if err != nil {
				return err
			}
			if ip := net.ParseIP(loopbackFor(f.host)); (ip == nil || !ip.IsLoopback()) && token == "" {
				fmt.Fprintf(c.ErrOrStderr(), "warning: %s is reachable from the network and no token is set: anyone who can reach it can run agents as this user. Set $%s or --token-file.\n", f.host, tokenEnv)
			}
			// The daemon gets stdin, stdout and stderr of its own, but
			// Go's exec passes on any descriptor this process inherited
			// without close-on-exec (a harness's pipe, a shell's 3>file):
			// the daemon would hold it for its whole life, and whoever
			// waits for EOF on it, for ever.
			closeInheritedOnExec()
			res, err := d.Start(c.Context(), upgrade)
			if res.RemovedStale != "" {
				fmt.Fprintf(c.ErrOrStderr(), "removed a stale pid file (%s)\n", res.RemovedStale)
			}
			if res.Old != nil {
				how := "stopped"
				if res.Killed {
					how = "killed (it did not exit on SIGTERM)"
				}
				fmt.Fprintf(c.ErrOrStderr(), "the daemon of version %s (pid %d) was %s\n", res.Old.Version, res.Old.PID, how)
			}
			if err != nil {
				return err
			}
			r, out := res.State.Record, c.OutOrStdout()
			switch res.Outcome {
			case daemon.AlreadyRunning:
				fmt.Fprintf(out, "daemon already running: pid %d, %s, version %s\n", r.PID, r.URL, r.Version)
				if r.Version != version {
					fmt.Fprintf(c.ErrOrStderr(), "it is version %s, this is %s: `sandbox-agent daemon start --upgrade` replaces it\n", r.Version, version)
				}
				if res.State.Health != nil {
					fmt.Fprintf(c.ErrOrStderr(), "health: %v\n", res.State.Health)
				}
			case daemon.Replaced:
				fmt.Fprintf(out, "daemon upgraded: pid %d, %s, version %s (was %s)\n", r.PID, r.URL, r.Version, res.Old.Version)
			default:
				fmt.Fprintf(out, "daemon started: pid %d, %s, version %s\n", r.PID, r.URL, r.Version)
			}
			return nil
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().BoolVar(&upgrade, "upgrade", false, "replace a running daemon of another version (or one that does not answer)")
	cmd.Flags().DurationVar(&f.startLimit, "timeout", daemon.DefaultStartLimit, "how long to wait for the daemon to answer")
	return cmd
}

func newDaemonStopCmd() *cobra.Command {
	var f daemonFlags
	cmd := &cobra.Command{
		Use:   "stop",
		Short: "Stop the background server",
		Long: `Stop the daemon started at this address: SIGTERM (it stops its agents and
ends), then, if it has not exited within --timeout, SIGKILL to its process
group; the pid file is removed once it is gone (interrupted before that, it
sends no SIGKILL: the daemon goes on shutting down). Nothing running there is
no error (exit status 0). A stale pid file (its process gone, or its pid now
another process's) is removed without signalling anything.`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			d, err := f.daemonFor(c.ErrOrStderr(), "", "")
			if err != nil {
				return err
			}
			res, err := d.Stop(c.Context())
			if res.RemovedStale != "" {
				fmt.Fprintf(c.ErrOrStderr(), "removed a stale pid file (%s)\n", res.RemovedStale)
			}
			if err != nil {
				return err
			}
			out := c.OutOrStdout()
			switch {
			case res.Outcome == daemon.NotRunning:
				fmt.Fprintf(out, "daemon not running at %s\n", d.URL())
			case res.Killed:
				fmt.Fprintf(out, "daemon killed: pid %d did not exit within %s of SIGTERM\n", res.Old.PID, f.stopLimit)
			default:
				fmt.Fprintf(out, "daemon stopped: pid %d\n", res.Old.PID)
			}
			return nil
		},
	}
	f.register(cmd.Flags()) // the token flags too, as the reference accepts them
	cmd.Flags().DurationVar(&f.stopLimit, "timeout", daemon.DefaultStopLimit, "how long to wait after SIGTERM before SIGKILL")
	return cmd
}

func newDaemonStatusCmd() *cobra.Command {
	var f daemonFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the background server's pid, URL, version and health",
		Long: `Show the daemon at this address as "key: value" lines (status, pid, url,
version, health, log). Exit status: 0 running and healthy; 3 not running (no
pid file, or a stale one: its process gone or its pid now another process's);
4 running but GET /v1/health does not answer ok (including a 401 when the
token given is not the daemon's); 1 status could not be read. status changes
nothing (a stale pid file is removed by the next start or stop).`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			token, _, err := f.resolveToken(c.Flags())
			if err != nil {
				return err
			}
			d, err := f.daemonFor(c.ErrOrStderr(), token, "")
			if err != nil {
				return err
			}
			st, err := d.Status(c.Context())
			if err != nil {
				return err
			}
			return printDaemonStatus(c.OutOrStdout(), d, st, f.host, f.port)
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// printDaemonStatus prints st as "key: value" lines. Not running, a note
// says what to do: start one, or, when something else answers at the
// address (a "sandbox-agent server" in a terminal, which status cannot
// see), that it is not this command's to report or stop.
func printDaemonStatus(w io.Writer, d *daemon.Daemon, st daemon.State, host, port string) error {
	if !st.Running {
		fmt.Fprintf(w, "status: not running\nurl: %s\n", d.URL())
		if st.Stale != "" {
			fmt.Fprintf(w, "stale: %s (pid file %s)\n", st.Stale, d.Files().Pid)
		}
		if u, err := url.Parse(d.URL()); err == nil && listening(u.Host) {
			fmt.Fprintf(w, "note: something else listens at %s (a \"sandbox-agent server\" run in a terminal?); daemon status and stop see only daemons \"sandbox-agent daemon start\" started\n", d.URL())
		} else {
			fmt.Fprintf(w, "note: \"sandbox-agent daemon start --host %s --port %s\" starts one\n", host, port)
		}
		return exitStatus(statusNotRunning)
	}
	r := st.Record
	health := "ok"
	if st.Health != nil {
		health = st.Health.Error()
	}
	fmt.Fprintf(w, "status: running\npid: %d\nurl: %s\nversion: %s\nhealth: %s\nlog: %s\n", r.PID, r.URL, r.Version, health, r.Log)
	if r.Version != version {
		fmt.Fprintf(w, "note: this is version %s; `sandbox-agent daemon start --upgrade` replaces it\n", version)
	}
	if st.Health != nil {
		return exitStatus(statusUnhealthy)
	}
	return nil
}

// listening reports whether something accepts connections at addr.
func listening(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}
