package processes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/app/internal/seqring"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// Options configures a Service. Zero values take the defaults.
type Options struct {
	Logger *slog.Logger
	// Config is the initial runtime configuration (DefaultProcessConfig).
	Config domain.ProcessConfig
	// Ceiling bounds what POST /v1/processes/config may set, so a client
	// cannot lift the operator's limits (DefaultCeiling; the --process-max-*
	// flags).
	Ceiling domain.ProcessConfig
	// LogTotal bounds the output kept by every process together, live and
	// exited, and the output runs are capturing (--process-log-total,
	// DefaultLogTotal): past it the oldest entries of the largest logs go
	// first (their readers get a gap), and a run whose output finds no room
	// is cut (stdoutTruncated / stderrTruncated).
	LogTotal int64
	// ResolveDir turns a client's cwd into the directory to run in, under
	// the same rules and confinement as /v1/fs paths; nil takes the cwd as
	// given. Its errors are shown to the client.
	ResolveDir func(ctx context.Context, p string) (string, error)
	// DefaultDir is the working directory of a process that names none
	// (the --fs-root when set); empty means the daemon's.
	DefaultDir string
	// Secrets, when set, refuses (403) a working directory, or a command
	// named by path, that is or lies in one of the daemon's own secrets
	// (its /proc entries above all), whatever the filesystem backend.
	Secrets ports.Secrets
	// MaxExited bounds the exited processes kept for listing and logs; the
	// oldest exited one is forgotten past it (256).
	MaxExited int
	// MaxExitedLogBytes bounds the output kept for exited processes
	// altogether; the oldest exited ones are forgotten past it (256 MiB).
	MaxExitedLogBytes int64
	// DrainGrace bounds how long output readers may take to reach the end
	// of a process's output once its group is gone (1 s). Only a process
	// that left the group (setsid) and kept the pipes open needs it.
	DrainGrace time.Duration
}

// DefaultCeiling is the largest configuration a client may set.
func DefaultCeiling() domain.ProcessConfig {
	return domain.ProcessConfig{
		MaxConcurrentProcesses:  1024,
		DefaultRunTimeoutMs:     24 * 3600 * 1000,
		MaxRunTimeoutMs:         24 * 3600 * 1000,
		MaxOutputBytes:          64 << 20,
		MaxLogBytesPerProcess:   64 << 20,
		MaxInputBytesPerRequest: 16 << 20,
	}
}

// DefaultLogTotal is the default of Options.LogTotal (--process-log-total).
const DefaultLogTotal = 256 << 20

// MaxSignalWait bounds waitMs of stop and kill.
const MaxSignalWait = 60 * time.Second

// Service runs and manages user processes. Safe for concurrent use.
type Service struct {
	starter ports.ProcessStarter
	opts    Options
	log     *slog.Logger
	pool    *seqring.Pool // --process-log-total: every log and run capture

	mu     sync.Mutex
	cfg    domain.ProcessConfig
	procs  map[string]*proc
	exited []string // ids of exited processes, oldest exit first
	nextID uint64
	live   int // processes and runs started and not yet reaped
	runs   map[ports.Process]struct{}
	closed bool
	wg     sync.WaitGroup // supervisors and runs

	metrics metrics
}

// New returns a Service starting processes through starter.
func New(starter ports.ProcessStarter, opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Config == (domain.ProcessConfig{}) {
		opts.Config = domain.DefaultProcessConfig()
	}
	if opts.Ceiling == (domain.ProcessConfig{}) {
		opts.Ceiling = DefaultCeiling()
	}
	opts.Config = clampConfig(opts.Config, opts.Ceiling)
	opts.MaxExited = cmp.Or(max(opts.MaxExited, 0), 256)
	opts.MaxExitedLogBytes = cmp.Or(max(opts.MaxExitedLogBytes, 0), 256<<20)
	opts.DrainGrace = cmp.Or(max(opts.DrainGrace, 0), time.Second)
	opts.LogTotal = cmp.Or(max(opts.LogTotal, 0), DefaultLogTotal)
	return &Service{
		starter: starter, opts: opts, log: opts.Logger, pool: seqring.NewPool(opts.LogTotal),
		cfg: opts.Config, procs: map[string]*proc{}, runs: map[ports.Process]struct{}{}, nextID: 1,
	}
}

// Config returns the runtime configuration.
func (s *Service) Config() domain.ProcessConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

