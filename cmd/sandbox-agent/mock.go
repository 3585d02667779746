package main

import (
	"context"
	"io"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/mockagent"
)

func runMockAgent(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error {
	return mockagent.Run(ctx, stdin, stdout, stderr)
}
