package route

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// sseBatch is how many events one write round takes from the log; one flush
// per round keeps syscalls low during bursts while every event is flushed
// as soon as it is read.
const sseBatch = 512

// EventSource is what an SSE stream reads: a Cursor (/v1/acp) or a
// standard-transport Stream (/acp), which takes only its own events.
type EventSource interface {
	Read(ctx context.Context, buf []acp.Event, max int, idle time.Duration) ([]acp.Event, *acp.Gap, error)
	Ack(seq uint64)
}

// StreamSSE writes the cursor's events until the log closes (instance
// deleted, daemon stopping), the client leaves, or a write stalls for longer
// than the stream write timeout. Server write timeouts must not cut streams,
// so the deadline is cleared here and set per write round instead.
func (e *Env) StreamSSE(ctx context.Context, w http.ResponseWriter, r *http.Request, cur EventSource) {
	rc, bw, ok := StartSSE(w, r)
	defer ClearDeadline(rc)
	if !ok {
		return
	}
	events := make([]acp.Event, 0, sseBatch)
	var num []byte
	for {
		var gap *acp.Gap
		var err error
		events, gap, err = cur.Read(ctx, events[:0], sseBatch, e.Heartbeat)
		if err != nil {
			return
		}
		_ = rc.SetWriteDeadline(time.Now().Add(e.StreamWriteTimeout))
		switch {
		case gap != nil:
			// The cursor now stands before gap.OldestAvailable. If that
			// event is evicted too before the next Read, the next frame is
			// another gap starting there: gap frames can follow each
			// other, and they are contiguous.
			bw.WriteString("event: message\ndata: ")
			bw.Write(domain.ReplayGapMessage(gap.LastEventID, gap.OldestAvailable))
			bw.WriteString("\n\n")
		case len(events) == 0:
			bw.WriteString(": heartbeat\n\n")
		}
		for _, e := range events {
			bw.WriteString("event: message\nid: ")
			num = strconv.AppendUint(num[:0], e.Seq, 10)
			bw.Write(num)
			bw.WriteString("\ndata: ")
			bw.Write(e.Data)
			bw.WriteString("\n\n")
		}
		if err := bw.Flush(); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		switch {
		case len(events) > 0:
			cur.Ack(events[len(events)-1].Seq)
		case gap != nil:
			cur.Ack(gap.OldestAvailable - 1)
		}
	}
}
