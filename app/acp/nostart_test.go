package acp

import (
	"context"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// A POST authorised as acp.send (NoStart) never bootstraps an instance:
// if the instance went away after the decision, it is 404, not a start in
// the sender's name.
func TestNoStartNeverBootstraps(t *testing.T) {
	runner := &porttest.FakeRunner{}
	s := NewInstances(Options{}, runner, porttest.LaunchAny)
	defer s.Close(context.Background()) //nolint:errcheck // test cleanup
	req := PostRequest{ServerID: "gone", Agent: "a", HasAgent: true, Frame: frame(t, note), NoStart: true}
	if _, err := s.Post(context.Background(), req); !domain.IsKind(err, domain.KindSessionNotFound) {
		t.Fatalf("got %v, want session_not_found", err)
	}
	if l := s.List(); len(l) != 0 {
		t.Errorf("an instance was started: %+v", l)
	}
	req.NoStart = false
	if _, err := s.Post(context.Background(), req); err != nil {
		t.Fatalf("a start allowed to start: %v", err)
	}
	req.NoStart = true // an existing instance takes the message
	if _, err := s.Post(context.Background(), req); err != nil {
		t.Fatalf("send to the live instance: %v", err)
	}
}
