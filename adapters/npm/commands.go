package npm

import (
	"context"
	"os"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// Commands runs short probes of installed programs.
type Commands struct {
	// Env is the programs' environment; nil means the daemon's.
	Env []string
	// User, when set, runs them as that user.
	User *User
}

var _ ports.Commands = (*Commands)(nil)

// Run implements ports.Commands.
func (c *Commands) Run(ctx context.Context, name string, args ...string) (domain.CommandResult, error) {
	env := c.Env
	if env == nil {
		env = os.Environ()
	}
	return run(ctx, c.User, env, "", name, args...)
}
