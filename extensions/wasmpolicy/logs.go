package wasmpolicy

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sync"

	"github.com/tetratelabs/wazero/api"
)

// maxLogLine bounds one guest log line; longer lines are cut.
const maxLogLine = 4096

// maxLogLines bounds the lines one call into a module logs: its log calls
// and its stdout and stderr lines together. Past it lines are counted, not
// logged, and one record at the end of the call says how many were
// dropped. Why: a single fd_write of 64 MiB of "x\n" is 32 million records,
// written by host code the call's time limit does not stop (it ends the
// guest's code, not the host function it called), so one request cost
// minutes of CPU and flooded the daemon's log.
const maxLogLines = 100

// hostLog is the sandbox_agent.log import (abi.ImportLog): (level, ptr, len) → one record
// at that level, tagged with the policy's name.
func (p *Policy) hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	level, ptr, n := slog.Level(int32(stack[0])), uint32(stack[1]), uint32(stack[2])
	n = min(n, maxLogLine)
	msg, ok := mod.Memory().Read(ptr, n)
	l, _ := ctx.Value(logsKey{}).(*lineLogger)
	if l == nil {
		l = &lineLogger{logger: p.logger, budget: maxLogLines} // outside a call: never happens
	}
	if !ok {
		l.record(slog.LevelWarn, "policy log call outside its memory", "ptr", ptr, "len", n)
		return
	}
	l.record(level, clean(msg))
}

// logsKey carries the calling instance's lineLogger to hostLog.
type logsKey struct{}

// lineLogger logs what one instance writes: its log calls, and its stdout
// and stderr a line at a time (stdout at info, stderr at warn: a Go
// guest's panics go there), within maxLogLines per call.
type lineLogger struct {
	logger  *slog.Logger
	mu      sync.Mutex
	out     logStream
	err     logStream
	budget  int // lines this call may still log
	dropped int // lines this call did not log
}

// logStream is the partial line of stdout or stderr.
type logStream struct {
	buf bytes.Buffer
	// skip: the current line was longer than maxLogLine; its start was
	// logged, the rest is dropped up to the next newline.
	skip bool
}

// begin starts a call into the module: a fresh line budget.
func (l *lineLogger) begin() {
	l.mu.Lock()
	l.budget, l.dropped = maxLogLines, 0
	l.mu.Unlock()
}

// end closes a call: what it could not log is said once.
func (l *lineLogger) end() {
	l.mu.Lock()
	dropped := l.dropped
	l.dropped = 0
	l.mu.Unlock()
	if dropped > 0 {
		l.logger.Warn("policy log lines dropped", "dropped", dropped, "limit", maxLogLines)
	}
}

// record logs one line within the budget.
func (l *lineLogger) record(level slog.Level, msg string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.budget <= 0 {
		l.dropped++
		return
	}
	l.budget--
	l.logger.Log(context.Background(), level, msg, args...)
}

func (l *lineLogger) stream(name string) io.Writer {
	level, s := slog.LevelInfo, &l.out
	if name == "stderr" {
		level, s = slog.LevelWarn, &l.err
	}
	return writerFunc(func(b []byte) (int, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		n := len(b)
		for len(b) > 0 {
			if l.budget <= 0 {
				// Counted, not read line by line.
				l.dropped += bytes.Count(b, []byte{'\n'})
				s.buf.Reset()
				s.skip = false
				break
			}
			line, rest, found := bytes.Cut(b, []byte{'\n'})
			if !s.skip {
				take := min(len(line), maxLogLine-s.buf.Len())
				s.buf.Write(line[:take])
				if take < len(line) {
					l.emit(level, name, s.buf.Bytes())
					s.buf.Reset()
					s.skip = true
				}
			}
			if !found {
				break
			}
			if !s.skip {
				l.emit(level, name, s.buf.Bytes())
			}
			s.buf.Reset()
			s.skip = false
			b = rest
		}
		return n, nil
	})
}

// emit logs one stdout or stderr line; l.mu is held.
func (l *lineLogger) emit(level slog.Level, stream string, line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(line) > maxLogLine {
		line = line[:maxLogLine]
	}
	if len(line) == 0 {
		return
	}
	if l.budget <= 0 {
		l.dropped++
		return
	}
	l.budget--
	l.logger.Log(context.Background(), level, clean(line), "stream", stream)
}

// flush logs whatever partial lines are left when an instance closes.
func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.budget = max(l.budget, 2)
	for _, s := range []struct {
		level slog.Level
		name  string
		s     *logStream
	}{{slog.LevelInfo, "stdout", &l.out}, {slog.LevelWarn, "stderr", &l.err}} {
		if s.s.buf.Len() > 0 && !s.s.skip {
			l.emit(s.level, s.name, s.s.buf.Bytes())
		}
		s.s.buf.Reset()
		s.s.skip = false
	}
}

// clean is a guest's log line as a string with its control characters
// escaped (\n, \r, \x1b, ...; a tab stays): the daemon's log is an audit
// trail, and a line holding a newline or a terminal escape would forge
// records of the daemon's own in its text format.
func clean(b []byte) string {
	i := bytes.IndexFunc(b, isControl)
	if i < 0 {
		return string(b)
	}
	const hex = "0123456789abcdef"
	out := make([]byte, 0, len(b)+8)
	out = append(out, b[:i]...)
	for _, c := range b[i:] {
		switch {
		case c == '\n':
			out = append(out, `\n`...)
		case c == '\r':
			out = append(out, `\r`...)
		case c < 0x20 && c != '\t', c == 0x7f:
			out = append(out, '\\', 'x', hex[c>>4], hex[c&15])
		default:
			out = append(out, c)
		}
	}
	return string(out)
}

func isControl(r rune) bool { return (r < 0x20 && r != '\t') || r == 0x7f }

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
