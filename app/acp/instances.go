package acp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/app/internal/seqring"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// Options tune the ACP transport. A zero field means its default (see
// DefaultOptions), except two where zero is a meaningful choice, as their
// flags document: RequestTimeout 0 waits forever, and a nil or empty
// AsyncMethods answers every request synchronously.
type Options struct {
	// RequestTimeout bounds a synchronous request; 0 waits forever.
	RequestTimeout time.Duration
	// AsyncMethods are answered 202 at once; their response comes on SSE.
	// Nil or empty: none.
	AsyncMethods map[string]bool
	// ReplayBytes is the per-instance event log budget.
	ReplayBytes int64
	// ReplayTotal bounds all event logs together; past it the oldest
	// events of the largest logs go first.
	ReplayTotal int64
	// Spill, when set, holds the older part of each event log in a file
	// of its own (see EventLog); nil keeps every log in memory.
	Spill ports.Spill
	// MaxInstances bounds live agents (running or still stopping); a POST
	// that would start one more gets too_many_instances.
	MaxInstances int
	// ExitedTTL is how long an exited instance stays listed (with its
	// stderr tail and replay); MaxExited bounds how many stay.
	ExitedTTL time.Duration
	MaxExited int
	// MaxFrameBytes bounds one line of agent stdout.
	MaxFrameBytes int
	// StopGrace is how long an agent has between SIGTERM and SIGKILL.
	StopGrace time.Duration
	// WriteTimeout bounds one write to an agent's stdin.
	WriteTimeout time.Duration
	// BarrierTimeout bounds the flush barrier before a synchronous answer.
	BarrierTimeout time.Duration
	// Logger hears instance lifecycles and agent stderr; nil discards.
	Logger *slog.Logger
	// Now is the clock for creation times; nil means time.Now.
	Now func() time.Time
}

// DefaultOptions are the documented defaults of docs/api.md section 4.
func DefaultOptions() Options {
	return Options{
		RequestTimeout: 120 * time.Second,
		AsyncMethods:   map[string]bool{"session/prompt": true},
		ReplayBytes:    16 << 20,
		ReplayTotal:    512 << 20,
		MaxInstances:   100,
		ExitedTTL:      10 * time.Minute,
		MaxExited:      100,
		MaxFrameBytes:  64 << 20,
		StopGrace:      3 * time.Second,
		WriteTimeout:   30 * time.Second,
		BarrierTimeout: time.Second,
	}
}

