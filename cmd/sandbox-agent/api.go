package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
)

const apiUsage = `usage: sandbox-agent api <group> <command> [flags]

  api agents list [--config] [--no-cache]
  api agents get <agent> [--config] [--no-cache]
  api agents install <agent> [-r|--reinstall] [--agent-version V] [--agent-process-version V]
  api acp post <server_id> [--agent A] [MESSAGE]   (no MESSAGE: one per line from stdin)
  api acp stream <server_id> [--last-event-id N] [--ids]
  api acp close <server_id>
  api acp list

Common flags: --endpoint URL (default $SANDBOX_AGENT_ENDPOINT or
http://127.0.0.1:2468), --token T (default $SANDBOX_AGENT_TOKEN).
`

// runAPI talks to a running daemon. Each group dispatches on its first
// argument.
func runAPI(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, apiUsage)
		return usagef("")
	}
	switch args[0] {
	case "agents":
		return runAPIAgents(ctx, args[1:], stdout, stderr)
	case "acp":
		return runAPIACP(ctx, args[1:], stdin, stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, apiUsage)
		return nil
	}
	fmt.Fprint(stderr, apiUsage)
	return usagef("api: unknown group %q", args[0])
}

// apiFlags are the flags every api command takes.
type apiFlags struct {
	endpoint, token string
}

func (f *apiFlags) register(fs *flag.FlagSet) {
	endpoint := os.Getenv("SANDBOX_AGENT_ENDPOINT")
	if endpoint == "" {
		endpoint = "http://127.0.0.1:2468"
	}
	fs.StringVar(&f.endpoint, "endpoint", endpoint, "daemon URL")
	fs.StringVar(&f.endpoint, "e", endpoint, "alias of --endpoint")
	fs.StringVar(&f.token, "token", os.Getenv("SANDBOX_AGENT_TOKEN"), "bearer token")
	fs.StringVar(&f.token, "t", os.Getenv("SANDBOX_AGENT_TOKEN"), "alias of --token")
}

func (f *apiFlags) client() *httpclient.Client {
	return &httpclient.Client{BaseURL: f.endpoint, Token: f.token}
}

func runAPIAgents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, apiUsage)
		return usagef("api agents: list, get or install")
	}
	cmd := args[0]
	fs := flag.NewFlagSet("api agents "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var af apiFlags
	af.register(fs)
	var config, noCache bool
	var inst installFlags
	switch cmd {
	case "list", "get":
		fs.BoolVar(&config, "config", false, "include version, path and configOptions")
		fs.BoolVar(&noCache, "no-cache", false, "probe versions again")
	case "install":
		inst.register(fs)
	default:
		fmt.Fprint(stderr, apiUsage)
		return usagef("api agents: unknown command %q", cmd)
	}
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usagef("%v", err)
	}
	c := af.client()
	var out any
	switch cmd {
	case "list":
		if len(pos) != 0 {
			return usagef("api agents list takes no arguments")
		}
		agents, err := c.ListAgents(ctx, config, noCache)
		if err != nil {
			return err
		}
		out = map[string]any{"agents": agents}
	case "get":
		if len(pos) != 1 {
			return usagef("api agents get needs one agent id")
		}
		if out, err = c.Agent(ctx, pos[0], config, noCache); err != nil {
			return err
		}
	case "install":
		if len(pos) != 1 {
			return usagef("api agents install needs one agent id")
		}
		fmt.Fprintf(stderr, "installing %s on %s ...\n", pos[0], af.endpoint)
		if out, err = c.InstallAgent(ctx, pos[0], inst.opts); err != nil {
			return err
		}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
