package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
)

// newAPIACPCmd is "api acp post|stream|close|list": a terminal client of
// the ACP transport. Messages go out exactly as typed; answers and stream
// events are printed one JSON message per line.
func newAPIACPCmd() *cobra.Command {
	acp := &cobra.Command{Use: "acp", Short: "Talk to agents over the ACP HTTP transport"}
	acp.AddCommand(newACPPostCmd(), newACPStreamCmd(), newACPCloseCmd(), newACPListCmd())
	return acp
}

func newACPPostCmd() *cobra.Command {
	var af apiFlags
	var agent string
	cmd := &cobra.Command{
		Use:   "post <server_id> [MESSAGE]",
		Short: "Send ACP messages to a server id",
		Long: `Send one JSON-RPC message (MESSAGE), or one per line from stdin when
MESSAGE is not given, to the ACP server <server_id>. Answers are printed as
--format says (compact, one per line, unless stdout is a terminal); a
notification or an asynchronous request prints "202 Accepted" on stderr.
A stdin line longer than 64 MiB stops the command (exit 1) before it is
held whole.`,
		Example: `  sandbox-agent api acp post demo --agent mock '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}'`,
		Args:    argsBetween(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := af.client(c.Flags())
			if err != nil {
				return err
			}
			ctx, id := c.Context(), args[0]
			stdout, stderr := c.OutOrStdout(), c.ErrOrStderr()
			if len(args) > 1 {
				return postOne(ctx, client, &af, id, agent, []byte(args[1]), stdout, stderr)
			}
			// One message per line from stdin; the agent query only on the first.
			r := bufio.NewReaderSize(c.InOrStdin(), 64<<10)
			for {
				line, err := readLine(r, bridgeMaxLine)
				if msg := bytes.TrimSpace(line); len(msg) > 0 {
					if perr := postOne(ctx, client, &af, id, agent, msg, stdout, stderr); perr != nil {
						return perr
					}
					agent = ""
				}
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return err
				}
			}
		},
	}
	af.register(cmd.Flags())
	af.registerFormat(cmd.Flags())
	cmd.Flags().StringVar(&agent, "agent", "", "agent to start on the first POST to a new server id")
	return cmd
}

func newACPStreamCmd() *cobra.Command {
	var af apiFlags
	var lastID string
	var ids bool
	cmd := &cobra.Command{
		Use:   "stream <server_id>",
		Short: "Print a server id's event stream until interrupted",
		Long: `Print a server id's event stream until interrupted: each agent message as
the agent wrote it, one per line.`,
		Args: argsBetween(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			ctx, stdout := c.Context(), c.OutOrStdout()
			client, err := af.client(c.Flags())
			if err != nil {
				return err
			}
			err = client.StreamACP(ctx, args[0], lastID, func(ev httpclient.ACPEvent) error {
				if ids {
					_, err := fmt.Fprintf(stdout, "%s\t%s\n", ev.ID, ev.Data)
					return err
				}
				_, err := fmt.Fprintf(stdout, "%s\n", ev.Data)
				return err
			})
			// Ending a stream with Ctrl-C is the normal way out, not an error.
			if ctx.Err() != nil {
				return nil
			}
			return err
		},
	}
	af.register(cmd.Flags())
	cmd.Flags().StringVar(&lastID, "last-event-id", "", "resume the stream after this event id")
	cmd.Flags().BoolVar(&ids, "ids", false, "prefix each message with its event id and a tab")
	return cmd
}

func newACPCloseCmd() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{
		Use:   "close <server_id>",
		Short: "Stop a server id's agent and forget it",
		Args:  argsBetween(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := af.client(c.Flags())
			if err != nil {
				return err
			}
			return client.CloseACP(c.Context(), args[0])
		},
	}
	af.register(cmd.Flags())
	return cmd
}

func newACPListCmd() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the running ACP server ids",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var out json.RawMessage
			client, err := af.client(c.Flags())
			if err != nil {
				return err
			}
			if err := client.Do(c.Context(), "GET", "/v1/acp", nil, nil, &out); err != nil {
				return err
			}
			return af.printRaw(c.OutOrStdout(), out)
		},
	}
	af.register(cmd.Flags())
	af.registerFormat(cmd.Flags())
	return cmd
}

func postOne(ctx context.Context, c *httpclient.Client, af *apiFlags, id, agent string, msg []byte, stdout, stderr io.Writer) error {
	answer, err := c.PostACP(ctx, id, agent, msg)
	if err != nil {
		return err
	}
	if answer == nil {
		fmt.Fprintln(stderr, "202 Accepted")
		return nil
	}
	return af.printRaw(stdout, answer)
}

// readLine reads one line, with its line ending, holding at most max bytes
// of it: a longer line is an error (stdin may be anything, and the daemon
// takes at most --max-acp-body anyway).
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > max {
			return nil, fmt.Errorf("a stdin line longer than %d bytes", max)
		}
		line = append(line, chunk...)
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
}
