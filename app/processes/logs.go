package processes

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Chunk is one read of a process's output, as kept in its log.
type Chunk struct {
	Seq         uint64
	Stream      domain.ProcessLogsStream
	TimestampMs int64
	Data        []byte // aliases the log; never modify
}

// Entry is the chunk as the API sends it by default (base64 data).
func (c Chunk) Entry() domain.ProcessLogEntry {
	return domain.ProcessLogEntry{
		Sequence: c.Seq, Stream: c.Stream, TimestampMs: c.TimestampMs,
		Data: base64.StdEncoding.EncodeToString(c.Data), Encoding: string(domain.LogBase64),
	}
}

// Encoder turns a reader's chunks, in order, into entries of one encoding.
// Base64 (the default, what the SDK decodes) carries any bytes. UTF-8 is
// for people reading logs with curl: invalid bytes become U+FFFD, and a
// character that one read of the process's output split from the next is
// carried over to that next chunk of the same stream instead of being
// replaced, so only bytes that really are invalid change. It is owned by
// one reader.
type Encoder struct {
	enc   domain.LogEncoding
	carry map[domain.ProcessLogsStream][]byte
}

// NewEncoder returns an encoder for enc ("" is base64).
func NewEncoder(enc domain.LogEncoding) *Encoder {
	if enc == "" {
		enc = domain.LogBase64
	}
	return &Encoder{enc: enc}
}

// Entry encodes the next chunk the reader got.
func (e *Encoder) Entry(c Chunk) domain.ProcessLogEntry {
	if e.enc != domain.LogUTF8 {
		return c.Entry()
	}
	data := c.Data
	if held := e.carry[c.Stream]; len(held) > 0 {
		data = append(append([]byte(nil), held...), data...)
		delete(e.carry, c.Stream)
	}
	if cut := incompleteTail(data); cut < len(data) {
		if e.carry == nil {
			e.carry = map[domain.ProcessLogsStream][]byte{}
		}
		e.carry[c.Stream] = append([]byte(nil), data[cut:]...)
		data = data[:cut]
	}
	return domain.ProcessLogEntry{
		Sequence: c.Seq, Stream: c.Stream, TimestampMs: c.TimestampMs,
		Data: strings.ToValidUTF8(string(data), "\uFFFD"), Encoding: string(domain.LogUTF8),
	}
}

// held reports whether a character split at the end of stream's last
// chunk is waiting for the rest.
func (e *Encoder) held(stream domain.ProcessLogsStream) bool { return len(e.carry[stream]) > 0 }

// Gap forgets what was carried over: the bytes that would complete it
// were evicted.
func (e *Encoder) Gap() { clear(e.carry) }

// incompleteTail is where a UTF-8 character that b ends in the middle of
// starts (len(b) when b ends on a boundary or in bytes that are invalid
// anyway, which are replaced rather than held).
func incompleteTail(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) && validPrefix(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}

// validPrefix reports whether p could be completed into a valid character:
// some continuation bytes appended to it decode without error.
func validPrefix(p []byte) bool {
	var buf [utf8.UTFMax]byte
	n := copy(buf[:], p)
	for _, c := range []byte{0x80, 0x90, 0xA0, 0xBF} {
		for i := n; i < utf8.UTFMax; i++ {
			buf[i] = c
		}
		if r, size := utf8.DecodeRune(buf[:]); r != utf8.RuneError && size > len(p) {
			return true
		}
	}
	return false
}

// LogQuery selects log entries. A zero Stream means the process's default:
// pty for a terminal, else combined.
type LogQuery struct {
	Stream   domain.ProcessLogsStream
	Since    *uint64            // only entries with a greater sequence
	Tail     *int               // only the last *Tail matching entries (0: none, as the reference); nil for all
	Encoding domain.LogEncoding // of the entries' data: base64 ("") or utf8
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
	if q.Tail != nil && len(chunks) > *q.Tail {
		chunks = chunks[len(chunks)-max(*q.Tail, 0):]
	}
	enc := NewEncoder(q.Encoding)
	last := map[domain.ProcessLogsStream]int{} // each stream's last entry
	for _, c := range chunks {
		last[c.Stream] = len(out.Entries)
		out.Entries = append(out.Entries, enc.Entry(c))
	}
	// An answer stands alone: a character its last chunk of a stream
	// began is not completed in it, so it shows as U+FFFD there.
	for stream, i := range last {
		if enc.held(stream) {
			out.Entries[i].Data += "\uFFFD"
		}
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