// SetConfig replaces the runtime configuration. Every value must be
// positive and within the ceiling; a default run timeout above the maximum
// is lowered to it. Processes already running keep their log size.
func (s *Service) SetConfig(c domain.ProcessConfig) (domain.ProcessConfig, error) {
	ceil := s.opts.Ceiling
	checks := []struct {
		name, flag string
		val, max   int64
	}{
		{"maxConcurrentProcesses", "--process-max-concurrent", int64(c.MaxConcurrentProcesses), int64(ceil.MaxConcurrentProcesses)},
		{"defaultRunTimeoutMs", "--process-max-run-timeout", c.DefaultRunTimeoutMs, ceil.MaxRunTimeoutMs},
		{"maxRunTimeoutMs", "--process-max-run-timeout", c.MaxRunTimeoutMs, ceil.MaxRunTimeoutMs},
		{"maxOutputBytes", "--process-max-output-bytes", int64(c.MaxOutputBytes), int64(ceil.MaxOutputBytes)},
		{"maxLogBytesPerProcess", "--process-max-log-bytes", int64(c.MaxLogBytesPerProcess), int64(ceil.MaxLogBytesPerProcess)},
		{"maxInputBytesPerRequest", "--process-max-input-bytes", int64(c.MaxInputBytesPerRequest), int64(ceil.MaxInputBytesPerRequest)},
	}
	for _, ch := range checks {
		if ch.val <= 0 {
			return domain.ProcessConfig{}, domain.InvalidRequest("%s must be greater than 0", ch.name)
		}
		if ch.val > ch.max {
			return domain.ProcessConfig{}, domain.InvalidRequest("%s must be at most %d (the daemon's %s)", ch.name, ch.max, ch.flag)
		}
	}
	if c.DefaultRunTimeoutMs > c.MaxRunTimeoutMs {
		c.DefaultRunTimeoutMs = c.MaxRunTimeoutMs
	}
	s.mu.Lock()
	s.cfg = c
	s.mu.Unlock()
	return c, nil
}

// clampConfig lowers what c sets past the ceiling to it: an operator's
// ceiling below a default lowers the default.
func clampConfig(c, ceil domain.ProcessConfig) domain.ProcessConfig {
	c.MaxConcurrentProcesses = min(c.MaxConcurrentProcesses, ceil.MaxConcurrentProcesses)
	c.MaxRunTimeoutMs = min(c.MaxRunTimeoutMs, ceil.MaxRunTimeoutMs)
	c.DefaultRunTimeoutMs = min(c.DefaultRunTimeoutMs, c.MaxRunTimeoutMs)
	c.MaxOutputBytes = min(c.MaxOutputBytes, ceil.MaxOutputBytes)
	c.MaxLogBytesPerProcess = min(c.MaxLogBytesPerProcess, ceil.MaxLogBytesPerProcess)
	c.MaxInputBytesPerRequest = min(c.MaxInputBytesPerRequest, ceil.MaxInputBytesPerRequest)
	return c
}

// reserve counts one more live process, or refuses past the cap.
func (s *Service) reserve() (domain.ProcessConfig, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.cfg, domain.Conflict("the daemon is shutting down")
	}
	if s.live >= s.cfg.MaxConcurrentProcesses {
		msg := fmt.Sprintf("%d processes are running, the maximum (maxConcurrentProcesses)", s.live)
		return s.cfg, domain.TooManyRequests(msg, s.cfg.MaxConcurrentProcesses)
	}
	s.live++
	return s.cfg, nil
}

func (s *Service) release() {
	s.mu.Lock()
	s.live--
	s.mu.Unlock()
}

// spec validates and resolves what a create or run asks for.
func (s *Service) spec(ctx context.Context, command string, args []string, cwd *string, env map[string]string) (domain.ProcessSpec, error) {
	if strings.TrimSpace(command) == "" {
		return domain.ProcessSpec{}, domain.InvalidRequest("command must not be empty")
	}
	if strings.IndexByte(command, 0) >= 0 {
		return domain.ProcessSpec{}, domain.InvalidRequest("command contains a NUL byte")
	}
	for _, a := range args {
		if strings.IndexByte(a, 0) >= 0 {
			return domain.ProcessSpec{}, domain.InvalidRequest("args contain a NUL byte")
		}
	}
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return domain.ProcessSpec{}, domain.InvalidRequest("invalid environment variable %q", k)
		}
	}
	spec := domain.ProcessSpec{Command: command, Args: args, Env: env, Dir: s.opts.DefaultDir}
	if cwd != nil && *cwd != "" {
		dir := *cwd
		if s.opts.ResolveDir != nil {
			var err error
			if dir, err = s.opts.ResolveDir(ctx, *cwd); err != nil {
				return domain.ProcessSpec{}, err
			}
		}
		spec.Dir = dir
	}
	if err := s.guard(spec); err != nil {
		return domain.ProcessSpec{}, err
	}
	return spec, nil
}

