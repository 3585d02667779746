package npm

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// maxOutput bounds what is kept of a program's stdout and of its stderr.
const maxOutput = 1 << 20

// User is a user to run npm and the probes as (the daemon's --run-as):
// then an agent's install scripts run with that user's rights, not the
// daemon's, and what npm writes is the user's.
type User struct {
	UID, GID uint32
	Groups   []uint32
}

// run starts name in its own process group (as user, when set) and waits
// for it. The group is killed when ctx ends; pipes are abandoned shortly
// after, so a grandchild holding them cannot block the caller.
func run(ctx context.Context, user *User, env []string, dir, name string, args ...string) (domain.CommandResult, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	cmd.Dir = dir
	var stdout, stderr tailBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	setGroup(cmd, user)
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	res := domain.CommandResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	if ctx.Err() != nil {
		return res, fmt.Errorf("%s: %w", name, context.Cause(ctx))
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.ExitCode = ee.ExitCode()
		if res.ExitCode < 0 { // killed by a signal
			res.ExitCode = 128
		}
		return res, nil
	}
	if err != nil && !errors.Is(err, exec.ErrWaitDelay) {
		return res, fmt.Errorf("%s: %w", name, err)
	}
	return res, nil
}

// tailBuffer keeps the last maxOutput bytes written to it.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > maxOutput {
		t.b = append([]byte(nil), t.b[len(t.b)-maxOutput:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.b...)
}
