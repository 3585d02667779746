package processes

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// Every process's log draws on LogTotal: past it the largest logs lose
// their oldest entries first (readers get a gap), whatever each log's own
// size allows, and a deleted process gives its share back.
func TestLogTotal(t *testing.T) {
	const total = 64 << 10
	s := New(&porttest.FakeStarter{Program: func(sp domain.ProcessSpec, p *porttest.FakeUserProcess) {
		n := 4 // KiB
		if sp.Command == "big" {
			n = 200
		}
		for range n {
			io.WriteString(p.Out, strings.Repeat("x", 1024))
		}
		p.Exit(porttest.ExitCode(0))
	}}, Options{LogTotal: total})
	ctx := context.Background()
	small, err := s.Create(ctx, domain.ProcessCreateRequest{Command: "small"})
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, s, small.ID) // done: every chunk is in the log
	big, err := s.Create(ctx, domain.ProcessCreateRequest{Command: "big"})
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, s, big.ID)
	if got := s.pool.Total(); got > total || got < total/2 {
		t.Fatalf("logs hold %d bytes, total %d", got, total)
	}
	smallLogs, _ := s.Logs(small.ID, LogQuery{})
	if got := len(text(smallLogs.Entries)); got != 4<<10 || smallLogs.Gap != nil {
		t.Errorf("the small log lost output to the big one: %d bytes, gap %+v", got, smallLogs.Gap)
	}
	zero := uint64(0)
	bigLogs, _ := s.Logs(big.ID, LogQuery{Since: &zero})
	if bigLogs.Gap == nil || bigLogs.Gap.OldestAvailable <= 1 {
		t.Errorf("the big log's reader from the start got no gap: %+v", bigLogs.Gap)
	}
	if n := len(bigLogs.Entries); n == 0 || bigLogs.Entries[n-1].Sequence != 200 {
		t.Errorf("the big log lost its newest entries: %d entries", n)
	}
	if m := s.Metrics(); m.LogBytes > total {
		t.Errorf("metrics: %d log bytes", m.LogBytes)
	}
	for _, id := range []string{small.ID, big.ID} {
		if err := s.Delete(id); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.pool.Total(); got != 0 {
		t.Errorf("after deleting both, the pool still holds %d bytes", got)
	}
}

// A run's captured output counts against LogTotal: what finds no room is
// cut, and the share is given back when the run ends.
func TestRunOutputCountsAgainstLogTotal(t *testing.T) {
	s := New(&porttest.FakeStarter{Program: func(_ domain.ProcessSpec, p *porttest.FakeUserProcess) {
		for range 64 {
			io.WriteString(p.Out, strings.Repeat("o", 1024))
		}
		p.Exit(porttest.ExitCode(0))
	}}, Options{LogTotal: 16 << 10})
	r, err := s.Run(context.Background(), domain.ProcessRunRequest{Command: "loud"})
	if err != nil {
		t.Fatal(err)
	}
	if !r.StdoutTruncated || len(r.Stdout) > 16<<10 || len(r.Stdout) == 0 {
		t.Fatalf("stdout %d bytes, truncated %v", len(r.Stdout), r.StdoutTruncated)
	}
	if got := s.pool.Total(); got != 0 {
		t.Errorf("after the run the pool holds %d bytes", got)
	}
}
