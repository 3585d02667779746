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
	"os/signal"
	"runtime"
	"sync"
	"syscall"
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

stdin closed, SIGTERM or SIGINT: what is in flight is finished (at most
10 s, 3 s after a signal), the owned instance deleted, exit 0; stdin closed
while the daemon is still being reached: exit 0 within a second. stdout closed by
the editor: the owned instance deleted, exit 0. A closed stderr only loses
the logs. The daemon unreachable (or not answering) for
--reconnect-timeout, or the instance gone: pending requests get JSON-RPC
errors, exit 1.`

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
			// Before anything is read (a --token-file may be a pipe):
			// the process starts again with sysmon kept awake.
			sysmonErr := keepSysmonAwake(true)
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
			if sysmonErr != nil {
				log.Debug("could not re-execute with sysmon kept awake; going on with the runtime's default", "err", sysmonErr)
			}
			client := &httpclient.Client{BaseURL: cfg.endpoint, Token: token}
			if err := cfg.router.apply(client); err != nil {
				return err
			}
			// An editor that closes our stderr (or stdout) must not kill
			// the bridge with SIGPIPE at its next log line, before it
			// deleted its instance: a write to a closed pipe fails with
			// EPIPE instead, logs are then lost, and a closed stdout ends
			// the bridge cleanly.
			signal.Ignore(syscall.SIGPIPE)
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
// stdout until stdin ends, ctx is done or the editor closes stdout (exit
// 0, the owned instance deleted), or the connection fails (the error,
// exit 1).
//
// Three goroutines: the stdin reader (relayStdin: lines, malformed ones
// answered), the writer (those lines to the connection, one at a time)
// and the stdout copier. The reader runs from the start and hands the
// writer one line at a time, so an end of stdin is seen while a Write
// blocks (the first request waits for the agent to start, an install
// maybe) and while the daemon is still being reached: the bridge does not
// outlive its editor by more than its bounded finish.
func bridgeACP(ctx context.Context, c *httpclient.Client, cfg bridgeConfig, stdin io.Reader, stdout io.Writer, log *slog.Logger) error {
	owned := cfg.serverID == "" || cfg.deleteOnExit
	id := cfg.serverID
	if id == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = "acp-" + hex.EncodeToString(b[:])
	}
	out := &stdoutLines{w: stdout}
	lines := &lineQueue{c: make(chan []byte), stop: make(chan struct{})}
	inDone := make(chan error, 1)
	go func() {
		err := relayStdin(lines, stdin, out, log)
		close(lines.c)
		inDone <- err
	}()

	type dialed struct {
		conn *httpclient.ACPConn
		err  error
	}
	dctx, stopDial := context.WithCancel(ctx)
	defer stopDial()
	dialc := make(chan dialed, 1)
	go func() {
		conn, err := c.DialACP(dctx, id, cfg.agent, &httpclient.ACPOptions{
			ReconnectTimeout: cfg.reconnectTimeout,
			DeleteOnClose:    owned,
			Logger:           log,
			MaxMessage:       bridgeMaxLine,
		})
		dialc <- dialed{conn, err}
	}()
	dialFailed := func(err error) error {
		if ctx.Err() != nil {
			return nil // SIGTERM while waiting for the daemon: nothing to finish
		}
		return clientErrorHint(fmt.Errorf("acp: %w", err), "--token-file FILE")
	}
	var conn *httpclient.ACPConn
	select {
	case d := <-dialc:
		if d.err != nil {
			return dialFailed(d.err)
		}
		conn = d.conn
	case err := <-inDone:
		// stdin ended before the daemon was reached, with nothing to
		// send: nothing was created, nothing is owed. What the dial
		// learns within a moment (a refused token, a closed port with a
		// short --reconnect-timeout) is still reported; a daemon that
		// is not there or does not answer is not waited for.
		if err != nil {
			return fmt.Errorf("acp: stdin: %w", err)
		}
		select {
		case d := <-dialc:
			if d.err != nil {
				return dialFailed(d.err)
			}
			d.conn.Close()
		case <-time.After(dialGraceAfterStdin):
			stopDial()
			if d := <-dialc; d.conn != nil {
				d.conn.Close()
			}
		}
		log.Debug("stdin closed before the daemon was reached; done")
		return nil
	case <-ctx.Done():
		stopDial()
		if d := <-dialc; d.conn != nil {
			d.conn.Close()
		}
		return nil
	}
	stopDial()
	log.Info("acp bridge connected", "endpoint", cfg.endpoint, "server_id", id, "agent", cfg.agent, "owned", owned)

	outDone := make(chan error, 1)
	go func() {
		_, err := io.Copy(out, conn)
		out.finish()
		outDone <- err
	}()
	writerDone := make(chan error, 1)
	go func() {
		var err error
		for line := range lines.c {
			if _, err = conn.Write(line); err != nil {
				break
			}
		}
		lines.close() // a line read after a failed Write is not waited for
		writerDone <- err
	}()

	var failure error
	outOver, writerOver, editorGone := false, false, false
	finish := 10 * time.Second // stdin closed: what was written gets its answers
	select {
	case err := <-inDone:
		switch {
		case errors.Is(out.writeErr(), syscall.EPIPE):
			// An answer of ours found stdout closed (below).
			log.Info("stdout closed by the client; closing")
			editorGone = true
		case err != nil:
			// stdin unreadable: the session cannot go on correctly.
			failure = fmt.Errorf("stdin: %w", err)
		default:
			log.Debug("stdin closed; finishing")
		}
	case <-writerDone:
		// stdin ended and its last line was handed over, or a Write
		// failed, which it does only once the connection has.
		writerOver = true
		failure = conn.Err()
	case <-ctx.Done():
		log.Debug("signal; finishing")
		finish = 3 * time.Second // a signal asks to stop soon
	case err := <-outDone:
		outOver = true
		switch {
		case errors.Is(out.writeErr(), syscall.EPIPE):
			// The editor closed our stdout: it is gone, and nothing
			// more can reach it. As for a closed stdin, the owned
			// instance is deleted and the exit is clean.
			log.Info("stdout closed by the client; closing")
			editorGone = true
		case err != nil:
			failure = err
		default:
			failure = errors.New("the connection ended")
		}
	}
	if failure == nil && conn.Err() != nil {
		failure = conn.Err()
	}
	if failure == nil && !editorGone {
		// Finish what is in flight, bounded: a daemon that went away must
		// not keep the editor waiting. After an end of stdin the writer
		// hands over the last line it took first.
		wctx, cancel := context.WithTimeout(context.Background(), finish)
		if !writerOver {
			select {
			case <-writerDone:
			case <-wctx.Done():
			case <-ctx.Done(): // a signal: lines still coming are not waited for
			}
		}
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
	lines.close()
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

// dialGraceAfterStdin is how long the bridge still waits for the daemon
// once stdin has ended before it was reached: long enough for an answer
// that says something is wrong (a refused token), short enough for an
// editor closing its agent.
const dialGraceAfterStdin = time.Second

// lineQueue hands the stdin reader's lines to the writer, one at a time:
// Write returns once the writer took the line (or the bridge is ending).
type lineQueue struct {
	c    chan []byte
	stop chan struct{}
	once sync.Once
}

// Write hands over one line (the reader's buffer is reused: a copy).
func (q *lineQueue) Write(p []byte) (int, error) {
	select {
	case q.c <- bytes.Clone(p):
		return len(p), nil
	case <-q.stop:
		return 0, httpclient.ErrClosed
	}
}

// close makes the reader's next hand-over fail: the bridge is ending.
func (q *lineQueue) close() { q.once.Do(func() { close(q.stop) }) }

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

// writeErr is the first error writing to stdout, nil while it works.
func (s *stdoutLines) writeErr() error {
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
