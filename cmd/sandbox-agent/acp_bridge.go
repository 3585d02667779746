package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpclient"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

const acpBridgeLong = `Speak ACP on stdio (one JSON-RPC message per line) for an agent that runs
behind a sandbox-agent daemon: editors and other ACP clients spawn this
command as their agent. stdout carries protocol only; logs go to stderr.

Without --server-id a fresh instance is created and deleted at exit; with
one, the command attaches to that instance (creating it if needed) and
leaves it running unless --delete-on-exit.

The token is read from --token-file or $SANDBOX_AGENT_TOKEN, never from the
command line, where other users of the machine could read it.

Behind a router that picks the sandbox by headers (agent-sandbox's
sandbox-router), --endpoint is the router's URL and --sandbox-id names the
sandbox; the daemon's token then travels in --token-header
(X-Sandbox-Agent-Token by default) and the router's own in Authorization.

A stdin line that is not a JSON-RPC message is answered on stdout as a
local agent would (-32700 Parse error or -32600 Invalid Request) and not
sent; the bridge goes on with the next line.

stdin closed or SIGTERM: what is in flight is finished, the owned instance
deleted, exit 0. The daemon unreachable for --reconnect-timeout, or the
instance gone: pending requests get JSON-RPC errors, exit 1.`

// bridgeConfig is the parsed command line of "sandbox-agent acp".
type bridgeConfig struct {
	router                               routerFlags
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
			token, err := os.Getenv(tokenEnv), error(nil)
			if cfg.tokenFile == "" {
				err = checkToken(token, "$"+tokenEnv)
			} else {
				token, err = readClientToken(c.Context(), "--token-file", cfg.tokenFile)
			}
			if err != nil {
				return err
			}
			log, err := newLogger(c.ErrOrStderr(), cfg.logFormat, cfg.logLevel)
			if err != nil {
				return usagef("%v", err)
			}
			client := &httpclient.Client{BaseURL: cfg.endpoint, Token: token}
			if err := cfg.router.apply(client); err != nil {
				return err
			}
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
	cfg.router.register(fs)
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
		MaxMessage:       bridgeMaxLine,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil // SIGTERM while waiting for the daemon: nothing to finish
		}
		return clientErrorHint(fmt.Errorf("acp: %w", err), "--token-file FILE")
	}
	log.Info("acp bridge connected", "endpoint", cfg.endpoint, "server_id", id, "agent", cfg.agent, "owned", owned)

	out := &stdoutLines{w: stdout}
	outDone := make(chan error, 1)
	go func() {
		_, err := io.Copy(out, conn)
		out.finish()
		outDone <- err
	}()
	inDone := make(chan error, 1)
	go func() {
		inDone <- relayStdin(conn, stdin, out, log)
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

// bridgeMaxLine bounds one stdin line (the ACP connection's default too).
// A longer line is not held: it is read to its end and dropped, and
// answered with -32600 (its id cannot be known without holding it), so the
// bridge's memory stays bounded and the session goes on.
const bridgeMaxLine = 64 << 20

// relayStdin sends stdin to the connection one line at a time, as a local
// agent reads it: blank lines are skipped, a last line without its line
// ending still counts, and a line that is not a JSON-RPC message
// (domain.CheckMessage), or is longer than bridgeMaxLine, is answered on
// stdout instead of being sent, so a client waiting for an answer gets one,
// and the next line is read as usual. It returns nil at EOF.
func relayStdin(conn io.Writer, stdin io.Reader, out *stdoutLines, log *slog.Logger) error {
	r := bufio.NewReaderSize(stdin, 64<<10)
	var long []byte   // a line longer than r's buffer, gathered
	skipping := false // inside a line past bridgeMaxLine, dropped
	for {
		chunk, err := r.ReadSlice('\n')
		full := err == bufio.ErrBufferFull
		switch {
		case skipping:
		case len(long)+len(chunk) > bridgeMaxLine:
			skipping, long = true, nil
		case full:
			long = append(long, chunk...)
		}
		if full {
			continue
		}
		line := chunk
		switch {
		case skipping:
			skipping, line = false, nil
			log.Warn("stdin line longer than the limit; dropped and answered with an error", "limit_bytes", bridgeMaxLine)
			tooLong := &domain.RPCError{Code: domain.CodeInvalidRequest, Reason: fmt.Sprintf("message longer than %d bytes", bridgeMaxLine)}
			if werr := out.answer(tooLong.Response()); werr != nil {
				return werr
			}
		case long != nil:
			line = append(long, chunk...)
			long = nil
		}
		if len(line) > 0 {
			if werr := relayLine(conn, line, out, log); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// relayLine sends one stdin line (with or without its line ending) or
// answers it.
func relayLine(conn io.Writer, line []byte, out *stdoutLines, log *slog.Logger) error {
	msg := bytes.TrimRight(line, "\r\n")
	if len(bytes.TrimSpace(msg)) == 0 {
		return nil
	}
	if _, bad := domain.CheckMessage(msg); bad != nil {
		// The line itself is not logged: it may carry credentials.
		log.Warn("stdin line is not a JSON-RPC message; answered with an error", "code", bad.Code, "reason", bad.Reason, "bytes", len(msg))
		return out.answer(bad.Response())
	}
	if line[len(line)-1] != '\n' {
		line = append(line, '\n')
	}
	_, err := conn.Write(line)
	return err
}

// stdoutLines is the bridge's stdout. The agent's messages are copied to
// it in whatever pieces the connection's Read returns, so a write may end
// inside a line; an answer of the bridge's own is written only between two
// whole lines: at once when stdout is at a line boundary, else right after
// the line in progress ends.
type stdoutLines struct {
	mu      sync.Mutex
	w       io.Writer
	mid     bool          // the last write ended inside a line
	held    []byte        // an answer waiting for the line in progress to end
	written chan struct{} // closed once held is written (or cannot be)
	err     error         // the first write error: stdout is gone
}

// Write copies agent bytes, writing a held answer after the first line
// ending in p.
func (s *stdoutLines) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, s.err
	}
	n := 0
	if s.held != nil {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			return s.writeLocked(p)
		}
		k, err := s.writeLocked(p[:i+1])
		n += k
		if err != nil {
			return n, err
		}
		s.flushHeldLocked()
		p = p[i+1:]
	}
	k, err := s.writeLocked(p)
	return n + k, err
}

func (s *stdoutLines) writeLocked(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, err := s.w.Write(p)
	if err != nil {
		s.err = err
		return n, err
	}
	s.mid = p[len(p)-1] != '\n'
	return n, nil
}

func (s *stdoutLines) flushHeldLocked() {
	if s.held == nil {
		return
	}
	if s.err == nil {
		_, _ = s.writeLocked(s.held)
	}
	s.held = nil
	close(s.written)
}

// answer writes one line of the bridge's own (without its line ending)
// between two whole lines, and returns once it is written. One caller at a
// time (the stdin relay).
func (s *stdoutLines) answer(line []byte) error {
	line = append(line, '\n')
	s.mu.Lock()
	if s.err != nil || !s.mid {
		err := s.err
		if err == nil {
			_, err = s.writeLocked(line)
		}
		s.mu.Unlock()
		return err
	}
	done := make(chan struct{})
	s.held, s.written = line, done
	s.mu.Unlock()
	<-done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// finish writes a held answer once no more agent bytes will come (after a
// line ending, should the agent's last line have been cut short).
func (s *stdoutLines) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held != nil && s.err == nil && s.mid {
		_, _ = s.writeLocked([]byte("\n"))
	}
	s.flushHeldLocked()
}
