package wasmpolicy

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/abi"
)

// instance is one instantiated module. It serves one call at a time (the
// pool hands it to one caller) and is never used again once broken.
type instance struct {
	mod    api.Module
	mem    api.Memory
	alloc  api.Function
	decide api.Function
	logs   *lineLogger

	// The input buffer the guest handed out by policy_alloc.
	inPtr, inCap uint32
	stack        [2]uint64
	// version is the ABI version the module was built for.
	version uint32
	// broken is set after a trap, a timeout, an answer that could not be
	// read, or an error verdict: the instance's state is unknown and it
	// must be thrown away.
	broken bool
	// impure is set when the module reads the clock or random bytes; the
	// decision of a call that did is never cached, whatever the policy
	// declared (see decisionCache).
	impure bool
}

// The module's clocks and random source: the real ones, noting each use.
func (in *instance) walltime() (int64, int32) {
	in.impure = true
	now := time.Now()
	return now.Unix(), int32(now.Nanosecond())
}

func (in *instance) nanotime() int64 {
	in.impure = true
	return int64(time.Since(clockBase))
}

// clockBase anchors the modules' monotonic clock.
var clockBase = time.Now()

type noteRandom struct{ in *instance }

func (r noteRandom) Read(b []byte) (int, error) {
	r.in.impure = true
	return rand.Read(b)
}

// newInstance instantiates the module (running _initialize for WASI
// reactors), checks its ABI version and configures the policy.
func (p *Policy) newInstance(ctx context.Context) (*instance, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.spec.InitTimeout)
	defer cancel()
	in := &instance{logs: &lineLogger{logger: p.logger}}
	ctx = context.WithValue(ctx, logsKey{}, in.logs)
	in.logs.begin()
	defer in.logs.end()
	cfg := p.modCfg.
		WithStdout(in.logs.stream("stdout")).
		WithStderr(in.logs.stream("stderr")).
		WithWalltime(in.walltime, sys.ClockResolution(time.Microsecond)).
		WithNanotime(in.nanotime, sys.ClockResolution(1)).
		WithRandSource(noteRandom{in})
	mod, err := p.rt.InstantiateModule(ctx, p.code, cfg)
	if err != nil {
		return nil, fmt.Errorf("start instance: %w", describe(err))
	}
	in.mod, in.mem = mod, mod.Memory()
	in.alloc = mod.ExportedFunction(abi.ExportAlloc)
	in.decide = mod.ExportedFunction(abi.ExportAuthorize)
	if err := in.setup(ctx, p.config); err != nil {
		in.close()
		return nil, err
	}
	return in, nil
}

func (in *instance) setup(ctx context.Context, config []byte) error {
	res, err := in.mod.ExportedFunction(abi.ExportVersion).Call(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", abi.ExportVersion, describe(err))
	}
	v := uint32(res[0])
	if v < abi.MinVersion || v > abi.Version {
		return fmt.Errorf("module was built for policy ABI v%d, but this daemon speaks ABI v%d to v%d; rebuild it with a matching SDK", v, abi.MinVersion, abi.Version)
	}
	in.version = v
	ptr, err := in.write(ctx, config)
	if err != nil {
		return err
	}
	in.stack = [2]uint64{uint64(ptr), uint64(len(config))}
	if err := in.mod.ExportedFunction(abi.ExportInit).CallWithStack(ctx, in.stack[:]); err != nil {
		return fmt.Errorf("%s: %w", abi.ExportInit, describe(err))
	}
	msg, err := in.read(in.stack[0])
	if err != nil {
		return err
	}
	if len(msg) > 0 {
		return fmt.Errorf("configure: %s", abi.CutText(msg))
	}
	return nil
}

// write copies b into the guest's input buffer, growing it by policy_alloc
// when needed, and returns its address.
func (in *instance) write(ctx context.Context, b []byte) (uint32, error) {
	if uint32(len(b)) > in.inCap || in.inCap == 0 {
		size := max(uint32(len(b)), 2*in.inCap, 4096)
		in.stack[0] = uint64(size)
		if err := in.alloc.CallWithStack(ctx, in.stack[:]); err != nil {
			in.broken = true
			return 0, fmt.Errorf("%s: %w", abi.ExportAlloc, describe(err))
		}
		in.inPtr, in.inCap = uint32(in.stack[0]), size
	}
	if !in.mem.Write(in.inPtr, b) {
		in.broken = true
		return 0, fmt.Errorf("%s returned %d, outside the module's memory", abi.ExportAlloc, in.inPtr)
	}
	return in.inPtr, nil
}

