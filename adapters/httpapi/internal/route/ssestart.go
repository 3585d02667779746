package route

import (
	"bufio"
	"net/http"
	"time"
)

// StartSSE answers 200 with the event-stream headers and flushes them, so
// the client sees the stream open before the first event. It returns the
// controller the caller sets a write deadline on per write round (server
// write timeouts must not cut streams), a buffered writer over w, and
// false when nothing more is to be written: the client is already gone, or
// the request is a HEAD (its headers are the whole answer; a HEAD body's
// writes never fail, so a stream written to it would run, and hold its
// connection, until the daemon stopped). The caller defers ClearDeadline.
//
// Shared by the SSE writers: ACP streams (StreamSSE) and process logs.
func StartSSE(w http.ResponseWriter, r *http.Request) (*http.ResponseController, *bufio.Writer, bool) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil || r.Method == http.MethodHead {
		return rc, nil, false
	}
	return rc, bufio.NewWriterSize(w, 64<<10), true
}

// ClearDeadline drops a stream's write deadline when it ends, best effort,
// so a keep-alive connection is reused without one.
func ClearDeadline(rc *http.ResponseController) {
	_ = rc.SetWriteDeadline(time.Time{})
}
