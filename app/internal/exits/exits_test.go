package exits

import (
	"reflect"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

func TestCounterKeysAndOrder(t *testing.T) {
	var c Counter
	if got := c.Snapshot(); got != nil {
		t.Fatalf("empty counter: %v, want nil", got)
	}
	one, zero := 1, 0
	c.Add(domain.ExitStatus{Code: &one})
	c.Add(domain.ExitStatus{Signal: "killed"})
	c.Add(domain.ExitStatus{Code: &one})
	c.Add(domain.ExitStatus{Code: &zero})
	c.Add(domain.ExitStatus{})
	want := []ExitCount{
		{ExitKey{Signal: "killed"}, 1},
		{ExitKey{Signal: "unknown"}, 1},
		{ExitKey{Code: "0"}, 1},
		{ExitKey{Code: "1"}, 2},
	}
	if got := c.Snapshot(); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
