package wasmpolicy

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

var (
	_ ports.Authorizer         = (*Reloadable)(nil)
	_ ports.BodylessAuthorizer = (*Reloadable)(nil)
)

// Reloadable is the Authorizer the daemon holds: the current Set behind an
// atomic pointer, so a reload (SIGHUP) swaps policies without a lock on
// the request path and without dropping a request.
type Reloadable struct {
	cur atomic.Pointer[Set]
}

// NewReloadable starts with set.
func NewReloadable(set *Set) *Reloadable {
	r := &Reloadable{}
	r.cur.Store(set)
	return r
}

// Authorize asks the current Set. A call that reaches a Set just replaced
// and closed asks its successor.
func (r *Reloadable) Authorize(ctx context.Context, req domain.AuthRequest) (domain.Decision, error) {
	for {
		set := r.cur.Load()
		d, err := set.Authorize(ctx, req)
		if errors.Is(err, errPolicyClosed) && r.cur.Load() != set {
			continue
		}
		return d, err
	}
}

// AuthorizeWithoutBody asks the current Set, as Authorize does
// (ports.BodylessAuthorizer).
func (r *Reloadable) AuthorizeWithoutBody(ctx context.Context, req domain.AuthRequest) (domain.Decision, bool, error) {
	for {
		set := r.cur.Load()
		d, ok, err := set.AuthorizeWithoutBody(ctx, req)
		if errors.Is(err, errPolicyClosed) && r.cur.Load() != set {
			continue
		}
		return d, ok, err
	}
}

// Current returns the Set in use.
func (r *Reloadable) Current() *Set { return r.cur.Load() }

// Swap installs set and closes the previous one once its calls in flight
// have finished.
func (r *Reloadable) Swap(ctx context.Context, set *Set) error {
	old := r.cur.Swap(set)
	if old == nil || old == set {
		return nil
	}
	return old.Close(ctx)
}

// Close closes the current Set.
func (r *Reloadable) Close(ctx context.Context) error { return r.cur.Load().Close(ctx) }
