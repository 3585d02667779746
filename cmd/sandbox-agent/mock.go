package main

import (
	"github.com/spf13/cobra"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/mockagent"
)

// newMockAgentCmd is the built-in mock agent the daemon starts for
// ?agent=mock. Extra arguments are ignored, as launchers may pass some.
func newMockAgentCmd() *cobra.Command {
	return &cobra.Command{
		Use:         "mock-agent-process",
		Short:       "Run the built-in mock ACP agent on stdio",
		Long:        "Run the built-in mock ACP agent: JSON-RPC, one message per line, on stdin and stdout.",
		Args:        cobra.ArbitraryArgs,
		Annotations: map[string]string{anyArgs: "launchers may pass arguments"},
		RunE: func(c *cobra.Command, _ []string) error {
			return mockagent.Run(c.Context(), c.InOrStdin(), c.OutOrStdout(), c.ErrOrStderr(), mockagent.Options{Version: version})
		},
	}
}
