package opencode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// httpError is an answer other than 200, in the shapes OpenCode's clients
// read: a 400 as its validation errors ({data, errors, success: false}),
// anything else as a NamedError ({name, data: {message}}).
type httpError struct {
	status int
	name   string
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func errBadRequest(format string, args ...any) error {
	return &httpError{status: http.StatusBadRequest, name: "BadRequest", msg: fmt.Sprintf(format, args...)}
}

func errNotFound(msg string) error {
	return &httpError{status: http.StatusNotFound, name: "NotFoundError", msg: msg}
}

func errTooMany(msg string) error {
	return &httpError{status: http.StatusTooManyRequests, name: "BusyError", msg: msg}
}

func errUnavailable(msg string) error {
	return &httpError{status: http.StatusServiceUnavailable, name: "UnavailableError", msg: msg}
}

func errUnsupported(what string) error {
	return &httpError{status: http.StatusBadRequest, name: "UnsupportedError", msg: what + " is not supported by sandbox-agent's OpenCode API (see docs/opencode.md)"}
}

// maxErrorMessage bounds the message of an error answer.
const maxErrorMessage = 1024

// writeError answers err. Errors of the daemon's kinds keep their status
// (domain.Error: unsupported agent 400, not installed, too many
// instances…); anything else is a 500 whose detail is logged, not sent.
func (a *Adapter) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return // the client left (a prompt waiting for its turn, a listing): no failure, no one to answer
	}
	var he *httpError
	var de *domain.Error
	switch {
	case errors.As(err, &he):
	case errors.As(err, &de):
		he = &httpError{status: kindStatus(de.Kind), name: "UnknownError", msg: domainMessage(de)}
	default:
		a.log.Error("opencode: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		he = &httpError{status: http.StatusInternalServerError, name: "UnknownError", msg: "internal error"}
	}
	// A message names what the client sent (an id from the path, up to
	// the header limit): repeat at most a kilobyte of it.
	msg := he.msg
	if len(msg) > maxErrorMessage {
		msg = strings.ToValidUTF8(msg[:maxErrorMessage], "") + "…"
	}
	he = &httpError{status: he.status, name: he.name, msg: msg}
	if he.status == http.StatusBadRequest && he.name == "BadRequest" {
		writeJSON(w, he.status, map[string]any{"data": nil, "errors": []map[string]string{{"message": he.msg}}, "success": false})
		return
	}
	writeJSON(w, he.status, map[string]any{"name": he.name, "data": map[string]string{"message": he.msg}})
}

// kindStatus is the HTTP status of a daemon error kind, as the daemon's
// own API answers it.
func kindStatus(k domain.Kind) int {
	switch k {
	case domain.KindInvalidRequest, domain.KindUnsupportedAgent:
		return http.StatusBadRequest
	case domain.KindAgentNotInstalled, domain.KindSessionNotFound, domain.KindNotFound:
		return http.StatusNotFound
	case domain.KindConflict:
		return http.StatusConflict
	case domain.KindTooManyInstances, domain.KindTooManyRequests:
		return http.StatusTooManyRequests
	case domain.KindOverloaded:
		return http.StatusServiceUnavailable
	case domain.KindTimeout:
		return http.StatusGatewayTimeout
	case domain.KindPermissionDenied:
		return http.StatusForbidden
	case domain.KindInsufficientStorage:
		return http.StatusInsufficientStorage
	}
	return http.StatusInternalServerError
}