func (o *Options) fill() {
	d := DefaultOptions()
	if o.AsyncMethods == nil {
		o.AsyncMethods = map[string]bool{}
	}
	o.ReplayBytes = cmp.Or(max(o.ReplayBytes, 0), d.ReplayBytes)
	o.ReplayTotal = cmp.Or(max(o.ReplayTotal, 0), d.ReplayTotal)
	o.MaxInstances = cmp.Or(max(o.MaxInstances, 0), d.MaxInstances)
	o.ExitedTTL = cmp.Or(max(o.ExitedTTL, 0), d.ExitedTTL)
	o.MaxExited = cmp.Or(max(o.MaxExited, 0), d.MaxExited)
	o.MaxFrameBytes = cmp.Or(max(o.MaxFrameBytes, 0), d.MaxFrameBytes)
	o.StopGrace = cmp.Or(max(o.StopGrace, 0), d.StopGrace)
	o.WriteTimeout = cmp.Or(max(o.WriteTimeout, 0), d.WriteTimeout)
	o.BarrierTimeout = cmp.Or(max(o.BarrierTimeout, 0), d.BarrierTimeout)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Launcher turns an agent id into a launch spec, installing the agent first
// when that is allowed. Errors carry domain kinds: unsupported_agent,
// agent_not_installed, install_failed.
type Launcher interface {
	Launch(ctx context.Context, agent string) (domain.LaunchSpec, error)
}

// Instances owns every ACP server instance of the daemon.
type Instances struct {
	opts     Options
	runner   ports.AgentRunner
	launcher Launcher
	metrics  Metrics // read through Instances.Metrics

	replay *seqring.Pool // the budget all event logs share

	mu       sync.Mutex
	byID     map[string]*instance
	creating map[string]chan struct{} // closed when a bootstrap of the id ends
	// live counts agents that exist or are being started: reserved before
	// a spawn, released when the spawn fails or the agent has exited.
	live int
	// exited lists the exited instances still in byID, oldest exit first;
	// each leaves after ExitedTTL (its timer) or when MaxExited is passed.
	exited []*instance
	// lastGen numbers the instances as they are listed (instance.gen), so
	// that a decision taken on one is never executed on another of the
	// same id (PostRequest.Judged).
	lastGen uint64
	closed  bool
	wg      sync.WaitGroup // instances being stopped

	// onWait, when set (tests), is called when a post starts waiting for
	// another post's bootstrap of the same id.
	onWait func(id string)
}

// NewInstances wires the ACP use cases.
func NewInstances(opts Options, runner ports.AgentRunner, launcher Launcher) *Instances {
	opts.fill()
	return &Instances{
		opts:     opts,
		runner:   runner,
		launcher: launcher,
		replay:   seqring.NewPool(opts.ReplayTotal),
		byID:     map[string]*instance{},
		creating: map[string]chan struct{}{},
	}
}

// PostRequest is one client message for an instance.
type PostRequest struct {
	ServerID string       // the instance's id, from the URL
	Agent    string       // the ?agent= query value
	HasAgent bool         // whether ?agent= was given at all
	Frame    domain.Frame // the classified body, sent to stdin unchanged
	// Judged, when set, is what the auth chain decided on: the post runs
	// only if reality still is what was judged (see Judgement). Nil
	// (tests, callers without a chain) takes the instance as it is.
	Judged *Judgement

	routes *routes // for a connection of ACP's standard transport (Connect)
}

// Judgement is the instance a POST was authorised against, as Instance
// reported it when the request was described: Generation 0 when the id had
// no instance (the POST was judged as acp.start of the agent it asks
// for), else the generation of the instance judged as acp.send (with the
// agent it runs). The policies and the token check judged that; Post
// executes exactly that or refuses:
//
//   - judged a start, and an instance appeared meanwhile (another client
//     started one under the id, with an agent nobody checked for this
//     request): ErrInstanceChanged, never delivered to it;
//   - judged a send, and the instance is gone: 404 session_not_found,
//     never a start in the sender's name;
//   - judged a send, and the id now runs another instance (deleted and
//     started again, maybe with another agent): ErrInstanceChanged.
//
// The caller may decide again on ErrInstanceChanged (describe the request
// anew, run the chain, post with the new judgement).
type Judgement struct {
	Generation uint64
}

// ErrInstanceChanged is the refusal of a post whose server id no longer
// has the instance it was authorised against (Judgement). It is a
// conflict (409) whose cause matches this error with errors.Is.
var ErrInstanceChanged = errors.New("the server id's instance changed while the request was authorised")

func instanceChanged(id string) error {
	return domain.Conflict("server '" + id + "' changed while the request was being authorised (another instance was started or replaced under it); retry").Because(ErrInstanceChanged)
}

// Post forwards a client frame, bootstrapping the instance on first use. It
// returns the response bytes for a synchronous request, or nil for 202.
func (s *Instances) Post(ctx context.Context, req PostRequest) ([]byte, error) {
	a, err := s.PostAnswer(ctx, req)
	return a.Data, err
}

// Answer is what a POST gets: a synchronous request's response and the
// id of that response's event on the instance's stream; a zero Answer for
// 202.
type Answer struct {
	Data []byte
	// EventID lets a client that delivers from the stream (to keep the
	// agent's order) take the response from the POST instead, once it has
	// read every event before this one.
	EventID uint64
}

// PostAnswer is Post with the response's event id.
func (s *Instances) PostAnswer(ctx context.Context, req PostRequest) (Answer, error) {
	in, err := s.instanceFor(ctx, req)
	if err != nil {
		return Answer{}, err
	}
	return in.post(ctx, req.Frame, false, "")
}

func (s *Instances) instanceFor(ctx context.Context, req PostRequest) (*instance, error) {
	if req.HasAgent && (req.Agent == "" || !domain.ValidAgentID(req.Agent)) {
		return nil, domain.UnsupportedAgent(req.Agent)
	}
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, errShuttingDown
		}
		if in := s.byID[req.ServerID]; in != nil {
			s.mu.Unlock()
			if req.HasAgent && req.Agent != in.agent {
				return nil, domain.Conflict("server '" + req.ServerID + "' already exists for agent '" + in.agent + "'; requested '" + req.Agent + "'")
			}
			if req.Judged != nil && req.Judged.Generation != in.gen {
				return nil, instanceChanged(req.ServerID)
			}
			return in, nil
		}
		if req.Judged != nil && req.Judged.Generation != 0 {
			// Judged as a send to an instance that is gone: not a start.
			s.mu.Unlock()
			return nil, notFound(req.ServerID)
		}
		if !req.HasAgent {
			s.mu.Unlock()
			return nil, domain.InvalidRequest("missing required 'agent' query parameter for first POST to /v1/acp/%s", req.ServerID)
		}
		if !domain.ValidServerID(req.ServerID) {
			s.mu.Unlock()
			return nil, domain.InvalidRequest("server id must be 1 to %d bytes of valid UTF-8 with no '/' or NUL", domain.MaxServerIDLen)
		}
		if wait, busy := s.creating[req.ServerID]; busy {
			s.mu.Unlock()
			if s.onWait != nil {
				s.onWait(req.ServerID)
			}
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if s.live >= s.opts.MaxInstances {
			s.mu.Unlock()
			return nil, tooManyInstances(s.opts.MaxInstances)
		}
		s.live++ // reserved; released by a failed spawn or the agent's exit
		done := make(chan struct{})
		s.creating[req.ServerID] = done
		s.mu.Unlock()

		in, err := s.create(ctx, req.ServerID, req.Agent, req.routes)
		s.mu.Lock()
		delete(s.creating, req.ServerID)
		if in == nil {
			s.live--
		} else {
			if s.closed {
				s.mu.Unlock()
				close(done)
				in.stop(context.Background(), false)
				return nil, errShuttingDown
			}
			s.lastGen++
			in.gen = s.lastGen
			s.byID[req.ServerID] = in
			if in.exitNoted { // it exited before it was listed
				s.listExitedLocked(in)
			}
		}
		s.mu.Unlock()
		close(done)
		return in, err
	}
}

