package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// --replay-dir: "memory" keeps replay in the heap, a directory the daemon
// cannot use does too (with a warning), a usable one spills.
func TestReplaySpill(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if replaySpill(replayInMemory, log) != nil {
		t.Error(`--replay-dir memory spills`)
	}
	if replaySpill(t.TempDir()+"/missing", log) != nil || !strings.Contains(logs.String(), "replay stays in memory") {
		t.Errorf("a missing directory: %s", logs.String())
	}
	if replaySpill(t.TempDir(), log) == nil {
		t.Error("a usable directory does not spill")
	}
	logs.Reset()
	if replaySpill("/dev/shm", log) != nil && !strings.Contains(logs.String(), "tmpfs") {
		t.Errorf("tmpfs is not called out: %s", logs.String())
	}
}