// domainMessage is what a client is told of a daemon error: its kind and
// facts, never its cause (which may name the host's internals; it is
// logged instead), and the end of an agent's stderr when it has one.
func domainMessage(e *domain.Error) string {
	msg := string(e.Kind)
	for _, p := range []string{e.Agent, e.SessionID, e.Msg} {
		if p != "" {
			msg += ": " + p
		}
	}
	if e.Stderr != "" {
		tail := e.Stderr
		if len(tail) > 2048 {
			tail = "…" + tail[len(tail)-2048:]
		}
		msg += "\n" + tail
	}
	return msg
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"name":"UnknownError","data":{"message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeRaw answers 200 with JSON already encoded.
func writeRaw(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

// plusOne is n+1, or n when that would wrap (a MaxBody of MaxInt64).
func plusOne(n int64) int64 {
	if n == math.MaxInt64 {
		return n
	}
	return n + 1
}

// readJSON decodes a request body into v. The body is bounded by MaxBody
// and, with every other body being read, by InflightBytes; the bytes are
// given back when release is called (the caller defers it, or hands it
// to whoever keeps what was decoded). An empty body leaves v as it is.
func (a *Adapter) readJSON(r *http.Request, v any) (release func(), err error) {
	release = func() {}
	if r.Body == nil || r.Body == http.NoBody {
		return release, nil
	}
	if r.ContentLength > a.cfg.MaxBody {
		return release, &httpError{status: http.StatusRequestEntityTooLarge, name: "PayloadTooLarge", msg: fmt.Sprintf("request body is larger than %d bytes", a.cfg.MaxBody)}
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !isJSON(ct) {
		return release, &httpError{status: http.StatusUnsupportedMediaType, name: "UnsupportedMediaType", msg: "expected Content-Type: application/json"}
	}
	var held int64
	release = func() {
		a.inflight.Give(held)
		held = 0
	}
	ceiling, first := plusOne(a.cfg.MaxBody), int64(512)
	if r.ContentLength >= 0 {
		ceiling, first = plusOne(r.ContentLength), min(plusOne(r.ContentLength), 64<<10)
	}
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			size := min(max(2*int64(cap(buf)), first), ceiling)
			if size <= int64(cap(buf)) {
				size = int64(cap(buf)) + 1
			}
			if !a.inflight.Take(size - int64(cap(buf))) {
				return release, errUnavailable("too many request bodies in flight; retry later")
			}
			held += size - int64(cap(buf))
			nb := make([]byte, len(buf), size)
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > a.cfg.MaxBody {
			return release, &httpError{status: http.StatusRequestEntityTooLarge, name: "PayloadTooLarge", msg: fmt.Sprintf("request body is larger than %d bytes", a.cfg.MaxBody)}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return release, &httpError{status: http.StatusRequestEntityTooLarge, name: "PayloadTooLarge", msg: fmt.Sprintf("request body is larger than %d bytes", a.cfg.MaxBody)}
			}
			return release, errBadRequest("reading the request body: %v", err)
		}
	}
	if len(strings.TrimSpace(string(buf))) == 0 {
		return release, nil
	}
	if err := json.Unmarshal(buf, v); err != nil {
		// A field of the wrong type is named by its JSON path: the
		// decoder's own message names the adapter's Go types.
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return release, errBadRequest("invalid JSON body: %s has the wrong type (%s)", te.Field, te.Value)
		}
		if errors.As(err, &te) {
			return release, errBadRequest("invalid JSON body: the body has the wrong type (%s)", te.Value)
		}
		return release, errBadRequest("invalid JSON body: %v", err)
	}
	return release, nil
}

func isJSON(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// directoryOf is the directory a request names (?directory= or the
// x-opencode-directory header, which clients URL-encode), or "".
func directoryOf(r *http.Request) (string, error) {
	d := r.URL.Query().Get("directory")
	if d == "" {
		d = r.Header.Get("X-Opencode-Directory")
		if strings.Contains(d, "%") {
			if u, err := url.PathUnescape(d); err == nil {
				d = u
			}
		}
	}
	if d == "" {
		return "", nil
	}
	if len(d) > 4096 || strings.IndexByte(d, 0) >= 0 || !path.IsAbs(d) {
		return "", errBadRequest("directory must be an absolute path")
	}
	return path.Clean(d), nil
}

// sessionDirectory is the directory a new session works in.
func (a *Adapter) sessionDirectory(r *http.Request) (string, error) {
	d, err := directoryOf(r)
	if err != nil || d != "" {
		return d, err
	}
	return a.cfg.Directory, nil
}
