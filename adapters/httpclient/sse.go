package httpclient

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// SSEEvent is one Server-Sent Event. On the daemon's ACP stream Event is
// "message", ID is the event's sequence number (empty for the
// _adapter/replay_gap notice, which has none) and Data is one JSON-RPC
// message exactly as the agent wrote it.
type SSEEvent struct {
	Event string
	ID    string
	Data  []byte
}

// DefaultMaxSSEEvent bounds one event's data: the daemon's largest agent
// frame (64 MiB by default) plus room for the field names.
const DefaultMaxSSEEvent = 64<<20 + 4096

// ErrSSEEventTooLarge is returned by SSEReader.Next for an event whose data
// exceeds the reader's limit; the stream cannot be resynchronised after it.
var ErrSSEEventTooLarge = errors.New("sse: event larger than the limit")

// SSEReader parses a text/event-stream (the WHATWG format: LF, CRLF or CR
// line ends, comments, multi-line data, an optional space after the colon).
// Unlike bufio.Scanner it has no 64 KiB line limit: an event may be as large
// as Max. It is not safe for concurrent use.
type SSEReader struct {
	r   *bufio.Reader
	max int
	// skipLF is set after a line ended in CR: an LF right after it belongs
	// to the same line end (CRLF), even when it arrives in a later read.
	skipLF bool
}

// NewSSEReader reads events from r, refusing any event whose data exceeds
// max bytes (max <= 0 means DefaultMaxSSEEvent).
func NewSSEReader(r io.Reader, max int) *SSEReader {
	if max <= 0 {
		max = DefaultMaxSSEEvent
	}
	return &SSEReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Next returns the next event that carries data (events without a data
// field are skipped, as browsers do). At the end of the stream it returns
// io.EOF; an event cut off by the end of the stream is dropped and
// io.ErrUnexpectedEOF returned, so a half-received message is never handed
// out.
func (s *SSEReader) Next() (SSEEvent, error) {
	var ev SSEEvent
	var data []byte
	hasData, partial := false, false
	for {
		line, err := s.line()
		if err != nil {
			if err == io.EOF && partial {
				return SSEEvent{}, io.ErrUnexpectedEOF
			}
			return SSEEvent{}, err
		}
		if len(line) == 0 {
			if hasData {
				ev.Data = data
				return ev, nil
			}
			ev, data, partial = SSEEvent{}, nil, false
			continue
		}
		partial = true
		if line[0] == ':' {
			continue
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(name) {
		case "event":
			ev.Event = string(value)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				ev.ID = string(value)
			}
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			if len(data)+len(value) > s.max {
				return SSEEvent{}, fmt.Errorf("%w (%d bytes)", ErrSSEEventTooLarge, s.max)
			}
			data = append(data, value...)
			hasData = true
		}
	}
}

// line reads one line without its end (valid until the next call). A line may end in LF, CRLF or a
// lone CR; after a CR a following LF is skipped when the next line is read,
// so a CR-terminated event is dispatched without waiting for more bytes.
func (s *SSEReader) line() ([]byte, error) {
	var buf []byte
	for {
		if s.r.Buffered() == 0 {
			if _, err := s.r.Peek(1); err != nil {
				if err == io.EOF && (len(buf) > 0) {
					return nil, io.ErrUnexpectedEOF // a last line without its end: the stream was cut
				}
				return nil, err
			}
		}
		p, _ := s.r.Peek(s.r.Buffered())
		if s.skipLF {
			s.skipLF = false
			if p[0] == '\n' {
				_, _ = s.r.Discard(1)
				continue
			}
		}
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			buf = append(buf, p...)
			_, _ = s.r.Discard(len(p))
			if len(buf) > s.max+64 {
				return nil, fmt.Errorf("%w (%d bytes)", ErrSSEEventTooLarge, s.max)
			}
			continue
		}
		s.skipLF = p[i] == '\r'
		if buf == nil {
			// The whole line is buffered: return it in place. It stays
			// valid until the next read, and Next copies what it keeps.
			_, _ = s.r.Discard(i + 1)
			return p[:i:i], nil
		}
		buf = append(buf, p[:i]...)
		_, _ = s.r.Discard(i + 1)
		if len(buf) > s.max+64 {
			return nil, fmt.Errorf("%w (%d bytes)", ErrSSEEventTooLarge, s.max)
		}
		return buf, nil
	}
}

// streamIdleTimeout: the daemon writes at least a heartbeat every 15 s on
// every event stream, and answers a stream's request at once, so a stream
// that sent nothing for this long, or a request with no answer after it,
// is a daemon that stopped answering (SIGSTOP, a dead peer behind a proxy:
// it keeps the connection open, and would hold a reader forever).
const streamIdleTimeout = 45 * time.Second

// errStreamSilent ends a stream on which the daemon sent nothing for
// streamIdleTimeout; it is an ErrDaemonUnreachable.
var errStreamSilent error = streamSilent{}

type streamSilent struct{}

// Error says how long the stream was silent.
func (streamSilent) Error() string {
	return "the daemon sent nothing on the event stream for " + streamIdleTimeout.String() + " (not even a heartbeat)"
}

// Is makes it an ErrDaemonUnreachable.
func (streamSilent) Is(target error) bool { return target == ErrDaemonUnreachable }

// silence bounds the silences of one stream request: ctx, for the
// request, is cancelled once the daemon has sent nothing for
// streamIdleTimeout, counted from the request and restarted by every byte
// of the body read through body.
type silence struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	t      *time.Timer
	last   time.Time // when the daemon last showed life: the request, its answer, a byte
}

