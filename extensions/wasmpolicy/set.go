package wasmpolicy

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/abi"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

var (
	_ ports.Authorizer         = (*Set)(nil)
	_ ports.BodylessAuthorizer = (*Set)(nil)
)

// failedDecision is what a failing fail-closed policy answers.
var failedDecision = domain.Decision{Status: 403, Message: "authorization policy failed"}

// records recycles request record buffers.
var records = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// Set is policies applied in order, the policy part of the auth chain:
// the first deny or grant decides; a pass asks the next policy. A pass
// naming a principal authenticates the request for the policies after it
// (each sees the principal in its record) and, when none of them decides,
// the Set answers pass with that principal. It is safe for concurrent use.
type Set struct {
	logger   *slog.Logger
	policies []*Policy

	// mu is held shared by every call and exclusively by Close, so closing
	// waits for calls in flight and later calls see closed.
	mu     sync.RWMutex
	closed bool

	// failed, when set, is told of every policy failure (RunCases: a
	// failure is never the decision a case wants, even when failing
	// closed denies as the case expects).
	failed func(policy string, err error)
}

// Policies returns the set's policies, in order.
func (s *Set) Policies() []*Policy { return s.policies }

// Authorize asks the policies in turn and returns the decision with By set
// to the deciding (or authenticating) policy's name. A policy that fails
// (trap, time limit, unreadable answer) is logged and then denies the
// request, or passes when its spec says fail=open. The error is non-nil
// only when the request itself ended while waiting for an instance.
func (s *Set) Authorize(ctx context.Context, req domain.AuthRequest) (domain.Decision, error) {
	d, _, err := s.authorize(ctx, req, 0)
	return d, err
}

// bodyFields are the record's fields a request may take from its body
// (ports.BodylessAuthorizer): a move's paths, an ACP POST's RPC parts.
const bodyFields = 1<<abi.FieldFSPath | 1<<abi.FieldFSDest |
	1<<abi.FieldRPCKind | 1<<abi.FieldRPCID | 1<<abi.FieldRPCMethod

// AuthorizeWithoutBody decides a request described without its body
// (ports.BodylessAuthorizer). Each policy's decision must be known not to
// depend on the body's fields: declared cacheable, and made without
// reading them (or found in the decision cache under a decision that did
// not read them). The first policy that cannot say so makes ok false, as
// does a failing one; a cache=off policy cannot say so.
func (s *Set) AuthorizeWithoutBody(ctx context.Context, req domain.AuthRequest) (domain.Decision, bool, error) {
	req.FSPath, req.FSDest, req.RPC = "", "", nil
	return s.authorize(ctx, req, bodyFields)
}

// authorize runs the chain of policies; unknown is as for Policy.decide.
func (s *Set) authorize(ctx context.Context, req domain.AuthRequest, unknown uint32) (domain.Decision, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return domain.Decision{}, false, errPolicyClosed
	}
	if len(s.policies) == 0 {
		return domain.Decision{Verdict: domain.Pass, Principal: req.Principal}, true, nil
	}
	buf := records.Get().(*[]byte)
	defer records.Put(buf)
	*buf = abi.AppendRequest((*buf)[:0], &req)
	result := domain.Decision{Verdict: domain.Pass, Principal: req.Principal}
	for _, p := range s.policies {
		d, ok, err := p.decide(ctx, *buf, unknown)
		if err != nil {
			var gone *requestGone
			if errors.As(err, &gone) {
				return domain.Decision{}, false, gone.cause
			}
			if unknown != 0 {
				return domain.Decision{}, false, nil // failures are for the whole request
			}
			p.logger.Warn("policy failed", "err", err, "fail_open", p.spec.FailOpen,
				"action", req.Action, "method", req.Method, "path", req.Path)
			if s.failed != nil {
				s.failed(p.spec.Name, err)
			}
			if p.spec.FailOpen {
				continue
			}
			d, ok = failedDecision, true
		}
		if !ok {
			return domain.Decision{}, false, nil
		}
		switch d.Verdict {
		case domain.Deny:
			d.By, d.Principal = p.spec.Name, result.Principal
			return d, true, nil
		case domain.Grant:
			d.Principal = cmp.Or(d.Principal, p.spec.Name)
			d.By = p.spec.Name
			return d, true, nil
		}
		if d.Principal != "" && d.Principal != result.Principal {
			result.Principal, result.By = d.Principal, p.spec.Name
			*buf = abi.SetPrincipal(*buf, d.Principal)
		}
	}
	return result, true, nil
}

// Close waits for calls in flight, then closes every policy. It is
// idempotent.
func (s *Set) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, p := range s.policies {
		errs = append(errs, p.Close(ctx))
	}
	return errors.Join(errs...)
}
