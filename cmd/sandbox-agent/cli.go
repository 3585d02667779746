package main

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// extraCommands build the subcommands that other files of this package
// register from init (install-agent, policy, ...), so each feature wires
// itself in one place. Each call must return a fresh command: run builds a
// new tree every time, so no flag value survives from one run to the next.
var extraCommands []func() *cobra.Command

// newRootCmd builds the whole command tree.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "sandbox-agent",
		Short: "Run ACP coding agents and expose them over HTTP",
		Long: `sandbox-agent runs coding agents that speak ACP (JSON-RPC over stdio) and
exposes them over HTTP. Start the daemon with "sandbox-agent server".`,
		Version:       version,
		SilenceErrors: true, // run prints usage errors, main the others
		SilenceUsage:  true,
	}
	root.Flags().BoolP("version", "V", false, "print the version, commit and Go version")
	root.SetVersionTemplate(versionText())
	root.AddCommand(newServerCmd(), newMockAgentCmd(), newOpenAPICmd(), newAPICmd(), newVersionCmd())
	for _, build := range extraCommands {
		root.AddCommand(build())
	}
	root.SetHelpCommand(newHelpCmd())
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	finish(root)
	return root
}

// finish applies the rules every command follows, so a new command gets
// them without doing anything:
//   - a flag mistake is a usage error (exit 2);
//   - a wrong argument count is a usage error (exit 2);
//   - a group (a command with subcommands and no action of its own) given
//     no subcommand or an unknown one is a usage error, not help with exit 0.
//   - a numeric flag below its minimum is a usage error (exit 2);
//   - a mistyped command or flag gets a "did you mean".
func finish(c *cobra.Command) {
	c.SetFlagErrorFunc(flagError)
	c.SuggestionsMinimumDistance = 2 // cobra's SuggestionsFor suggests nothing at 0
	if c.Runnable() && c.PreRunE == nil && c.PreRun == nil {
		c.PreRunE = func(cmd *cobra.Command, _ []string) error { return checkNumericFlags(cmd.Flags()) }
	}
	if args := c.Args; args != nil {
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				var ue usageError
				if !errors.As(err, &ue) {
					err = usageError{err.Error()}
				}
				return err
			}
			return nil
		}
	}
	if !c.Runnable() && c.HasSubCommands() {
		c.Args = cobra.ArbitraryArgs
		// Its usage lists its subcommands, not a bare "sandbox-agent api".
		c.SetUsageTemplate(groupUsage)
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("missing command")
			}
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				return usagef("unknown command %q (did you mean %q?)", args[0], s[0])
			}
			return usagef("unknown command %q", args[0])
		}
	} else {
		c.SetUsageTemplate(leafUsage) // not the group's, inherited
	}
	for _, sub := range c.Commands() {
		finish(sub)
	}
}

// leafUsage is cobra's usage template; groupUsage the same without the
// command's own use line.
var (
	leafUsage  = (&cobra.Command{}).UsageTemplate()
	groupUsage = strings.Replace(leafUsage, "{{if .Runnable}}\n  {{.UseLine}}{{end}}", "", 1)
)

// argsBetween accepts lo to hi (-1: any number of) positional arguments and names the
// missing or extra ones from the command's Use line, e.g.
// "post <server_id> [MESSAGE]": "missing <server_id>".
func argsBetween(lo, hi int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		names := strings.Fields(cmd.Use)[1:]
		if len(names) > 0 && names[0] == "[flags]" {
			names = names[1:]
		}
		switch {
		case len(args) < lo:
			missing := names[min(len(args), len(names)):min(lo, len(names))]
			return usagef("missing %s", strings.Join(missing, " and "))
		case hi >= 0 && len(args) > hi:
			return usagef("unexpected argument %q", args[hi])
		}
		return nil
	}
}

// noArgs accepts no positional argument.
var noArgs = argsBetween(0, 0)

// newHelpCmd replaces cobra's help command, which answers an unknown topic
// with exit status 0.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Args:  cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || cmd == nil || len(rest) > 0 {
				return usagef("unknown help topic %q", strings.Join(args, " "))
			}
			return cmd.Help()
		},
	}
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(c.OutOrStdout(), versionText())
			return err
		},
	}
}

// versionText is what --version prints: the version this daemon reports
// to clients, the commit it was built from (as the go command records it)
// and the Go version.
func versionText() string {
	commit, modified, when := "unknown (built without VCS stamping)", "", ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.time":
				when = ", " + s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = ", modified"
				}
			}
		}
		if !strings.HasPrefix(commit, "unknown") {
			commit += when
		} else if info.Main.Version != "" && info.Main.Version != "(devel)" {
			commit = info.Main.Version // go install module@version records no vcs settings
		}
	}
	return fmt.Sprintf("sandbox-agent %s\ncommit: %s%s\ngo: %s\n", version, commit, modified, runtime.Version())
}

// stringList is a repeatable flag; comma-separated values are split too.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }
func (s *stringList) Type() string   { return "strings" }
func (s *stringList) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*s = append(*s, part)
		}
	}
	return nil
}

var _ pflag.Value = (*stringList)(nil)

// anyArgs is the annotation of a command that accepts any positional
// arguments (its value says why); the command-tree test then does not
// expect extra arguments to be a usage error.
const anyArgs = "sandbox-agent/any-args"

// choice is a string flag that takes one of a fixed set of values, so a
// wrong one is refused while parsing (exit 2) with the set named.
type choice struct {
	v       *string
	allowed []string
}

// oneOf makes a choice flag value over *v, which holds the default.
func oneOf(v *string, allowed ...string) *choice { return &choice{v, allowed} }

func (c *choice) String() string { return *c.v }
func (c *choice) Type() string   { return "string" }
func (c *choice) Set(s string) error {
	for _, a := range c.allowed {
		if s == a {
			*c.v = s
			return nil
		}
	}
	return fmt.Errorf("must be %s, got %q", strings.Join(c.allowed, ", "), s)
}
