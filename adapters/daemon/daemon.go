package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"
)

// ErrUnauthorized is what a Health function returns (wrapped) when the
// daemon answers but wants a token the caller does not have: the daemon is
// up, its health unknown.
var ErrUnauthorized = errors.New("the daemon wants a token (give the one it was started with)")

// Config is one address's daemon and how to start it.
type Config struct {
	// StateDir holds the pid files, records, logs and locks (StateDir()).
	StateDir   string
	Host       string
	Port       int
	Version    string // this binary's version, recorded with what it starts
	Exe        string // the program started as the daemon (this binary)
	Args       []string
	Env        []string // the daemon's whole environment
	Dir        string   // its working directory
	Health     func(ctx context.Context) error
	Progress   io.Writer // start's progress lines; nil for none
	StartLimit time.Duration
	StopLimit  time.Duration // SIGTERM to SIGKILL
}

// Default bounds: a daemon answers its health check in milliseconds, and
// its own shutdown gives agents 3 s (--stop-grace) plus 2 s for the rest.
const (
	DefaultStartLimit = 30 * time.Second
	DefaultStopLimit  = 10 * time.Second
	killLimit         = 5 * time.Second
	poll              = 50 * time.Millisecond
)

// Daemon manages the daemon of one address.
type Daemon struct {
	cfg   Config
	files Files
}

// New checks cfg and makes the state directory (owner-only), refusing one
// another user owns or can write (checkOwner).
func New(cfg Config) (*Daemon, error) {
	if cfg.Port < 1 || cfg.Port > 65535 {
		return nil, fmt.Errorf("port %d: a daemon needs a fixed port, 1 to 65535", cfg.Port)
	}
	if cfg.StartLimit <= 0 {
		cfg.StartLimit = DefaultStartLimit
	}
	if cfg.StopLimit <= 0 {
		cfg.StopLimit = DefaultStopLimit
	}
	if cfg.Health == nil {
		cfg.Health = func(context.Context) error { return errors.New("no health check") }
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	if err := checkStateDir(cfg.StateDir); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	return &Daemon{cfg: cfg, files: FilesFor(cfg.StateDir, cfg.Host, cfg.Port)}, nil
}

// Files are the paths this daemon's state lives in.
func (d *Daemon) Files() Files { return d.files }

// URL is where the daemon answers (a wildcard host is reached on the
// loopback).
func (d *Daemon) URL() string { return "http://" + d.dialAddr() }

func (d *Daemon) dialAddr() string {
	host := d.cfg.Host
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::", "[::]":
		host = "::1"
	}
	return net.JoinHostPort(host, strconv.Itoa(d.cfg.Port))
}

// State is what Status found.
type State struct {
	// Running: a process recorded by start is alive and is that process.
	Running bool
	Record  Record // when Running (or Stale, the record not trusted)
	// Health is nil when the daemon answered its health check (Running
	// only); wraps ErrUnauthorized when it wants a token.
	Health error
	// Stale says why a pid file was not trusted (the process is gone, the
	// pid is now another process, the record cannot be read); "" if none.
	Stale string
}

// Answering: the daemon answered, healthy or wanting a token.
func (s State) Answering() bool {
	return s.Running && (s.Health == nil || errors.Is(s.Health, ErrUnauthorized))
}

// Status reports the daemon at this address without changing anything.
func (d *Daemon) Status(ctx context.Context) (State, error) {
	return d.find(ctx, true)
}

