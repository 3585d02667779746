package porttest

import (
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

func TestFakeStarterContract(t *testing.T) {
	ProcessStarterContract(t, &FakeStarter{},
		domain.ProcessSpec{Command: "cat", Stdin: true},
		domain.ProcessSpec{Command: "sleep", Args: []string{"300"}})
}