// tooManyInstances is the 429 of --max-instances. Retry-After is set by the
// HTTP adapter: an instance frees its slot when its agent exits.
func tooManyInstances(limit int) error {
	msg := "the daemon already runs " + strconv.Itoa(limit) + " agents (--max-instances); DELETE one or retry later"
	return domain.TooManyInstances(msg, limit)
}

var errShuttingDown = domain.StreamError("daemon is shutting down")

// create resolves and spawns the agent. The install and spawn outlive the
// request that asked for them: a client giving up mid-install must not leave
// a half-installed agent for the next one.
func (s *Instances) create(ctx context.Context, id, agent string, r *routes) (*instance, error) {
	ctx = context.WithoutCancel(ctx)
	spec, err := s.launcher.Launch(ctx, agent)
	if err != nil {
		return nil, err
	}
	proc, err := s.runner.Start(ctx, spec)
	if err != nil {
		s.metrics.spawnFailed()
		if domain.IsKind(err, domain.KindOverloaded) {
			// The runner says which resource ran out (503, not 502).
			return nil, err
		}
		return nil, domain.StreamError("failed to start agent process: " + err.Error()).Because(err)
	}
	s.metrics.spawned()
	in := newInstance(id, agent, proc, &s.opts, &s.metrics, s.opts.Now(), s.replay, s.exitedOne, r)
	in.logger.Info("agent started", "command", spec.Command, "source", spec.Source)
	return in, nil
}

// exitedOne is called once per instance when its agent has exited and the
// exit is recorded: the agent's slot is free, and the instance, if still
// listed, starts its time on the exited list.
func (s *Instances) exitedOne(in *instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live--
	in.exitNoted = true
	if !s.closed && s.byID[in.id] == in {
		s.listExitedLocked(in)
	}
}

// listExitedLocked starts an exited instance's time on the exited list, and
// forgets the oldest ones past MaxExited.
func (s *Instances) listExitedLocked(in *instance) {
	s.exited = append(s.exited, in)
	in.expiry = time.AfterFunc(s.opts.ExitedTTL, func() { s.expire(in) })
	for len(s.exited) > s.opts.MaxExited {
		s.forgetLocked(s.exited[0])
	}
}

// expire forgets an exited instance whose time is up.
func (s *Instances) expire(in *instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID[in.id] == in {
		s.forgetLocked(in)
	}
}

// forgetLocked removes an exited instance from the table and frees its
// event log. Called with s.mu held.
func (s *Instances) forgetLocked(in *instance) {
	delete(s.byID, in.id)
	s.dropExitedLocked(in)
	s.metrics.retire(in)
	in.log.Close()
	in.log.Release()
}

// dropExitedLocked takes in off the exited list and stops its timer.
func (s *Instances) dropExitedLocked(in *instance) {
	if in.expiry != nil {
		in.expiry.Stop()
	}
	for i, e := range s.exited {
		if e == in {
			s.exited = append(s.exited[:i], s.exited[i+1:]...)
			return
		}
	}
}

