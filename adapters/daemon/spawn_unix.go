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

// spawn starts the daemon detached and waits for its health check. On any
// failure the new process (and its group) is stopped and its pid file
// removed; the error ends with the log's last lines.
func (d *Daemon) spawn(ctx context.Context) (Record, error) {
	logf, err := d.files.rotateLog()
	if err != nil {
		return Record{}, fmt.Errorf("daemon log: %w", err)
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return Record{}, err
	}
	defer devnull.Close()
	fmt.Fprintf(d.cfg.Progress, "starting the daemon at %s (log: %s)\n", d.URL(), d.files.Log)
	p, err := os.StartProcess(d.cfg.Exe, append([]string{d.cfg.Exe}, d.cfg.Args...), &os.ProcAttr{
		Dir:   d.cfg.Dir,
		Env:   d.cfg.Env,
		Files: []*os.File{devnull, logf, logf},
		// Its own session: no controlling terminal, so closing the
		// terminal or ^C there does not reach it; its own process group,
		// which a stop that comes to SIGKILL signals whole.
		Sys: &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		return Record{}, fmt.Errorf("start %s: %w", d.cfg.Exe, err)
	}
	rec := Record{PID: p.Pid, Version: d.cfg.Version, URL: d.URL(), Exe: d.cfg.Exe, Log: d.files.Log, Started: time.Now().UTC()}
	if id, _, err := identify(p.Pid); err == nil {
		rec.StartTicks, rec.BootID = id.startTicks, id.bootID
	}
	fail := func(why error) (Record, error) {
		d.abandon(p.Pid)
		_ = p.Release()
		_ = d.files.remove()
		msg := why.Error()
		if tail := logTail(d.files.Log, 20); tail != "" {
			msg += "\nthe end of " + d.files.Log + ":\n" + tail
		}
		return Record{}, errors.New(msg)
	}
	// Recorded before it answers, so a status meanwhile sees it.
	if err := d.files.writeRecord(rec); err != nil {
		return fail(fmt.Errorf("write the pid file: %w", err))
	}
	began := time.Now()
	deadline := began.Add(d.cfg.StartLimit)
	nextNote := began.Add(time.Second)
	for {
		if status, exited := reap(p.Pid); exited {
			return fail(fmt.Errorf("the daemon exited while starting (%s)", status))
		}
		err := d.health(ctx)
		if err == nil || errors.Is(err, ErrUnauthorized) {
			// It answers; make sure the answer was its and not another
			// process's that took the address first.
			if status, exited := reap(p.Pid); exited {
				return fail(fmt.Errorf("the daemon exited while starting (%s)", status))
			}
			_ = p.Release()
			return rec, nil
		}
		now := time.Now()
		if ctx.Err() != nil {
			return fail(fmt.Errorf("interrupted while waiting for %s/v1/health: %w", d.URL(), context.Cause(ctx)))
		}
		if now.After(deadline) {
			return fail(fmt.Errorf("the daemon did not answer %s/v1/health within %s (last: %v)", d.URL(), d.cfg.StartLimit, err))
		}
		if now.After(nextNote) {
			fmt.Fprintf(d.cfg.Progress, "waiting for %s/v1/health (%s)...\n", d.URL(), now.Sub(began).Round(time.Second))
			nextNote = now.Add(time.Second)
		}
		select {
		case <-ctx.Done():
		case <-time.After(poll):
		}
	}
}

// reap collects the child if it has exited, without waiting.
func reap(pid int) (string, bool) {
	var ws syscall.WaitStatus
	got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	if err != nil || got != pid {
		return "", errors.Is(err, syscall.ECHILD)
	}
	switch {
	case ws.Exited():
		return fmt.Sprintf("exit status %d", ws.ExitStatus()), true
	case ws.Signaled():
		return "killed by " + ws.Signal().String(), true
	}
	return "stopped", true
}

// abandon stops a child that failed to start: SIGTERM to its group, then
// SIGKILL after 3 s, and reaps it.
func (d *Daemon) abandon(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if _, exited := reap(pid); exited {
			return
		}
		time.Sleep(poll)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(pid, &ws, 0, nil)
}

// sendSignal sends SIGTERM to the daemon, or SIGKILL to its whole process
// group (it leads one: it was started in its own session). A process
// already gone is no error.
func sendSignal(pid int, kill bool) error {
	if pid <= 1 {
		// kill(-1) is every process there is; readRecord refuses such a
		// pid already, this is the last line.
		return fmt.Errorf("refusing to signal pid %d", pid)
	}
	var err error
	if kill {
		err = syscall.Kill(-pid, syscall.SIGKILL)
	} else {
		err = syscall.Kill(pid, syscall.SIGTERM)
	}
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal pid %d: %w", pid, err)
	}
	return nil
}
