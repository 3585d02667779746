package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
)

// runAPIACP is "api acp post|stream|close|list": a terminal client of the
// ACP transport. Messages go out exactly as typed; answers and stream
// events are printed one JSON message per line.
func runAPIACP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, apiUsage)
		return usagef("api acp: post, stream, close or list")
	}
	cmd := args[0]
	fs := flag.NewFlagSet("api acp "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var af apiFlags
	af.register(fs)
	agent := fs.String("agent", "", "agent to start on the first POST to a new server id")
	lastID := fs.String("last-event-id", "", "resume the stream after this event id")
	ids := fs.Bool("ids", false, "prefix each streamed message with its event id and a tab")
	if err := fs.Parse(reorderFlags(args[1:])); err != nil {
		return usagef("%v", err)
	}
	c := af.client()
	if cmd == "list" {
		var out json.RawMessage
		if err := c.Do(ctx, "GET", "/v1/acp", nil, nil, &out); err != nil {
			return err
		}
		_, err := fmt.Fprintf(stdout, "%s\n", bytes.TrimSpace(out))
		return err
	}
	if fs.NArg() < 1 {
		return usagef("api acp %s: missing <server_id>", cmd)
	}
	id := fs.Arg(0)
	switch cmd {
	case "post":
		if fs.NArg() > 1 {
			return postOne(ctx, c, id, *agent, []byte(fs.Arg(1)), stdout, stderr)
		}
		// One message per line from stdin; the agent query only on the first.
		r := bufio.NewReaderSize(stdin, 64<<10)
		for {
			line, err := r.ReadBytes('\n')
			if msg := bytes.TrimSpace(line); len(msg) > 0 {
				if perr := postOne(ctx, c, id, *agent, msg, stdout, stderr); perr != nil {
					return perr
				}
				*agent = ""
			}
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	case "stream":
		// Ending a stream with Ctrl-C is the normal way out, not an error.
		err := c.StreamACP(ctx, id, *lastID, func(ev httpclient.ACPEvent) error {
			if *ids {
				_, err := fmt.Fprintf(stdout, "%s\t%s\n", ev.ID, ev.Data)
				return err
			}
			_, err := fmt.Fprintf(stdout, "%s\n", ev.Data)
			return err
		})
		if ctx.Err() != nil {
			return nil
		}
		return err
	case "close":
		return c.CloseACP(ctx, id)
	}
	return usagef("api acp: unknown command %q (post, stream, close, list)", cmd)
}

func postOne(ctx context.Context, c *httpclient.Client, id, agent string, msg []byte, stdout, stderr io.Writer) error {
	answer, err := c.PostACP(ctx, id, agent, msg)
	if err != nil {
		return err
	}
	if answer == nil {
		fmt.Fprintln(stderr, "202 Accepted")
		return nil
	}
	_, err = fmt.Fprintf(stdout, "%s\n", bytes.TrimSpace(answer))
	return err
}

// reorderFlags moves flags before positional arguments, so both
// "post s1 --agent mock" and "post --agent mock s1" work. A JSON message
// starting with "{" is never taken for a flag.
func reorderFlags(args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) > 1 && a[0] == '-' {
			flags = append(flags, a)
			if !bytes.Contains([]byte(a), []byte("=")) && i+1 < len(args) && takesValue(a) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}

func takesValue(flagName string) bool {
	switch flagName {
	case "-ids", "--ids", "-h", "--help":
		return false
	}
	return true
}
