package fsys

import (
	"fmt"
	"os"

	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// Spill makes the scratch files of ports.Spill in one directory: on
// Linux unnamed files (O_TMPFILE), elsewhere, or where the filesystem
// cannot, a temporary file removed as soon as it is open. Either way no
// other process can open it by name, and its space is freed when it is
// closed, or when the daemon dies.
//
// Where Dir is matters: on a disk-backed filesystem the kernel may write
// the bytes out and drop them from memory under pressure; on tmpfs they
// stay in memory (shared memory of the daemon's cgroup), which is no worse
// than the heap but no better for the machine.
type Spill struct {
	Dir string
}

var _ ports.Spill = (*Spill)(nil)

// Create implements ports.Spill.
func (s *Spill) Create() (ports.SpillFile, error) {
	if f, err := openUnnamed(s.Dir); err == nil {
		return &spillFile{f}, nil
	}
	f, err := os.CreateTemp(s.Dir, ".sandbox-agent-spill-*")
	if err != nil {
		return nil, fmt.Errorf("create spill file: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("unlink spill file: %w", err)
	}
	return &spillFile{f}, nil
}

type spillFile struct{ *os.File }

// Discard punches a hole (see punchHole).
func (f *spillFile) Discard(off, n int64) error { return punchHole(f.File, off, n) }

// Check makes and drops one file, so that a directory the daemon cannot
// use is found at start, and reports whether the directory is on tmpfs
// (memory, not disk).
func (s *Spill) Check() (tmpfs bool, err error) {
	f, err := s.Create()
	if err != nil {
		return false, err
	}
	f.Close()
	return onTmpfs(s.Dir), nil
}
