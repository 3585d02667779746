// Command sandbox-agent runs coding agents that speak ACP over stdio and
// exposes them over HTTP. This package is the composition root: it parses
// the command line, wires adapters to the app, and handles signals. It holds
// no logic beyond that.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.4.2"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	// After the first signal, restore the default handling so a second one
	// ends the process at once.
	go func() { <-ctx.Done(); stop() }()
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		var ue usageError
		if !errors.As(err, &ue) || ue.msg != "" {
			fmt.Fprintln(os.Stderr, "sandbox-agent:", err)
		}
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a command-line mistake (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

const usage = `sandbox-agent runs ACP coding agents and exposes them over HTTP.

Usage:
  sandbox-agent server [flags]          start the daemon (see: server --help)
  sandbox-agent mock-agent-process      run the built-in mock ACP agent on stdio
  sandbox-agent install-agent <agent>|--all [-r] [--agent-version V] [--agent-process-version V]
                                        install an agent on this host
  sandbox-agent api agents list|get|install ...
  sandbox-agent api acp post|stream|close ...
                                        talk to a running daemon
  sandbox-agent openapi [--yaml]        print the OpenAPI document
  sandbox-agent policy test POLICY CASES
                                        check an auth policy against request cases
  sandbox-agent --version
`

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef("")
	}
	switch args[0] {
	case "server":
		return runServer(ctx, args[1:], stdout, stderr)
	case "mock-agent-process":
		return runMockAgent(ctx, stdin, stdout, stderr)
	case "openapi":
		return runOpenAPI(args[1:], stdout)
	case "api":
		return runAPI(ctx, args[1:], stdin, stdout, stderr)
	case "--version", "-V", "version":
		fmt.Fprintln(stdout, "sandbox-agent", version)
		return nil
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	if cmd, ok := extraCommands[args[0]]; ok {
		return cmd(ctx, args[1:], stdin, stdout, stderr)
	}
	fmt.Fprint(stderr, usage)
	return usagef("unknown command %q", args[0])
}

// extraCommands are subcommands registered by other files of this package
// (install-agent, policy, ...), so each feature wires itself in one place.
var extraCommands = map[string]func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error{}
