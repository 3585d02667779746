//go:build unix

package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lock takes the address's lock file (flock, released by the kernel if
// this process dies), waiting while another start or stop holds it;
// waiting is called once, when it starts to wait.
func (f Files) lock(ctx context.Context, waiting func()) (unlock func(), err error) {
	file, err := os.OpenFile(f.Lock, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(file.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { file.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			file.Close()
			return nil, fmt.Errorf("lock %s: %w", f.Lock, err)
		}
		if waiting != nil {
			waiting()
			waiting = nil
		}
		select {
		case <-ctx.Done():
			file.Close()
			return nil, fmt.Errorf("waiting for another daemon start or stop (%s): %w", f.Lock, context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}
