package acp

import (
	"context"
	"errors"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// A POST runs only on what the auth chain judged (PostRequest.Judged).
// The interleavings are forced: each judgement is taken with Instance, the
// world changes, then the post executes.
func TestJudgedPostRunsWhatWasJudged(t *testing.T) {
	ctx := context.Background()
	runner := &porttest.FakeRunner{}
	s := NewInstances(Options{}, runner, porttest.LaunchAny)
	defer s.Close(ctx) //nolint:errcheck // test cleanup
	judge := func(id string) *Judgement {
		_, gen := s.Instance(id)
		return &Judgement{Generation: gen}
	}

	// Judged as a start (no instance, no ?agent), then an admin starts a
	// forbidden agent under the id: the post is not delivered to it.
	j := judge("x")
	if _, err := s.Post(ctx, PostRequest{ServerID: "x", Agent: "forbidden", HasAgent: true, Frame: frame(t, note), Judged: judge("x")}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Post(ctx, PostRequest{ServerID: "x", Frame: frame(t, note), Judged: j})
	if !errors.Is(err, ErrInstanceChanged) || !domain.IsKind(err, domain.KindConflict) {
		t.Fatalf("a post judged as a start was run on an instance that appeared meanwhile: %v", err)
	}
	// Judged again, as the send it now is: delivered.
	if _, err := s.Post(ctx, PostRequest{ServerID: "x", Frame: frame(t, note), Judged: judge("x")}); err != nil {
		t.Fatalf("a post judged on the instance: %v", err)
	}

	// Judged as a send, then the instance is deleted: 404, never a start.
	j = judge("x")
	s.Delete(ctx, "x")
	if _, err := s.Post(ctx, PostRequest{ServerID: "x", Agent: "a", HasAgent: true, Frame: frame(t, note), Judged: j}); !domain.IsKind(err, domain.KindSessionNotFound) {
		t.Fatalf("a send to a deleted instance: %v, want session_not_found", err)
	}
	if l := s.List(); len(l) != 0 {
		t.Fatalf("a send started an instance: %+v", l)
	}

	// Judged as a send, then the id is deleted and started again (same
	// agent even): another instance, refused.
	if _, err := s.Post(ctx, PostRequest{ServerID: "x", Agent: "a", HasAgent: true, Frame: frame(t, note), Judged: judge("x")}); err != nil {
		t.Fatal(err)
	}
	j = judge("x")
	s.Delete(ctx, "x")
	if _, err := s.Post(ctx, PostRequest{ServerID: "x", Agent: "a", HasAgent: true, Frame: frame(t, note), Judged: judge("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Post(ctx, PostRequest{ServerID: "x", Frame: frame(t, note), Judged: j}); !errors.Is(err, ErrInstanceChanged) {
		t.Fatalf("a send judged on a replaced instance: %v", err)
	}
	if n := len(runner.Processes()); n != 3 {
		t.Fatalf("%d agents started, want 3", n)
	}
}

// The same race through the bootstrap: the post judged as a start arrives
// while another client's start of the id is under way, waits for it, and
// then refuses the instance it did not start.
func TestJudgedStartWaitingForAnotherBootstrap(t *testing.T) {
	ctx := context.Background()
	release := make(chan struct{})
	launched := make(chan struct{})
	s := NewInstances(Options{}, &porttest.FakeRunner{}, porttest.LaunchFunc(func(ctx context.Context, agent string) (domain.LaunchSpec, error) {
		close(launched)
		<-release
		return porttest.LaunchAny(ctx, agent)
	}))
	defer s.Close(ctx) //nolint:errcheck // test cleanup
	waiting := make(chan struct{})
	s.onWait = func(string) { close(waiting) }

	admin := make(chan error, 1)
	go func() {
		_, err := s.Post(ctx, PostRequest{ServerID: "x", Agent: "forbidden", HasAgent: true, Frame: frame(t, note), Judged: &Judgement{}})
		admin <- err
	}()
	<-launched // the admin's bootstrap holds the id
	client := make(chan error, 1)
	go func() {
		_, err := s.Post(ctx, PostRequest{ServerID: "x", Agent: "forbidden", HasAgent: true, Frame: frame(t, note), Judged: &Judgement{}})
		client <- err
	}()
	<-waiting // the client's post waits for that bootstrap
	close(release)
	if err := <-admin; err != nil {
		t.Fatal(err)
	}
	if err := <-client; !errors.Is(err, ErrInstanceChanged) {
		t.Fatalf("a post judged as a start was delivered to another's instance: %v", err)
	}
}
