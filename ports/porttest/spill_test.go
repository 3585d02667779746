package porttest

import "testing"

func TestMemSpillContract(t *testing.T) {
	s := &MemSpill{}
	SpillContract(t, s)
	if s.OpenFiles() != 0 {
		t.Fatalf("%d files left open", s.OpenFiles())
	}
}
