package fsys

import (
	"os"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

func TestSpillContract(t *testing.T) {
	dir := t.TempDir()
	porttest.SpillContract(t, &Spill{Dir: dir})
	// Nothing is left behind by name, open or closed.
	s := &Spill{Dir: dir}
	f, err := s.Create()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("spill files are visible: %v", entries)
	}
	if _, err := (&Spill{Dir: dir + "/missing"}).Create(); err == nil {
		t.Fatal("a spill in a missing directory was created")
	}
	if _, err := (&Spill{Dir: dir + "/missing"}).Check(); err == nil {
		t.Fatal("Check passed a missing directory")
	}
	if _, err := (&Spill{Dir: dir}).Check(); err != nil {
		t.Fatal(err)
	}
	if tmpfs, err := (&Spill{Dir: "/dev/shm"}).Check(); err == nil && !tmpfs {
		t.Error("/dev/shm is not seen as tmpfs")
	}
}