func watchSilence(parent context.Context) *silence {
	w := &silence{last: time.Now()}
	w.ctx, w.cancel = context.WithCancelCause(parent)
	w.t = time.AfterFunc(streamIdleTimeout, func() { w.cancel(errStreamSilent) })
	return w
}

// body wraps a stream's body: each byte read restarts the count.
func (w *silence) body(r io.Reader) io.Reader {
	w.last = time.Now()
	w.t.Reset(streamIdleTimeout)
	return &silenceReader{r: r, w: w}
}

// pause stops counting while the reader, not the daemon, is the one
// holding the stream back; resume starts again from now.
func (w *silence) pause() { w.t.Stop() }

func (w *silence) resume() {
	w.last = time.Now()
	w.t.Reset(streamIdleTimeout)
}

// err is errStreamSilent when the silence ended the request, else err.
func (w *silence) err(err error) error {
	if context.Cause(w.ctx) == errStreamSilent {
		return errStreamSilent
	}
	return err
}

func (w *silence) stop() {
	w.t.Stop()
	w.cancel(nil)
}

type silenceReader struct {
	r io.Reader
	w *silence
}

// Read reads the body, restarting the count when bytes came.
func (s *silenceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.w.t.Reset(streamIdleTimeout)
		s.w.last = time.Now()
	}
	return n, err
}

// follow GETs path as an event stream and hands each event to fn until
// the stream ends (nil), ctx ends (ctx.Err()), fn returns an error, or the
// daemon stops answering (an error wrapping ErrDaemonUnreachable, after
// streamIdleTimeout without even a heartbeat).
func (c *Client) follow(ctx context.Context, path string, q url.Values, h http.Header, fn func(SSEEvent) error) error {
	w := watchSilence(ctx)
	defer w.stop()
	h.Set("Accept", "text/event-stream")
	resp, err := c.raw(w.ctx, http.MethodGet, path, q, nil, "", h)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return w.err(err)
	}
	defer resp.Body.Close()
	r := NewSSEReader(w.body(resp.Body), 0)
	for {
		ev, err := r.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err == io.EOF {
				return nil
			}
			return w.err(err)
		}
		// fn's time is the caller's, not the daemon's silence.
		w.pause()
		err = fn(ev)
		w.resume()
		if err != nil {
			return err
		}
	}
}