// find reads the record and checks that its process is the daemon, and
// (withHealth) asks it for its health.
func (d *Daemon) find(ctx context.Context, withHealth bool) (State, error) {
	r, err := d.files.readRecord()
	if errors.Is(err, errNoRecord) {
		return State{}, nil
	}
	if errors.Is(err, errNotOurs) {
		return State{}, err
	}
	if err != nil {
		return State{Stale: "the pid file cannot be read: " + err.Error()}, nil
	}
	now, gone, err := identify(r.PID)
	if err != nil {
		return State{}, fmt.Errorf("check pid %d: %w", r.PID, err)
	}
	if gone {
		return State{Record: r, Stale: fmt.Sprintf("pid %d is gone", r.PID)}, nil
	}
	if ok, why := sameProcess(r, now); !ok {
		return State{Record: r, Stale: why}, nil
	}
	st := State{Running: true, Record: r}
	if withHealth || !verifiable {
		st.Health = d.health(ctx)
	}
	if !verifiable && !st.Answering() {
		// Without /proc a live pid proves nothing: it must answer too.
		return State{Record: r, Stale: fmt.Sprintf("pid %d is alive but nothing answers at %s (cannot tell whether it is the daemon)", r.PID, r.URL)}, nil
	}
	return st, nil
}

func (d *Daemon) health(ctx context.Context) error {
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return d.cfg.Health(hctx)
}

// Outcome says what Start or Stop did.
type Outcome int

const (
	Started        Outcome = iota // start: a new daemon answers
	AlreadyRunning                // start: one was answering already (maybe another version: State.Record.Version)
	Replaced                      // start --upgrade: the old one stopped, a new one answers
	Stopped                       // stop: it exited
	NotRunning                    // stop: there was none (a stale pid file was removed)
)

// Result is what Start or Stop did and the state after it.
type Result struct {
	Outcome Outcome
	State   State
	// Old is the daemon Replaced (or Stopped) when there was one.
	Old *Record
	// Killed: it did not exit within StopLimit of SIGTERM and was killed.
	Killed bool
	// RemovedStale says why a pid file found on the way was removed.
	RemovedStale string
}

// lock takes the address's lock, saying so when another start or stop
// holds it, and waiting for it at most as long as a start --upgrade with
// this daemon's bounds runs (a stop, then a start; their health checks and
// address waits): a holder past that is stuck or suspended (^Z).
func (d *Daemon) lock(ctx context.Context) (unlock func(), err error) {
	limit := d.cfg.StopLimit + killLimit + d.cfg.StartLimit + 15*time.Second
	ctx, cancel := context.WithTimeoutCause(ctx, limit, fmt.Errorf("another daemon start or stop at %s has held the lock for %s (is one suspended or stuck?)", d.URL(), limit))
	defer cancel()
	return d.files.lock(ctx, func() {
		fmt.Fprintf(d.cfg.Progress, "waiting for another daemon start or stop at %s (it holds %s)...\n", d.URL(), d.files.Lock)
	})
}

// Start starts the daemon unless one answers at this address already.
// With upgrade, a daemon of another version (or one that does not answer)
// is stopped and replaced. It fails when something else holds the address,
// and when the new daemon exits or does not answer its health check within
// StartLimit; the error then carries the end of its log.
func (d *Daemon) Start(ctx context.Context, upgrade bool) (Result, error) {
	unlock, err := d.lock(ctx)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	var res Result
	st, err := d.find(ctx, true)
	if err != nil {
		return Result{}, err
	}
	if err := d.dropStale(st, &res); err != nil {
		return res, err
	}
	if st.Running {
		sameVersion := st.Record.Version == d.cfg.Version
		switch {
		case st.Answering() && (sameVersion || !upgrade):
			res.Outcome, res.State = AlreadyRunning, st
			return res, nil
		case !upgrade:
			return res, fmt.Errorf("a daemon runs at %s (pid %d) but does not answer: %v\nits log: %s\n`sandbox-agent daemon stop` ends it; `daemon start --upgrade` replaces it",
				st.Record.URL, st.Record.PID, st.Health, st.Record.Log)
		}
		old := st.Record
		killed, err := d.stop(ctx, old)
		if err != nil {
			return res, fmt.Errorf("replace the daemon of version %s: %w", old.Version, err)
		}
		res.Old, res.Killed = &old, killed
	}
	if d.addressTaken(ctx, res.Old != nil) {
		return res, fmt.Errorf("%s is already in use by another process (not a daemon `sandbox-agent daemon start` started here)", d.dialAddr())
	}
	rec, err := d.spawn(ctx)
	if err != nil {
		return res, err
	}
	res.Outcome = Started
	if res.Old != nil {
		res.Outcome = Replaced
	}
	res.State = State{Running: true, Record: rec}
	return res, nil
}

