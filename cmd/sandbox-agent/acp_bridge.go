package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
)

const acpBridgeLong = `Speak ACP on stdio (one JSON-RPC message per line) for an agent that runs
behind a sandbox-agent daemon: editors and other ACP clients spawn this
command as their agent. stdout carries protocol only; logs go to stderr.

Without --server-id a fresh instance is created and deleted at exit; with
one, the command attaches to that instance (creating it if needed) and
leaves it running unless --delete-on-exit.

The token is read from --token-file or $SANDBOX_AGENT_TOKEN, never from the
command line, where other users of the machine could read it.

stdin closed or SIGTERM: what is in flight is finished, the owned instance
deleted, exit 0. The daemon unreachable for --reconnect-timeout, or the
instance gone: pending requests get JSON-RPC errors, exit 1.`

// bridgeConfig is the parsed command line of "sandbox-agent acp".
type bridgeConfig struct {
	endpoint, agent, serverID, tokenFile string
	deleteOnExit                         bool
	reconnectTimeout                     time.Duration
	logLevel, logFormat                  string
}

func init() { extraCommands = append(extraCommands, newACPBridgeCmd) }

// newACPBridgeCmd is "sandbox-agent acp": see acpBridgeLong.
func newACPBridgeCmd() *cobra.Command {
	var cfg bridgeConfig
	cmd := &cobra.Command{
		Use:   "acp --agent AGENT [--endpoint URL] [--server-id ID]",
		Short: "Speak ACP on stdio for an agent running behind a daemon (for editors)",
		Long:  acpBridgeLong,
		Example: `  sandbox-agent acp --endpoint http://sandbox:2468 --agent claude
  SANDBOX_AGENT_TOKEN=... sandbox-agent acp --agent codex --server-id my-project`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fs := c.Flags()
			if !fs.Changed("endpoint") {
				if cfg.endpoint = os.Getenv("SANDBOX_AGENT_ENDPOINT"); cfg.endpoint == "" {
					cfg.endpoint = defaultEndpoint
				}
			}
			if cfg.agent == "" && cfg.serverID == "" {
				return usagef("--agent is required (or --server-id of an existing instance)")
			}
			if cfg.reconnectTimeout <= 0 {
				return usagef("--reconnect-timeout must be positive")
			}
			token := os.Getenv("SANDBOX_AGENT_TOKEN")
			if cfg.tokenFile != "" {
				b, err := os.ReadFile(cfg.tokenFile)
				if err != nil {
					return fmt.Errorf("--token-file: %w", err)
				}
				token = strings.TrimSpace(string(b))
			}
			log, err := newLogger(c.ErrOrStderr(), cfg.logFormat, cfg.logLevel)
			if err != nil {
				return usagef("%v", err)
			}
			client := &httpclient.Client{BaseURL: cfg.endpoint, Token: token}
			stdin, stdout, polled := pollableStdio(c.InOrStdin(), c.OutOrStdout())
			if polled && os.Getenv("GOMAXPROCS") == "" {
				// One thread: with stdin and stdout polled, nothing here
				// blocks a thread, and a goroutine woken per message
				// (the POST's answer reader, the stream's reader) runs
				// where it was woken instead of being handed to another
				// CPU. A bridge relays one session; it has no use for
				// parallelism.
				runtime.GOMAXPROCS(1)
			}
			return bridgeACP(c.Context(), client, cfg, stdin, stdout, log)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&cfg.endpoint, "endpoint", "e", "", "URL of the daemon (default: $SANDBOX_AGENT_ENDPOINT, else "+defaultEndpoint+")")
	fs.StringVar(&cfg.agent, "agent", "", "agent to run (required unless --server-id names an existing instance)")
	fs.StringVar(&cfg.serverID, "server-id", "", "attach to (or create) this instance; default: a fresh one, deleted at exit")
	fs.StringVar(&cfg.tokenFile, "token-file", "", "file holding the bearer token (default: $SANDBOX_AGENT_TOKEN)")
	fs.BoolVar(&cfg.deleteOnExit, "delete-on-exit", false, "delete the --server-id instance at exit too")
	fs.DurationVar(&cfg.reconnectTimeout, "reconnect-timeout", 30*time.Second, "give up after the daemon was unreachable this long")
	fs.StringVar(&cfg.logLevel, "log-level", "info", "debug, info, warn or error (logs go to stderr)")
	fs.StringVar(&cfg.logFormat, "log-format", "text", "text, color or json")
	return cmd
}

// bridgeACP copies stdin lines to the instance and the agent's messages to
// stdout until stdin ends or ctx is done (exit 0, the owned instance
// deleted), or the connection fails (the error, exit 1).
func bridgeACP(ctx context.Context, c *httpclient.Client, cfg bridgeConfig, stdin io.Reader, stdout io.Writer, log *slog.Logger) error {
	owned := cfg.serverID == "" || cfg.deleteOnExit
	id := cfg.serverID
	if id == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = "acp-" + hex.EncodeToString(b[:])
	}
	conn, err := c.DialACP(ctx, id, cfg.agent, &httpclient.ACPOptions{
		ReconnectTimeout: cfg.reconnectTimeout,
		DeleteOnClose:    owned,
		Logger:           log,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil // SIGTERM while waiting for the daemon: nothing to finish
		}
		return fmt.Errorf("acp: %w", err)
	}
	log.Info("acp bridge connected", "endpoint", cfg.endpoint, "server_id", id, "agent", cfg.agent, "owned", owned)

	outDone := make(chan error, 1)
	go func() {
		_, err := io.Copy(stdout, conn)
		outDone <- err
	}()
	inDone := make(chan error, 1)
	go func() {
		_, err := io.Copy(conn, stdin)
		inDone <- err
	}()

	var failure error
	outOver := false
	finish := 10 * time.Second // stdin closed: what was written gets its answers
	select {
	case err := <-inDone:
		switch {
		case conn.Err() != nil:
			failure = conn.Err()
		case err != nil:
			// stdin unreadable, or a line past the size limit: the
			// session cannot go on correctly.
			failure = fmt.Errorf("stdin: %w", err)
		default:
			log.Debug("stdin closed; finishing")
		}
	case <-ctx.Done():
		log.Debug("signal; finishing")
		finish = 3 * time.Second // a signal asks to stop soon
	case err := <-outDone:
		outOver = true
		failure = err
		if failure == nil {
			failure = errors.New("the connection ended")
		}
	}
	if failure == nil {
		// Finish what is in flight, bounded: a daemon that went away must
		// not keep the editor waiting.
		wctx, cancel := context.WithTimeout(context.Background(), finish)
		_ = conn.CloseWrite(wctx)
		cancel()
		if err := conn.Err(); err != nil {
			failure = err
		}
	}
	if conn.Err() != nil && !outOver {
		// The connection failed: the reader gets the errors for pending
		// requests, then the failure; let them reach stdout first.
		select {
		case <-outDone:
			outOver = true
		case <-time.After(10 * time.Second):
		}
	}
	if err := conn.Close(); err != nil {
		log.Warn("closing", "err", err)
	}
	if !outOver {
		<-outDone // the last lines reach stdout before the process exits
	}
	if failure != nil && !errors.Is(failure, httpclient.ErrClosed) {
		return fmt.Errorf("acp: %w", failure)
	}
	log.Debug("acp bridge done", "server_id", id)
	return nil
}