// guard refuses a spec whose working directory, or whose command when it
// is a path, is one of the daemon's secrets.
func (s *Service) guard(spec domain.ProcessSpec) error {
	if s.opts.Secrets == nil {
		return nil
	}
	if spec.Dir != "" {
		if why := s.opts.Secrets.Secret(spec.Dir, true); why != "" {
			return domain.PermissionDenied(fmt.Sprintf("cwd %s is one of the daemon's own secrets (%s)", spec.Dir, why))
		}
	}
	if strings.Contains(spec.Command, "/") {
		cmd := spec.Command
		if !strings.HasPrefix(cmd, "/") && spec.Dir != "" {
			cmd = spec.Dir + "/" + cmd // relative to where it will run
		}
		if why := s.opts.Secrets.Secret(cmd, true); why != "" {
			return domain.PermissionDenied(fmt.Sprintf("command %s is one of the daemon's own secrets (%s)", spec.Command, why))
		}
	}
	return nil
}

// Create starts a managed process.
func (s *Service) Create(ctx context.Context, req domain.ProcessCreateRequest) (domain.ProcessInfo, error) {
	spec, err := s.spec(ctx, req.Command, req.Args, req.Cwd, req.Env)
	if err != nil {
		return domain.ProcessInfo{}, err
	}
	spec.TTY = req.TTY
	// As in the reference, a pipe-mode process always gets a stdin pipe;
	// interactive is recorded for clients.
	spec.Stdin = !req.TTY
	cfg, err := s.reserve()
	if err != nil {
		return domain.ProcessInfo{}, err
	}
	p, err := s.starter.Start(ctx, spec)
	if err != nil {
		s.release()
		s.metrics.spawnFailed()
		return domain.ProcessInfo{}, startError(req.Command, err)
	}
	s.metrics.spawned()
	pr := newProc(p, req, spec.Dir, cfg.MaxLogBytesPerProcess, s.pool)
	s.mu.Lock()
	pr.seq = s.nextID
	pr.id = "proc_" + strconv.FormatUint(s.nextID, 10)
	s.nextID++
	s.procs[pr.id] = pr
	closed := s.closed
	s.wg.Add(1)
	s.mu.Unlock()
	pr.pump()
	go s.supervise(pr)
	if closed {
		// Close took its snapshot before this process was registered.
		_ = p.Signal(domain.SignalKill)
	}
	return pr.info(), nil
}

// supervise waits for pr to end, then records it.
func (s *Service) supervise(pr *proc) {
	defer s.wg.Done()
	st := pr.wait(s.opts.DrainGrace)
	s.metrics.exited(st)
	s.mu.Lock()
	s.live--
	// done is closed only once the slot is free, so a client that saw the
	// exit (stop/kill with waitMs) can start the next process at once.
	close(pr.done)
	if s.procs[pr.id] == pr { // not deleted in the meantime
		s.exited = append(s.exited, pr.id)
	}
	var held int64
	for _, id := range s.exited {
		if o := s.procs[id]; o != nil {
			held += o.log.Size()
		}
	}
	for len(s.exited) > s.opts.MaxExited || (held > s.opts.MaxExitedLogBytes && len(s.exited) > 0) {
		old := s.exited[0]
		s.exited = s.exited[1:]
		if o := s.procs[old]; o != nil {
			held -= o.log.Size()
			delete(s.procs, old)
			o.log.close()
		}
	}
	s.mu.Unlock()
}

func startError(command string, err error) error {
	if _, ok := domain.AsError(err); ok {
		return err
	}
	// The innermost cause is the system's reason ("too many open
	// files", "resource temporarily unavailable"), without the paths the
	// layers above it name.
	cause := err
	for errors.Unwrap(cause) != nil {
		cause = errors.Unwrap(cause)
	}
	return domain.StreamError("failed to start process: " + command + ": " + cause.Error()).Because(err)
}

// lookup finds a process or fails with not_found.
func (s *Service) lookup(id string) (*proc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pr := s.procs[id]; pr != nil {
		return pr, nil
	}
	return nil, domain.ResourceNotFound("process", id)
}

