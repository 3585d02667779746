package processes

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/app/internal/seqring"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Run runs a command to completion with stdin on /dev/null, keeping up to
// maxOutputBytes of each output (the rest is read and dropped, so the
// process never blocks on a full pipe). At the timeout, or when the caller
// leaves, the whole process group is killed. A run counts against
// maxConcurrentProcesses while it lasts but is not listed.
func (s *Service) Run(ctx context.Context, req domain.ProcessRunRequest) (domain.ProcessRunResponse, error) {
	spec, err := s.spec(ctx, req.Command, req.Args, req.Cwd, req.Env)
	if err != nil {
		return domain.ProcessRunResponse{}, err
	}
	cfg := s.Config()
	timeout := cfg.DefaultRunTimeoutMs
	if req.TimeoutMs != nil {
		if *req.TimeoutMs < 0 {
			return domain.ProcessRunResponse{}, domain.InvalidRequest("timeoutMs must not be negative")
		}
		if *req.TimeoutMs > 0 {
			timeout = *req.TimeoutMs
		}
	}
	timeout = min(timeout, cfg.MaxRunTimeoutMs)
	maxOut := cfg.MaxOutputBytes
	if req.MaxOutputBytes != nil {
		if *req.MaxOutputBytes < 0 {
			return domain.ProcessRunResponse{}, domain.InvalidRequest("maxOutputBytes must not be negative")
		}
		maxOut = min(*req.MaxOutputBytes, maxOut)
	}
	if _, err := s.reserve(); err != nil {
		return domain.ProcessRunResponse{}, err
	}
	defer s.release()

	start := time.Now()
	p, err := s.starter.Start(ctx, spec)
	if err != nil {
		s.metrics.spawnFailed()
		return domain.ProcessRunResponse{}, startError(req.Command, err)
	}
	s.metrics.runs.Add(1)
	s.mu.Lock()
	s.runs[p] = struct{}{}
	s.wg.Add(1)
	closed := s.closed
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.runs, p)
		s.mu.Unlock()
		s.wg.Done()
	}()
	if closed {
		_ = p.Signal(domain.SignalKill) // Close took its snapshot before this run
	}
	pio := p.IO()
	// The captured output counts against --process-log-total until the
	// answer is built, as the logs of managed processes do.
	stdout, stderr := capture{pool: s.pool}, capture{pool: s.pool}
	defer stdout.release()
	defer stderr.release()
	var readers sync.WaitGroup
	readers.Add(2)
	go stdout.read(pio.Stdout, maxOut, &readers)
	go stderr.read(pio.Stderr, maxOut, &readers)

	var timedOut atomic.Bool
	timer := time.AfterFunc(time.Duration(timeout)*time.Millisecond, func() {
		timedOut.Store(true)
		_ = p.Signal(domain.SignalKill)
	})
	stopOnCancel := context.AfterFunc(ctx, func() { _ = p.Signal(domain.SignalKill) })
	st, waitErr := p.Wait()
	timer.Stop()
	stopOnCancel()

	drained := make(chan struct{})
	go func() {
		readers.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(s.opts.DrainGrace):
		closeAll(pio.Stdout, pio.Stderr) // held open by a process outside the group
		<-drained
	}
	closeAll(pio.Stdout, pio.Stderr)
	s.metrics.exited(st)
	if waitErr != nil {
		return domain.ProcessRunResponse{}, startError(req.Command, waitErr)
	}
	if err := ctx.Err(); err != nil {
		return domain.ProcessRunResponse{}, err
	}
	out := domain.ProcessRunResponse{
		ExitCode:        st.Code,
		TimedOut:        timedOut.Load(),
		Stdout:          string(stdout.buf),
		Stderr:          string(stderr.buf),
		StdoutTruncated: stdout.truncated,
		StderrTruncated: stderr.truncated,
		DurationMs:      time.Since(start).Milliseconds(),
	}
	if out.TimedOut {
		s.metrics.runTimeouts.Add(1)
	}
	if st.Code == nil {
		out.Signal = st.Signal
	}
	return out, nil
}

// capture keeps the first max bytes of a stream and drains the rest. Its
// buffer is charged to the pool as it grows, before it is allocated; when
// the pool has no room the output is cut there, as past max.
type capture struct {
	buf       []byte
	truncated bool
	pool      *seqring.Pool
	charged   int64
}

func (c *capture) read(r io.Reader, max int, done *sync.WaitGroup) {
	defer done.Done()
	if r == nil {
		return
	}
	chunk := make([]byte, 32<<10)
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			keep := min(n, max-len(c.buf))
			if keep > 0 && len(c.buf)+keep > cap(c.buf) && !c.grow(len(c.buf)+keep, max) {
				keep, max = 0, len(c.buf) // no room: keep nothing more
			}
			c.buf = append(c.buf, chunk[:keep]...)
			if keep < n {
				c.truncated = true
			}
		}
		if err != nil {
			return
		}
	}
}

// grow makes room for need bytes (doubling, up to limit), charging the new
// capacity to the pool first. It reports false when the pool has no room.
func (c *capture) grow(need, limit int) bool {
	size := min(max(need, 2*cap(c.buf), 4<<10), limit)
	extra := int64(size - cap(c.buf))
	if !c.pool.Reserve(extra) {
		return false
	}
	c.charged += extra
	nb := make([]byte, len(c.buf), size)
	copy(nb, c.buf)
	c.buf = nb
	return true
}

// release gives back what the buffer was charged.
func (c *capture) release() {
	c.pool.Release(c.charged)
	c.charged = 0
}
