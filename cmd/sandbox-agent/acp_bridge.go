package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
)

const acpBridgeUsage = `usage: sandbox-agent acp --agent AGENT [--endpoint URL] [--server-id ID] [flags]

Speaks ACP on stdio (one JSON-RPC message per line) for an agent that runs
behind a sandbox-agent daemon: editors and other ACP clients spawn this
command as their agent. stdout carries protocol only; logs go to stderr.

Without --server-id a fresh instance is created and deleted at exit; with
one, the command attaches to that instance (creating it if needed) and
leaves it running unless --delete-on-exit.

The token is read from --token-file or $SANDBOX_AGENT_TOKEN (never from the
command line, where other users could read it).

Flags:
`

// bridgeConfig is the parsed command line of "sandbox-agent acp".
type bridgeConfig struct {
	endpoint, agent, serverID, tokenFile string
	deleteOnExit                         bool
	reconnectTimeout                     time.Duration
	logLevel, logFormat                  string
}

func init() { extraCommands["acp"] = runACPBridge }

// runACPBridge is "sandbox-agent acp": see acpBridgeUsage.
func runACPBridge(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var cfg bridgeConfig
	fs := flag.NewFlagSet("acp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, acpBridgeUsage)
		fs.PrintDefaults()
	}
	endpoint := os.Getenv("SANDBOX_AGENT_ENDPOINT")
	if endpoint == "" {
		endpoint = "http://127.0.0.1:2468"
	}
	fs.StringVar(&cfg.endpoint, "endpoint", endpoint, "daemon URL (default $SANDBOX_AGENT_ENDPOINT or http://127.0.0.1:2468)")
	fs.StringVar(&cfg.agent, "agent", "", "agent to run (required unless --server-id names an existing instance)")
	fs.StringVar(&cfg.serverID, "server-id", "", "attach to (or create) this instance; default: a fresh one, deleted at exit")
	fs.StringVar(&cfg.tokenFile, "token-file", "", "file holding the bearer token (default: $SANDBOX_AGENT_TOKEN)")
	fs.BoolVar(&cfg.deleteOnExit, "delete-on-exit", false, "delete the --server-id instance at exit too")
	fs.DurationVar(&cfg.reconnectTimeout, "reconnect-timeout", 30*time.Second, "give up after the daemon was unreachable this long")
	fs.StringVar(&cfg.logLevel, "log-level", "info", "debug, info, warn or error (logs go to stderr)")
	fs.StringVar(&cfg.logFormat, "log-format", "text", "text, color or json")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usagef("acp: %v", err)
	}
	if fs.NArg() > 0 {
		return usagef("acp: unexpected argument %q", fs.Arg(0))
	}
	if cfg.agent == "" && cfg.serverID == "" {
		return usagef("acp: --agent is required")
	}
	if cfg.reconnectTimeout <= 0 {
		return usagef("acp: --reconnect-timeout must be positive")
	}
	token := os.Getenv("SANDBOX_AGENT_TOKEN")
	if cfg.tokenFile != "" {
		b, err := os.ReadFile(cfg.tokenFile)
		if err != nil {
			return fmt.Errorf("acp: --token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	log, err := newLogger(stderr, cfg.logFormat, cfg.logLevel)
	if err != nil {
		return usagef("acp: %v", err)
	}
	c := &httpclient.Client{BaseURL: cfg.endpoint, Token: token}
	return bridgeACP(ctx, c, cfg, stdin, stdout, log)
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
	select {
	case err := <-inDone:
		if err != nil && conn.Err() == nil {
			log.Warn("reading stdin", "err", err)
		}
		if conn.Err() == nil {
			log.Debug("stdin closed; finishing")
		}
	case <-ctx.Done():
		log.Debug("signal; finishing")
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
		wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = conn.CloseWrite(wctx)
		cancel()
		if err := conn.Err(); err != nil {
			failure = err
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
