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

// hostLog is the sandbox_agent.log import (abi.ImportLog): (level, ptr, len) → one record
// at that level, tagged with the policy's name.
func (p *Policy) hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	level, ptr, n := slog.Level(int32(stack[0])), uint32(stack[1]), uint32(stack[2])
	n = min(n, maxLogLine)
	msg, ok := mod.Memory().Read(ptr, n)
	if !ok {
		p.logger.Warn("policy log call outside its memory", "ptr", ptr, "len", n)
		return
	}
	p.logger.Log(ctx, level, string(msg))
}

// lineLogger turns a guest's stdout and stderr into log records, a line at
// a time: stdout at info, stderr at warn (a Go guest's panics go there).
type lineLogger struct {
	logger *slog.Logger
	mu     sync.Mutex
	out    bytes.Buffer
	err    bytes.Buffer
}

func (l *lineLogger) stream(name string) io.Writer {
	level, buf := slog.LevelInfo, &l.out
	if name == "stderr" {
		level, buf = slog.LevelWarn, &l.err
	}
	return writerFunc(func(b []byte) (int, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		buf.Write(b)
		for {
			line, _, ok := bytes.Cut(buf.Bytes(), []byte{'\n'})
			if !ok {
				break
			}
			l.emit(level, name, line)
			buf.Next(len(line) + 1)
		}
		if buf.Len() > maxLogLine {
			l.emit(level, name, buf.Bytes())
			buf.Reset()
		}
		return len(b), nil
	})
}

func (l *lineLogger) emit(level slog.Level, stream string, line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(line) > maxLogLine {
		line = line[:maxLogLine]
	}
	if len(line) == 0 {
		return
	}
	l.logger.Log(context.Background(), level, string(line), "stream", stream)
}

// flush logs whatever partial lines are left when an instance closes.
func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range []struct {
		level slog.Level
		name  string
		buf   *bytes.Buffer
	}{{slog.LevelInfo, "stdout", &l.out}, {slog.LevelWarn, "stderr", &l.err}} {
		if s.buf.Len() > 0 {
			l.emit(s.level, s.name, s.buf.Bytes())
			s.buf.Reset()
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