// addressTaken reports whether something accepts connections at the
// daemon's address. Right after a daemon was stopped (justStopped), the
// kernel may still be closing its socket: it waits a little for that.
func (d *Daemon) addressTaken(ctx context.Context, justStopped bool) bool {
	deadline := time.Now().Add(2 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", d.dialAddr(), time.Second)
		if err != nil {
			return false
		}
		conn.Close()
		if !justStopped || time.Now().After(deadline) || ctx.Err() != nil {
			return true
		}
		select {
		case <-ctx.Done():
		case <-time.After(poll):
		}
	}
}

// dropStale removes a pid file not to be trusted, saying so in res.
func (d *Daemon) dropStale(st State, res *Result) error {
	if st.Stale == "" {
		return nil
	}
	res.RemovedStale = st.Stale
	return d.files.remove()
}

// Stop stops the daemon: SIGTERM, then (after StopLimit) SIGKILL to its
// process group; the pid file goes once it has exited. A stale pid file is
// removed without signalling anything.
func (d *Daemon) Stop(ctx context.Context) (Result, error) {
	unlock, err := d.lock(ctx)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	var res Result
	st, err := d.find(ctx, false)
	if err != nil {
		return Result{}, err
	}
	if err := d.dropStale(st, &res); err != nil {
		return res, err
	}
	if !st.Running {
		res.Outcome = NotRunning
		return res, nil
	}
	old := st.Record
	killed, err := d.stop(ctx, old)
	if err != nil {
		return res, err
	}
	res.Outcome, res.Old, res.Killed = Stopped, &old, killed
	return res, nil
}

// stop ends the recorded process (checked to be it before each signal)
// and removes its files. Interrupted before it has exited, it leaves it
// to finish on SIGTERM.
func (d *Daemon) stop(ctx context.Context, r Record) (killed bool, err error) {
	if err := d.signalIfSame(r, false); err != nil {
		return false, err
	}
	if !d.waitGone(ctx, r, d.cfg.StopLimit) {
		if ctx.Err() != nil {
			// Interrupted (^C), not out of time: the daemon goes on
			// shutting down; its agents keep their grace.
			return false, fmt.Errorf("interrupted while pid %d shuts down after SIGTERM (a stop again waits for it, then kills it): %w", r.PID, context.Cause(ctx))
		}
		if err := d.signalIfSame(r, true); err != nil {
			return false, err
		}
		killed = true
		if !d.waitGone(ctx, r, killLimit) {
			if ctx.Err() != nil {
				return killed, context.Cause(ctx)
			}
			return killed, fmt.Errorf("pid %d is still there %s after SIGKILL", r.PID, killLimit)
		}
	}
	return killed, d.files.remove()
}

// signalIfSame sends SIGTERM to the daemon, or SIGKILL to its process
// group, unless its pid is gone or now another process.
func (d *Daemon) signalIfSame(r Record, kill bool) error {
	now, gone, err := identify(r.PID)
	if err != nil || gone {
		return err
	}
	if ok, _ := sameProcess(r, now); !ok {
		return nil
	}
	return sendSignal(r.PID, kill)
}

// waitGone waits up to limit for the recorded process to be gone (or its
// pid to be another process's).
func (d *Daemon) waitGone(ctx context.Context, r Record, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		now, gone, err := identify(r.PID)
		if gone {
			return true
		}
		if err == nil {
			if ok, _ := sameProcess(r, now); !ok {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(poll):
		}
	}
}
