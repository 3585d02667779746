package route

import (
	"context"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/app/authz"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// A stream decided before a reload but registered after the reload's
// snapshot of the open streams (its handler had not got there yet) is
// judged as it registers: it cannot slip past the revocation.
func TestRevocableAfterReloadSnapshot(t *testing.T) {
	tokens := authz.NewTokens("tok-a")
	e := &Env{Chain: &authz.Chain{Tokens: tokens}, Streams: NewStreams()}
	req := func(tok string) domain.AuthRequest {
		return domain.AuthRequest{Action: domain.ActionACPRead, Headers: map[string][]string{"authorization": {"Bearer " + tok}}}
	}
	decided, err := e.Authorize(context.Background(), req("tok-a"))
	if err != nil {
		t.Fatal(err)
	}
	tokens.Set([]string{"tok-b"})
	if n := e.Streams.Rejudge(context.Background()); n != 0 {
		t.Fatalf("rejudged %d streams, none open", n)
	}
	revoked := 0
	release := Revocable(decided, func() { revoked++ })
	defer release()
	if revoked != 1 {
		t.Errorf("a stream authorised by a revoked token registered after the reload: revoked %d times", revoked)
	}

	// One decided after the reload, with a current token, stays; a later
	// reload that keeps its token too; one that drops it ends it, once.
	fresh, err := e.Authorize(context.Background(), req("tok-b"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	defer Revocable(fresh, func() { n++ })()
	e.Streams.Rejudge(context.Background())
	tokens.Set([]string{"tok-c"})
	e.Streams.Rejudge(context.Background())
	e.Streams.Rejudge(context.Background())
	if n != 1 || revoked != 1 {
		t.Errorf("revoked %d and %d times, want once each", n, revoked)
	}
	release()
	if got := e.Streams.Len(); got != 1 {
		t.Errorf("%d streams registered after one released", got)
	}
}
