package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func init() { extraCommands = append(extraCommands, newOpenCodeCmd) }

// openCodeCmdFlags are the options of "sandbox-agent opencode".
type openCodeCmdFlags struct {
	host, port, token string
	bin               string
	sessionTitle      string
	yolo              bool
}

// newOpenCodeCmd is "sandbox-agent opencode": OpenCode's TUI on this
// daemon's agents. It reuses the daemon answering at --host/--port, or
// starts one in the background, then runs "opencode attach" against its
// /opencode (docs/opencode.md).
func newOpenCodeCmd() *cobra.Command {
	f := &openCodeCmdFlags{}
	cmd := &cobra.Command{
		Use:   "opencode [flags] [-- opencode attach arguments]",
		Short: "Run OpenCode's TUI on this daemon's agents (starts the daemon if none runs)",
		Long: `Run "opencode attach" against the daemon's OpenCode API at /opencode. The
daemon answering at --host/--port is reused; if none answers, one is
started in the background (it keeps running; its log is
$XDG_STATE_HOME/sandbox-agent/daemon/daemon-HOST-PORT.log). The token, if any, is
given to OpenCode as its server password (OPENCODE_SERVER_PASSWORD), never
on a command line. OpenCode must be on PATH (npm i -g opencode-ai) or named
with --opencode-bin.`,
		Example: "  sandbox-agent opencode\n  sandbox-agent opencode --port 2468 -- --continue",
		Args:    cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if !c.Flags().Changed("token") {
				f.token = os.Getenv("SANDBOX_AGENT_TOKEN")
			}
			return runOpenCode(c.Context(), f, args, c.ErrOrStderr())
		},
	}
	cmd.Annotations = map[string]string{anyArgs: "arguments after -- go to opencode attach"}
	fs := cmd.Flags()
	fs.StringVarP(&f.host, "host", "H", defaultHost, "daemon host")
	fs.StringVarP(&f.port, "port", "p", defaultPort, "daemon port")
	fs.StringVarP(&f.token, "token", "t", "", "the daemon's token (default: $SANDBOX_AGENT_TOKEN); a daemon started here requires it")
	fs.StringVar(&f.bin, "opencode-bin", "opencode", "the OpenCode CLI to run")
	fs.StringVar(&f.sessionTitle, "session-title", "", "accepted for compatibility with the reference; no effect")
	fs.BoolVar(&f.yolo, "yolo", false, "accepted for compatibility with the reference; no effect")
	return cmd
}

func runOpenCode(ctx context.Context, f *openCodeCmdFlags, args []string, stderr io.Writer) error {
	bin, err := exec.LookPath(f.bin)
	if err != nil {
		return fmt.Errorf("%s is not on PATH: install OpenCode (npm i -g opencode-ai, or https://opencode.ai) or name it with --opencode-bin", f.bin)
	}
	base := "http://" + net.JoinHostPort(f.host, f.port)
	if err := ensureDaemon(ctx, base, f, stderr); err != nil {
		return err
	}
	attach := exec.Command(bin, append([]string{"attach", base + "/opencode"}, args...)...)
	attach.Stdin, attach.Stdout, attach.Stderr = os.Stdin, os.Stdout, os.Stderr
	attach.Env = openCodeEnv(os.Environ(), f.token)
	if err := attach.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("opencode exited with status %d", ee.ExitCode())
		}
		return fmt.Errorf("run %s: %w", bin, err)
	}
	return nil
}

// openCodeEnv is the environment OpenCode runs in: the token as its
// server password, and its models.dev fetch off unless asked for (the
// models it offers come from the daemon; in a sandbox without internet
// the fetch would only wait on DNS).
func openCodeEnv(env []string, token string) []string {
	has := func(name string) bool {
		for _, kv := range env {
			if strings.HasPrefix(kv, name+"=") {
				return true
			}
		}
		return false
	}
	if !has("OPENCODE_DISABLE_MODELS_FETCH") {
		env = append(env, "OPENCODE_DISABLE_MODELS_FETCH=1")
	}
	if token != "" {
		env = append(env, "OPENCODE_SERVER_PASSWORD="+token)
	}
	return env
}

// ensureDaemon makes sure a daemon serving /opencode answers at base: the
// one running, or one started here in the background (its own session,
// so it outlives this command and the terminal).
func ensureDaemon(ctx context.Context, base string, f *openCodeCmdFlags, stderr io.Writer) error {
	status, err := probe(ctx, base+"/v1/health", f.token)
	switch {
	case err == nil && status == http.StatusOK:
	case err == nil && status == http.StatusUnauthorized:
		return fmt.Errorf("the daemon at %s refuses the token: give its token with --token or $SANDBOX_AGENT_TOKEN", base)
	case err == nil:
		return fmt.Errorf("%s answers %d to /v1/health: is it a sandbox-agent daemon?", base, status)
	default:
		if err := startDaemon(ctx, f, stderr); err != nil {
			return err
		}
	}
	status, err = probe(ctx, base+"/opencode/global/health", f.token)
	if err != nil || status != http.StatusOK {
		return fmt.Errorf("the daemon at %s does not serve /opencode (started with --no-opencode?)", base)
	}
	return nil
}

// probe GETs url with the token; err is a failure to connect.
func probe(ctx context.Context, url, token string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// startDaemon starts the daemon in the background as "sandbox-agent
// daemon start" does (detached, its pid file and log under the XDG state
// directory, the token in its environment), and waits for it to answer.
func startDaemon(ctx context.Context, f *openCodeCmdFlags, stderr io.Writer) error {
	source := ""
	if f.token != "" {
		source = "flag"
	}
	df := &daemonFlags{host: f.host, port: f.port}
	d, err := df.daemonFor(stderr, f.token, source)
	if err != nil {
		return err
	}
	res, err := d.Start(ctx, false)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "sandbox-agent: started a daemon at %s (pid %d, log %s; stop it with sandbox-agent daemon stop --host %s --port %s)\n",
		d.URL(), res.State.Record.PID, d.Files().Log, f.host, f.port)
	return nil
}
