package acp

import (
	"bufio"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// Limits of the stderr tail kept per instance (docs/api.md 4.2).
const (
	stderrTailLines = 16
	stderrTailBytes = 64 << 10
	stderrLineMax   = 8 << 10 // longer lines are cut, the rest skipped
)

// stderrTail keeps the last lines an agent wrote to stderr, for error
// reports and the stderr route.
type stderrTail struct {
	mu    sync.Mutex
	lines []string
	size  int
}

func (t *stderrTail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	t.size += len(line)
	for len(t.lines) > stderrTailLines || (t.size > stderrTailBytes && len(t.lines) > 1) {
		t.size -= len(t.lines[0])
		t.lines = t.lines[1:]
	}
}

// String returns the tail, one line per line.
func (t *stderrTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

// drain reads r to its end, logging each line at debug and keeping the tail.
// Reading never stops early, so an agent flooding stderr is never blocked.
func (t *stderrTail) drain(r io.Reader, log *slog.Logger) {
	br := bufio.NewReaderSize(r, 16<<10)
	var cur []byte
	truncated := false
	for {
		chunk, err := br.ReadSlice('\n')
		if len(cur)+len(chunk) <= stderrLineMax {
			cur = append(cur, chunk...)
		} else if !truncated {
			cur = append(cur, chunk[:stderrLineMax-len(cur)]...)
			truncated = true
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if len(cur) > 0 {
			line := strings.TrimRight(string(cur), "\r\n")
			log.Debug("agent stderr", "line", line)
			t.add(line)
		}
		cur, truncated = cur[:0], false
		if err != nil {
			return
		}
	}
}
