package processes

import (
	"context"
	"encoding/base64"
	"errors"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Chunk is one read of a process's output, as kept in its log.
type Chunk struct {
	Seq         uint64
	Stream      domain.ProcessLogsStream
	TimestampMs int64
	Data        []byte // aliases the log; never modify
}

// Entry is the chunk as the API sends it (base64 data).
func (c Chunk) Entry() domain.ProcessLogEntry {
	return domain.ProcessLogEntry{
		Sequence: c.Seq, Stream: c.Stream, TimestampMs: c.TimestampMs,
		Data: base64.StdEncoding.EncodeToString(c.Data), Encoding: "base64",
	}
}

// LogQuery selects log entries. A zero Stream means the process's default:
// pty for a terminal, else combined.
type LogQuery struct {
	Stream domain.ProcessLogsStream
	Since  *uint64 // only entries with a greater sequence
	Tail   int     // only the last Tail matching entries; 0 for all
}

// DefaultStream is the stream a query of process id reads when it names
// none.
func (s *Service) DefaultStream(id string) (domain.ProcessLogsStream, error) {
	pr, err := s.lookup(id)
	if err != nil {
		return "", err
	}
	if pr.tty {
		return domain.StreamPTY, nil
	}
	return domain.StreamCombined, nil
}

// canceled is a done context: a cursor read with it never waits.
var canceled = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// Logs returns the buffered entries of process id that q selects.
func (s *Service) Logs(id string, q LogQuery) (domain.ProcessLogsResponse, error) {
	pr, err := s.lookup(id)
	if err != nil {
		return domain.ProcessLogsResponse{}, err
	}
	if q.Stream == "" {
		q.Stream, _ = s.DefaultStream(id)
	}
	out := domain.ProcessLogsResponse{ProcessID: id, Stream: q.Stream, Entries: []domain.ProcessLogEntry{}}
	cur := pr.log.cursorAfter(q.Since)
	var chunks []Chunk
	buf := make([]Chunk, 0, 256)
	for {
		got, gap, err := cur.next(canceled, buf[:0], cap(buf), 0)
		if gap != nil && out.Gap == nil {
			out.Gap = gap
		}
		for _, c := range got {
			if q.Stream.Matches(c.Stream) {
				chunks = append(chunks, c)
			}
		}
		if err != nil {
			break
		}
	}
	if q.Tail > 0 && len(chunks) > q.Tail {
		chunks = chunks[len(chunks)-q.Tail:]
	}
	for _, c := range chunks {
		out.Entries = append(out.Entries, c.Entry())
	}
	return out, nil
}

// ErrEnded is returned by Follower.Next once the process has exited and
// every entry has been read, or the process was deleted.
var ErrEnded = errors.New("process output ended")

// Follower reads a process's log from a position on, live. It is owned by
// one goroutine (a stream writer).
type Follower struct {
	pr     *proc
	cur    *cursor
	stream domain.ProcessLogsStream
	ctx    context.Context // done when the request ends or the process exits
	cancel context.CancelFunc
	req    context.Context
	buf    []Chunk
}

// Follow starts reading process id's log after since (from the oldest
// buffered entry when nil), entries of stream only (the default when empty).
// ctx is the reader's lifetime; Close releases the follower.
func (s *Service) Follow(ctx context.Context, id string, stream domain.ProcessLogsStream, since *uint64) (*Follower, error) {
	pr, err := s.lookup(id)
	if err != nil {
		return nil, err
	}
	if stream == "" {
		stream, _ = s.DefaultStream(id)
	}
	fctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-pr.done:
			cancel()
		case <-fctx.Done():
		}
	}()
	return &Follower{
		pr: pr, cur: pr.log.cursorAfter(since), stream: stream,
		ctx: fctx, cancel: cancel, req: ctx, buf: make([]Chunk, 0, 512),
	}, nil
}

// Next returns the next chunks (up to 512 events' worth), waiting up to idle
// for one; no chunks and no error means idle passed. A gap, when the
// reader's position was evicted, comes alone before the chunks after it.
// Once the process has exited and all is read, it returns ErrEnded; when
// the reader's context ends, its error.
func (f *Follower) Next(idle time.Duration) ([]Chunk, *domain.ProcessLogGap, error) {
	for {
		got, gap, err := f.cur.next(f.ctx, f.buf[:0], cap(f.buf), idle)
		if gap != nil {
			return nil, gap, nil
		}
		chunks := make([]Chunk, 0, len(got))
		for _, c := range got {
			if f.stream.Matches(c.Stream) {
				chunks = append(chunks, c)
			}
		}
		switch {
		case errors.Is(err, errLogClosed):
			return chunks, nil, ErrEnded
		case err != nil && f.req.Err() != nil:
			return chunks, nil, f.req.Err()
		case err != nil:
			// The process is done and everything it wrote is in the log.
			return chunks, nil, ErrEnded
		case len(chunks) > 0 || len(got) == 0:
			return chunks, nil, nil
		}
		// Only chunks of other streams: keep reading.
	}
}

// Exit describes how the followed process ended (after ErrEnded).
func (f *Follower) Exit() domain.ProcessInfo { return f.pr.info() }

// Close releases the follower.
func (f *Follower) Close() { f.cancel() }
