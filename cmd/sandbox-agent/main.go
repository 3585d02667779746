// Command sandbox-agent runs coding agents that speak ACP over stdio and
// exposes them over HTTP. This package is the composition root: it parses
// the command line, wires adapters to the app, and handles signals. It also
// holds what exists only as part of the command line, thin over the
// packages it calls: the acp stdio bridge's loop and stdio polling, the
// policies' loading and `policy test`, the api, credentials, daemon and
// install commands, and the memory budgets sized from the box
// (ARCHITECTURE.md lists each file). Logic a second caller could need
// belongs in a package.
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
	reexecAllowed = true
	restoreGodebug()
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode maps run's error to the process status: 0, 2 for a command-line
// mistake (already reported with its usage by run), an exitStatus's own
// (already reported by its command), 1 for anything else, printed here.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	var es exitStatus // already reported (daemon status)
	if errors.As(err, &es) {
		return int(es)
	}
	fmt.Fprintln(stderr, "sandbox-agent:", err)
	return 1
}

// usageError is a command-line mistake (exit status 2). Commands return it
// through usagef for mistakes only found after parsing (e.g. a bad
// --log-format); run prints it with the command's usage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// run executes one command line. Help goes to stdout (nil error); a usage
// error is printed with the failing command's usage to stderr and returned
// as a usageError; other errors are returned unprinted.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	root := newRootCmd()
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if args == nil {
		args = []string{} // nil would make cobra read os.Args
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return nil
	}
	var ue usageError
	if !errors.As(err, &ue) {
		return err
	}
	if cmd == nil {
		cmd = root
	}
	fmt.Fprintf(stderr, "%s: %s\n\n%s", cmd.CommandPath(), ue.msg, cmd.UsageString())
	return err
}
