package main

import (
	"log/slog"
	"os"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/fsys"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// replayInMemory is the --replay-dir value that keeps replay in the heap.
const replayInMemory = "memory"

// replaySpill is where the older part of each instance's replay goes
// (--replay-dir): a directory checked once at start. One that cannot hold
// a file keeps replay in memory, with a warning; one on tmpfs works but
// saves the machine nothing, which is said too.
func replaySpill(dir string, log *slog.Logger) ports.Spill {
	if dir == replayInMemory {
		return nil
	}
	if dir == "" {
		dir = os.TempDir()
	}
	s := &fsys.Spill{Dir: dir}
	tmpfs, err := s.Check()
	switch {
	case err != nil:
		log.Warn("--replay-dir cannot hold replay files; replay stays in memory", "dir", dir, "err", err)
		return nil
	case tmpfs:
		log.Info("--replay-dir is on tmpfs: replay there is out of the heap but still in memory; a disk-backed directory lets the kernel drop it under pressure", "dir", dir)
	}
	return s
}