// read returns the guest bytes a packed pointer and length designate. The
// slice aliases guest memory: use it before the next call.
func (in *instance) read(packed uint64) ([]byte, error) {
	ptr, n := abi.Unpack(packed)
	if n == 0 {
		return nil, nil
	}
	b, ok := in.mem.Read(ptr, n)
	if !ok {
		in.broken = true
		return nil, fmt.Errorf("answer at %d+%d lies outside the module's memory", ptr, n)
	}
	return b, nil
}

// maxMessage bounds the message a policy may send to a client.
const maxMessage = abi.MaxText

// authorize runs policy_authorize on one request record, bounded by
// timeout. The request's own cancellation is not passed on: a client going
// away must not cost an instance; only the time limit stops a call.
//
// cacheable is the answer record when the decision may be cached: the
// policy sent a vary block and read neither clock nor randomness. It
// aliases guest memory: use it before the instance's next call.
func (in *instance) authorize(ctx context.Context, record []byte, timeout time.Duration) (d domain.Decision, cacheable []byte, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	ctx = context.WithValue(ctx, logsKey{}, in.logs)
	in.logs.begin()
	defer in.logs.end()
	ptr, err := in.write(ctx, record)
	if err != nil {
		return domain.Decision{}, nil, err
	}
	in.stack = [2]uint64{uint64(ptr), uint64(len(record))}
	in.impure = false
	if err := in.decide.CallWithStack(ctx, in.stack[:]); err != nil {
		in.broken = true
		return domain.Decision{}, nil, describe(err)
	}
	out, err := in.read(in.stack[0])
	if err != nil {
		return domain.Decision{}, nil, err
	}
	d, failure, err := abi.ParseAnswer(out, in.version)
	switch {
	case err != nil:
		// An answer that cannot be read says the guest's state is not
		// what its SDK keeps: thrown away, as after a trap.
		in.broken = true
		return domain.Decision{}, nil, err
	case failure != "":
		// The guest could not decide: its state is suspect too, and
		// ABI.md promises such an instance is not reused.
		in.broken = true
		return domain.Decision{}, nil, fmt.Errorf("policy error: %s", truncate(failure))
	}
	if in.version >= 2 && !in.impure {
		// A vary block past maxVaryBlock is not cached: a key is at most
		// maxKeyBytes anyway, and each lookup walks every cached shape.
		if block, ok := abi.VaryBlock(out); !ok || len(block) <= maxVaryBlock {
			cacheable = out
		}
	}
	return normalise(d), cacheable, nil
}

// normalise makes a deny renderable: a status outside 400-599 becomes 403,
// an empty message "denied by policy", a long one is cut. A principal is
// cut like a message.
func normalise(d domain.Decision) domain.Decision {
	if d.Verdict != domain.Deny {
		return domain.Decision{Verdict: d.Verdict, Principal: truncate(d.Principal)}
	}
	if d.Status < 400 || d.Status > 599 {
		d.Status = 403
	}
	d.Message = cmp.Or(d.Message, "denied by policy")
	d.Message = truncate(d.Message)
	return d
}

func truncate(s string) string {
	if len(s) > maxMessage {
		return string(abi.CutText([]byte(s)))
	}
	return s
}

func (in *instance) close() {
	_ = in.mod.Close(context.Background())
	in.logs.flush()
}

// describe turns wazero's errors into what an operator can act on.
func describe(err error) error {
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			return fmt.Errorf("time limit exceeded: %w", err)
		case sys.ExitCodeContextCanceled:
			return fmt.Errorf("cancelled: %w", err)
		}
		return fmt.Errorf("module exited with code %d (a Go panic or fatal error; see its stderr above)", exit.ExitCode())
	}
	return fmt.Errorf("trap: %w", err)
}