// List describes every process kept, optionally only one owner's, in the
// order they were created.
func (s *Service) List(owner domain.ProcessOwner) []domain.ProcessInfo {
	s.mu.Lock()
	procs := make([]*proc, 0, len(s.procs))
	for _, pr := range s.procs {
		procs = append(procs, pr)
	}
	s.mu.Unlock()
	sort.Slice(procs, func(i, j int) bool { return procs[i].seq < procs[j].seq })
	out := make([]domain.ProcessInfo, 0, len(procs))
	for _, pr := range procs {
		if owner == "" || owner == domain.OwnerUser {
			out = append(out, pr.info())
		}
	}
	return out
}

// Get describes one process.
func (s *Service) Get(id string) (domain.ProcessInfo, error) {
	pr, err := s.lookup(id)
	if err != nil {
		return domain.ProcessInfo{}, err
	}
	return pr.info(), nil
}

// IsTTY reports whether process id runs on a terminal.
func (s *Service) IsTTY(id string) (bool, error) {
	pr, err := s.lookup(id)
	if err != nil {
		return false, err
	}
	return pr.tty, nil
}

// Signal sends sig to process id's group, then waits up to wait for it to
// exit (bounded by MaxSignalWait and ctx), and describes it. Signalling an
// exited process is not an error.
func (s *Service) Signal(ctx context.Context, id string, sig domain.Signal, wait time.Duration) (domain.ProcessInfo, error) {
	pr, err := s.lookup(id)
	if err != nil {
		return domain.ProcessInfo{}, err
	}
	if err := pr.p.Signal(sig); err != nil {
		return domain.ProcessInfo{}, fmt.Errorf("signal %s: %w", id, err)
	}
	wait = min(wait, MaxSignalWait)
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-pr.done:
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return pr.info(), nil
}

// Delete forgets an exited process (its log goes, its followers end).
// A running process is a conflict: stop or kill it first.
func (s *Service) Delete(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.procs[id]
	if pr == nil {
		return domain.ResourceNotFound("process", id)
	}
	select {
	case <-pr.done:
	default:
		msg := "process is still running; stop or kill it before delete"
		return domain.Conflict(msg)
	}
	delete(s.procs, id)
	for i, e := range s.exited {
		if e == id {
			s.exited = append(s.exited[:i], s.exited[i+1:]...)
			break
		}
	}
	pr.log.close()
	return nil
}

// Input writes data to process id's stdin (or terminal). It fails with 413
// past the configured size, 409 once the process has exited.
func (s *Service) Input(ctx context.Context, id string, data []byte) (int, error) {
	limit := s.Config().MaxInputBytesPerRequest
	if len(data) > limit {
		return 0, domain.TooLarge(int64(limit), "input of %d bytes exceeds maxInputBytesPerRequest (%d)", len(data), limit)
	}
	pr, err := s.lookup(id)
	if err != nil {
		return 0, err
	}
	return pr.write(ctx, data)
}

// Resize sets process id's terminal size. Zero is allowed, as the kernel
// and the reference allow it (the size is unknown: programs fall back to
// their defaults), so a client that sizes a hidden terminal at 0×0 is
// not refused.
func (s *Service) Resize(id string, cols, rows int) error {
	if cols < 0 || rows < 0 || cols > 65535 || rows > 65535 {
		return domain.InvalidRequest("cols and rows must be between 0 and 65535")
	}
	pr, err := s.lookup(id)
	if err != nil {
		return err
	}
	return pr.resize(uint16(cols), uint16(rows))
}

// Close stops every process and run: SIGTERM to each group at once,
// SIGKILL to those left when ctx is done, and waits until all are reaped. New
// processes are refused from the start. Idempotent.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	procs := make([]ports.Process, 0, len(s.procs)+len(s.runs))
	for _, pr := range s.procs {
		procs = append(procs, pr.p)
	}
	for p := range s.runs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	for _, p := range procs {
		_ = p.Signal(domain.SignalTerm)
	}
	allDone := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(allDone)
	}()
	select {
	case <-allDone:
		return nil
	case <-ctx.Done():
	}
	for _, p := range procs {
		_ = p.Signal(domain.SignalKill)
	}
	<-allDone
	return nil
}

// errNotRunning is a 409: the process has exited.
func errNotRunning() error {
	msg := "process is not running"
	return domain.Conflict(msg)
}

var errNoTerminal = errors.New("process is not running in tty mode")

func conflict(err error) error {
	return domain.Conflict(err.Error())
}
