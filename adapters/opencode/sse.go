package opencode

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
)

// serveEvents is GET /event (events as OpenCode writes them, only those
// of the directory the client names, if it names one) and GET
// /global/event (every event, wrapped as {"directory", "payload"}).
//
// Each event carries an id (an extension: native OpenCode sends none), so
// a client reconnecting with Last-Event-ID gets what it missed, as far as
// the stream's buffer (EventBytes) reaches. A reader that falls further
// behind than that is disconnected; OpenCode's clients reconnect and
// fetch the state again. Idle streams get server.heartbeat every
// Heartbeat; a write that stalls past StreamWriteTimeout ends the stream.
func (a *Adapter) serveEvents(w http.ResponseWriter, r *http.Request, global bool) error {
	dir := ""
	if !global {
		var err error
		if dir, err = directoryOf(r); err != nil {
			return err
		}
	}
	if r.Method == http.MethodHead {
		// The headers alone: a HEAD's body writes are discarded and never
		// fail, so a stream would run until the daemon stops.
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		return nil
	}
	var after uint64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return errBadRequest("Last-Event-ID must be an event id")
		}
		after = n
	} else {
		after = a.bus.Stats().LastEventID
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return errShuttingDown
	}
	if a.subscribers >= a.cfg.MaxSubscribers {
		a.mu.Unlock()
		return errUnavailable("too many event streams are open; close one or retry later")
	}
	a.subscribers++
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.subscribers--
		a.mu.Unlock()
	}()
	cur := a.bus.Subscribe(&after)
	defer cur.Close()

	rc := http.NewResponseController(w)
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	write := func(id uint64, dir string, data []byte) {
		if id > 0 {
			bw.WriteString("id: ")
			bw.WriteString(strconv.FormatUint(id, 10))
			bw.WriteByte('\n')
		}
		bw.WriteString("data: ")
		if global {
			bw.WriteString(`{"directory":`)
			bw.Write(quote(dir))
			bw.WriteString(`,"payload":`)
			bw.Write(data)
			bw.WriteByte('}')
		} else {
			bw.Write(data)
		}
		bw.WriteString("\n\n")
	}
	_ = rc.SetWriteDeadline(time.Now().Add(a.cfg.StreamWriteTimeout))
	write(0, a.cfg.Directory, []byte(`{"type":"server.connected","properties":{}}`))
	if bw.Flush() != nil || rc.Flush() != nil {
		return nil
	}
	buf := make([]acp.Event, 0, 256)
	// lastWrite is when the client was last sent something: a stream of
	// one directory gets its heartbeat while other directories are busy.
	lastWrite := time.Now()
	for {
		evs, gap, err := cur.Read(r.Context(), buf[:0], 256, a.cfg.Heartbeat)
		if err != nil || gap != nil {
			return nil
		}
		_ = rc.SetWriteDeadline(time.Now().Add(a.cfg.StreamWriteTimeout))
		sent := false
		for _, e := range evs {
			if dir == "" || e.Stream == dir {
				write(e.Seq, e.Stream, e.Data)
				sent = true
			}
		}
		if !sent && time.Since(lastWrite) >= a.cfg.Heartbeat {
			write(0, a.cfg.Directory, []byte(`{"type":"server.heartbeat","properties":{}}`))
			sent = true
		}
		if sent {
			lastWrite = time.Now()
			if bw.Flush() != nil || rc.Flush() != nil {
				return nil
			}
		}
		if len(evs) > 0 {
			cur.Ack(evs[len(evs)-1].Seq)
		}
	}
}

func quote(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}
