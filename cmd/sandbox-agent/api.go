package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
)

// newAPICmd is "sandbox-agent api": a terminal client of a running daemon.
func newAPICmd() *cobra.Command {
	api := &cobra.Command{
		Use:   "api",
		Short: "Talk to a running daemon",
	}
	agents := &cobra.Command{Use: "agents", Short: "List, inspect and install agents"}
	agents.AddCommand(newAPIAgentsListCmd(), newAPIAgentsGetCmd(), newAPIAgentsInstallCmd())
	api.AddCommand(agents, newAPIACPCmd())
	withClientErrorHint(api)
	return api
}

// withClientErrorHint wraps the RunE of c and every command below it so
// that a daemon nobody answers for (refused, unresolved, timed out while
// connecting), or one refusing the token, says what to do: a newcomer's
// first "api" call is often made before any daemon runs, or without its
// token.
func withClientErrorHint(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(c *cobra.Command, args []string) error {
			return clientErrorHint(run(c, args), "-t/--token")
		}
	}
	for _, sub := range c.Commands() {
		withClientErrorHint(sub)
	}
}

// clientErrorHint adds to a failure to reach the daemon how to start one
// or name another, and to a refused token how to give the daemon's
// (tokenFlag: the command's own flag for it); other errors are returned as
// they are.
func clientErrorHint(err error, tokenFlag string) error {
	var op *net.OpError
	var prob *httpclient.Problem
	switch {
	case errors.Is(err, httpclient.ErrDaemonUnreachable) || (errors.As(err, &op) && op.Op == "dial"):
		return fmt.Errorf("%w\nno daemon answers there: start one (\"sandbox-agent server\", or \"sandbox-agent daemon start\" to run it in the background), or give its URL with --endpoint or $SANDBOX_AGENT_ENDPOINT", err)
	case errors.As(err, &prob) && prob.Kind() == "token_invalid":
		return fmt.Errorf("%w\nthe daemon refuses the token sent (none, or not its own): set $SANDBOX_AGENT_TOKEN to the daemon's token (or give it with %s)", err, tokenFlag)
	}
	return err
}

// apiFlags are the flags every api command takes.
type apiFlags struct {
	endpoint, token string
	format          string
	router          routerFlags
}

const defaultEndpoint = "http://" + defaultHost + ":" + defaultPort

func (f *apiFlags) register(fs *pflag.FlagSet) {
	fs.StringVarP(&f.endpoint, "endpoint", "e", "", "URL of the daemon (default: $SANDBOX_AGENT_ENDPOINT, else "+defaultEndpoint+")")
	fs.StringVarP(&f.token, "token", "t", "", "bearer token to send (default: $SANDBOX_AGENT_TOKEN)")
	f.router.register(fs)
}

// registerFormat adds --format, for the commands that print JSON.
func (f *apiFlags) registerFormat(fs *pflag.FlagSet) {
	f.format = "auto"
	fs.Var(oneOf(&f.format, "auto", "pretty", "compact"), "format", "JSON output: pretty, compact (one line), or auto (pretty on a terminal, compact otherwise)")
}

// printJSON writes v as JSON in the style --format asks for.
func (f *apiFlags) printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return f.printRaw(w, b)
}

// printRaw writes a JSON document the daemon or an agent sent, in the
// style --format asks for. Only whitespace between tokens changes: strings
// and numbers keep their bytes.
func (f *apiFlags) printRaw(w io.Writer, doc []byte) error {
	var out bytes.Buffer
	var err error
	if f.format == "pretty" || f.format == "auto" && isTerminal(w) {
		err = json.Indent(&out, doc, "", "  ")
	} else {
		err = json.Compact(&out, doc)
	}
	if err != nil { // not JSON: shown as it came
		out.Reset()
		out.Write(bytes.TrimSpace(doc))
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

// client applies the environment defaults (read here, so --help never
// prints a token) and returns a client of the daemon.
func (f *apiFlags) client(fs *pflag.FlagSet) (*httpclient.Client, error) {
	if !fs.Changed("endpoint") {
		if f.endpoint = os.Getenv("SANDBOX_AGENT_ENDPOINT"); f.endpoint == "" {
			f.endpoint = defaultEndpoint
		}
	}
	from := "--token"
	if !fs.Changed("token") {
		f.token, from = os.Getenv(tokenEnv), "$"+tokenEnv
	}
	if err := checkToken(f.token, from); err != nil {
		return nil, err
	}
	c := &httpclient.Client{BaseURL: f.endpoint, Token: f.token}
	return c, f.router.apply(c)
}

func newAPIAgentsListCmd() *cobra.Command {
	var af apiFlags
	var config, noCache bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the agents the daemon knows",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			client, err := af.client(c.Flags())
			if err != nil {
				return err
			}
			agents, err := client.ListAgents(c.Context(), config, noCache)
			if err != nil {
				return err
			}
			return af.printJSON(c.OutOrStdout(), map[string]any{"agents": agents})
		},
	}
	af.register(cmd.Flags())
	af.registerFormat(cmd.Flags())
	cmd.Flags().BoolVar(&config, "config", false, "include version, path and configOptions")
	cmd.Flags().BoolVar(&noCache, "no-cache", false, "probe versions again")
	return cmd
}

func newAPIAgentsGetCmd() *cobra.Command {
	var af apiFlags
	var config, noCache bool
	cmd := &cobra.Command{
		Use:   "get <agent>",
		Short: "Show one agent",
		Args:  argsBetween(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := af.client(c.Flags())
			if err != nil {
				return err
			}
			out, err := client.Agent(c.Context(), args[0], config, noCache)
			if err != nil {
				return err
			}
			return af.printJSON(c.OutOrStdout(), out)
		},
	}
	af.register(cmd.Flags())
	af.registerFormat(cmd.Flags())
	cmd.Flags().BoolVar(&config, "config", false, "include version, path and configOptions")
	cmd.Flags().BoolVar(&noCache, "no-cache", false, "probe versions again")
	return cmd
}

func newAPIAgentsInstallCmd() *cobra.Command {
	var af apiFlags
	var inst installFlags
	cmd := &cobra.Command{
		Use:   "install <agent>",
		Short: "Install an agent on the daemon's host",
		Args:  argsBetween(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := af.client(c.Flags())
			if err != nil {
				return err
			}
			fmt.Fprintf(c.ErrOrStderr(), "installing %s on %s ...\n", args[0], af.endpoint)
			out, err := client.InstallAgent(c.Context(), args[0], inst.opts)
			if err != nil {
				return err
			}
			return af.printJSON(c.OutOrStdout(), out)
		},
	}
	af.register(cmd.Flags())
	af.registerFormat(cmd.Flags())
	inst.register(cmd.Flags())
	return cmd
}