// Subscribe opens a reader on an instance's stream; see EventLog.Subscribe.
// The caller must Close the cursor.
func (s *Instances) Subscribe(id string, after *uint64) (*Cursor, error) {
	return s.SubscribeJudged(id, after, nil)
}

// SubscribeJudged is Subscribe on the instance j names (nil: whichever
// id has). The routes on an existing instance (its stream, its stderr,
// DELETE) act, as a POST does (Judgement), only on the instance the auth
// chain judged: judged with no instance (Generation 0, on no agent) or on
// one since replaced, id is as unknown as it was then (404), never the
// instance another client started meanwhile with an agent nobody checked
// for this request.
func (s *Instances) SubscribeJudged(id string, after *uint64, j *Judgement) (*Cursor, error) {
	in := s.judged(id, j)
	if in == nil {
		return nil, notFound(id)
	}
	return in.log.Subscribe(after), nil
}

// judged returns the instance of id if it is the one j names (any, for
// nil j), else nil.
func (s *Instances) judged(id string, j *Judgement) *instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.judgedLocked(id, j)
}

func (s *Instances) judgedLocked(id string, j *Judgement) *instance {
	in := s.byID[id]
	if in == nil || (j != nil && j.Generation != in.gen) {
		return nil
	}
	return in
}

func notFound(id string) error {
	return domain.SessionNotFound(id)
}

// Delete stops and forgets an instance. It is idempotent and returns once the
// agent's process group is gone.
func (s *Instances) Delete(ctx context.Context, id string) {
	s.DeleteJudged(ctx, id, nil)
}

// DeleteJudged is Delete of the instance j names (see SubscribeJudged):
// judged with no instance, or on one since replaced, it stops nothing, as
// if it had run before the instance now under id was started.
func (s *Instances) DeleteJudged(ctx context.Context, id string, j *Judgement) {
	s.mu.Lock()
	in := s.judgedLocked(id, j)
	if in != nil {
		delete(s.byID, id)
		s.dropExitedLocked(in)
		s.metrics.retire(in)
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if in != nil {
		defer s.wg.Done()
		in.stop(ctx, true)
		in.log.Release()
	}
}

// List describes every instance, sorted by server id, exited ones included.
func (s *Instances) List() []ServerInfo {
	s.mu.Lock()
	all := make([]*instance, 0, len(s.byID))
	for _, in := range s.byID {
		all = append(all, in)
	}
	s.mu.Unlock()
	out := make([]ServerInfo, 0, len(all))
	for _, in := range all {
		out = append(out, in.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ServerID < out[j].ServerID })
	return out
}

// AgentOf returns the agent an instance runs, or "" for an unknown id.
func (s *Instances) AgentOf(id string) string {
	agent, _ := s.Instance(id)
	return agent
}

// Instance returns the agent the instance of id runs and its generation
// (see Judgement), or "" and 0 when id has no instance.
func (s *Instances) Instance(id string) (agent string, generation uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in := s.byID[id]; in != nil {
		return in.agent, in.gen
	}
	return "", 0
}

// Stderr returns the buffered stderr tail of an instance.
func (s *Instances) Stderr(id string) (string, error) {
	return s.StderrJudged(id, nil)
}

// StderrJudged is Stderr of the instance j names (see SubscribeJudged).
func (s *Instances) StderrJudged(id string, j *Judgement) (string, error) {
	in := s.judged(id, j)
	if in == nil {
		return "", notFound(id)
	}
	return in.stderr.String(), nil
}

// RunningSince reports, per agent id, the creation time of its oldest
// running instance (for serverStatus in the agent listing).
func (s *Instances) RunningSince() map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]time.Time{}
	for _, in := range s.byID {
		in.mu.Lock()
		exited := in.exited
		in.mu.Unlock()
		if exited {
			continue
		}
		if t, ok := out[in.agent]; !ok || in.createdAt.Before(t) {
			out[in.agent] = in.createdAt
		}
	}
	return out
}

// Close stops every instance in parallel and refuses new ones. It is
// idempotent; it returns when every agent is gone or ctx is done.
func (s *Instances) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	all := s.byID
	s.byID = map[string]*instance{}
	for _, in := range all {
		s.dropExitedLocked(in)
		s.metrics.retire(in)
		s.wg.Add(1)
	}
	s.mu.Unlock()
	for _, in := range all {
		go func() {
			defer s.wg.Done()
			in.stop(ctx, false)
		}()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stopping agents: %w", ctx.Err())
	}
}
