package main

import (
	"encoding/json"
	"fmt"
	"io"
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
	return api
}

// apiFlags are the flags every api command takes.
type apiFlags struct {
	endpoint, token string
}

const defaultEndpoint = "http://" + defaultHost + ":" + defaultPort

func (f *apiFlags) register(fs *pflag.FlagSet) {
	fs.StringVarP(&f.endpoint, "endpoint", "e", "", "URL of the daemon (default: $SANDBOX_AGENT_ENDPOINT, else "+defaultEndpoint+")")
	fs.StringVarP(&f.token, "token", "t", "", "bearer token to send (default: $SANDBOX_AGENT_TOKEN)")
}

// client applies the environment defaults (read here, so --help never
// prints a token) and returns a client of the daemon.
func (f *apiFlags) client(fs *pflag.FlagSet) *httpclient.Client {
	if !fs.Changed("endpoint") {
		if f.endpoint = os.Getenv("SANDBOX_AGENT_ENDPOINT"); f.endpoint == "" {
			f.endpoint = defaultEndpoint
		}
	}
	if !fs.Changed("token") {
		f.token = os.Getenv("SANDBOX_AGENT_TOKEN")
	}
	return &httpclient.Client{BaseURL: f.endpoint, Token: f.token}
}

func newAPIAgentsListCmd() *cobra.Command {
	var af apiFlags
	var config, noCache bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the agents the daemon knows",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			agents, err := af.client(c.Flags()).ListAgents(c.Context(), config, noCache)
			if err != nil {
				return err
			}
			return printJSON(c.OutOrStdout(), map[string]any{"agents": agents})
		},
	}
	af.register(cmd.Flags())
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
			out, err := af.client(c.Flags()).Agent(c.Context(), args[0], config, noCache)
			if err != nil {
				return err
			}
			return printJSON(c.OutOrStdout(), out)
		},
	}
	af.register(cmd.Flags())
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
			client := af.client(c.Flags())
			fmt.Fprintf(c.ErrOrStderr(), "installing %s on %s ...\n", args[0], af.endpoint)
			out, err := client.InstallAgent(c.Context(), args[0], inst.opts)
			if err != nil {
				return err
			}
			return printJSON(c.OutOrStdout(), out)
		},
	}
	af.register(cmd.Flags())
	inst.register(cmd.Flags())
	return cmd
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
