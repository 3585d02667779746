package route

import (
	"bytes"
	"io"
	"math"
	"net/http"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Request bodies are bounded in one place: LimitBody is the one limiter
// (a declared length over the limit is refused at once, a body that grows
// past it fails the read with 413), used as a stream by the file uploads
// and read whole by ReadCharged, charged to --inflight-bytes, for ACP POSTs,
// process input, config documents and the JSON bodies huma decodes.

// LimitBody returns the request body, bounded by limit bytes when limit is
// positive: a declared length over it is refused at once, and a body that
// grows past it fails the read with payload_too_large.
func LimitBody(r *http.Request, limit int64) (io.Reader, error) {
	if limit <= 0 {
		return r.Body, nil
	}
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	return &limitedBody{r: r.Body, left: limit, limit: limit}, nil
}

type limitedBody struct {
	r           io.Reader
	left, limit int64
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, tooLarge(l.limit)
	}
	if int64(len(p)) > l.left { // not l.left+1: a limit of MaxInt64 would wrap
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n, tooLarge(l.limit)
	}
	return n, err
}

// ReadCharged reads a whole request body of at most limit bytes (limit > 0:
// every caller has one) through LimitBody, charging the buffer's capacity
// to budget (when not nil) as it grows, before the bytes are read: 503
// overloaded once the budget is spent. It returns the amount charged, also
// on error.
//
// The buffer starts small and doubles, up to the declared length, so a
// client is charged for what it has sent (within a factor of two), never
// for what it only announced: a Content-Length with no body behind it
// cannot spend the budget.
func ReadCharged(r *http.Request, limit int64, budget *Inflight) ([]byte, int64, error) {
	body, err := LimitBody(r, limit)
	if err != nil {
		return nil, 0, err
	}
	// Most ACP messages fit the first buffer; 16 KiB on each of --max-conns
	// stalled connections is a quarter of the default budget. A body of
	// unknown length starts smaller.
	ceiling, first := PlusOne(limit), int64(512) // ceiling: the most ever needed
	if r.ContentLength >= 0 {
		ceiling, first = PlusOne(r.ContentLength), 16<<10
	}
	b, charged, err := ReadChargedFrom(body, ceiling, first, budget)
	if err != nil {
		if _, ok := domain.AsError(err); !ok {
			err = Invalid("reading request body: %v", err)
		}
	}
	return b, charged, err
}

// ReadChargedFrom reads r to its end into a buffer that starts at first
// bytes and doubles up to ceiling, charging each growth to budget (when
// not nil) before it is allocated: the overloaded error once the budget is
// spent. r must end by itself before ceiling (a limit reader). It returns
// the amount charged, also on error; r's own errors are returned as they
// are. Request bodies and WebSocket messages are read through it.
func ReadChargedFrom(r io.Reader, ceiling, first int64, budget *Inflight) ([]byte, int64, error) {
	var charged int64
	grow := func(buf []byte) ([]byte, error) {
		size := min(max(2*int64(cap(buf)), first), ceiling)
		if budget != nil {
			if !budget.Take(size - int64(cap(buf))) {
				return buf, budget.Overloaded()
			}
			charged += size - int64(cap(buf))
		}
		nb := make([]byte, len(buf), size)
		copy(nb, buf)
		return nb, nil
	}
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			var err error
			if buf, err = grow(buf); err != nil {
				return nil, charged, err
			}
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, charged, nil
		}
		if err != nil {
			return nil, charged, err // 413 past limit; keeps a status override (408)
		}
	}
}

// ChargeCompaction charges the copy domain.ParseFrame makes of a message
// with raw line breaks (compacted onto one line), before it is made. It
// returns what it charged (0 for a message without line breaks).
func ChargeCompaction(budget *Inflight, data []byte) (int64, error) {
	if !bytes.ContainsAny(data, "\r\n") {
		return 0, nil
	}
	n := int64(len(data))
	if !budget.Take(n) {
		return 0, budget.Overloaded()
	}
	return n, nil
}

// PlusOne is n+1, or n when that would wrap: a limit given as
// 9223372036854775807 (any size) must not become a negative ceiling.
func PlusOne(n int64) int64 {
	if n == math.MaxInt64 {
		return n
	}
	return n + 1
}

func tooLarge(limit int64) error {
	return domain.PayloadTooLarge(limit)
}

// ACPPostBody applies the checks of docs/api.md 4.1 in order (content type,
// accept, size) and reads the body.
// It returns what it charged to the in-flight budget, to be given back
// when the request is answered (also on error).
func ACPPostBody(r *http.Request, limit int64, budget *Inflight) ([]byte, int64, error) {
	if !IsMediaType(r.Header.Get("Content-Type"), "application/json") {
		return nil, 0, domain.UnsupportedMedia("expected Content-Type: application/json")
	}
	if !Accepts(r.Header.Get("Accept"), "application/json") {
		return nil, 0, domain.NotAcceptable("this endpoint only produces application/json")
	}
	return ReadCharged(r, limit, budget)
}
