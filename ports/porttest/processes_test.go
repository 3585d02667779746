package porttest

import (
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

func TestFakeStarterContract(t *testing.T) {
	// CatProgram without stdin exits at once, so "sleep" needs its own
	// program: one that runs until a signal ends it. Without this the
	// signal test raced the program's own exit 0.
	s := &FakeStarter{Program: func(spec domain.ProcessSpec, p *FakeUserProcess) {
		if spec.Command == "sleep" {
			<-p.Done()
			return
		}
		CatProgram(spec, p)
	}}
	ProcessStarterContract(t, s,
		domain.ProcessSpec{Command: "cat", Stdin: true},
		domain.ProcessSpec{Command: "sleep", Args: []string{"300"}})
}
