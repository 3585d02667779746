package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

type loggerKey struct{}

// logger returns the request's logger (tagged with its request id).
func logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

// requestContext gives each request an id (X-Request-Id, echoed back) and a
// logger carrying it, and turns a panic into a logged 500.
func requestContext(next http.Handler, base *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 128 {
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		l := base.With("request_id", id)
		ctx := context.WithValue(r.Context(), loggerKey{}, l)
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				l.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", v)
				writeProblem(w, problemFor(ctx, errors.New("panic")))
			}
		}()
		if l.Enabled(ctx, slog.LevelDebug) {
			l.Debug("request", "method", r.Method, "path", r.URL.Path)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// bearerAuth guards every /v1/* and /acp/* route when token is set. The comparison is
// constant-time; the scheme must be spelled "Bearer".
func bearerAuth(next http.Handler, token string) http.Handler {
	if token == "" {
		return next
	}
	// Both sides are hashed first so the comparison takes the same time
	// whatever the length of the presented header (ConstantTimeCompare
	// returns early on a length mismatch, which would leak the length).
	want := sha256.Sum256([]byte("Bearer " + token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if guarded(r.URL.Path) {
			got := sha256.Sum256([]byte(presentedAuthorization(r)))
			if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
				msg := "missing or invalid bearer token"
				p := problemFor(r.Context(), &domain.Error{Kind: domain.KindTokenInvalid, Details: map[string]any{"message": msg}})
				writeProblem(w, p.withHeader("WWW-Authenticate", "Bearer"))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// guarded reports whether a path needs the token: the API (/v1) and ACP's
// standard transport (/acp).
func guarded(path string) bool {
	return strings.HasPrefix(path, "/v1/") || path == "/v1" || strings.HasPrefix(path, "/acp/") || path == "/acp"
}

// problemOnMiss answers unknown routes and wrong methods with problems
// instead of ServeMux's text/plain, keeping its Allow header.
func problemOnMiss(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		rec := &statusRecorder{header: http.Header{}}
		mux.ServeHTTP(rec, r)
		switch rec.status {
		case http.StatusMethodNotAllowed:
			p := problemFor(r.Context(), &domain.Error{Kind: domain.KindInvalidRequest, Msg: "method not allowed", Status: http.StatusMethodNotAllowed})
			writeProblem(w, p.withHeader("Allow", rec.header.Get("Allow")))
		case http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
			for k, v := range rec.header {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.status)
		default:
			writeProblem(w, problemFor(r.Context(), &domain.Error{Kind: domain.KindInvalidRequest, Msg: "endpoint not found", Status: http.StatusNotFound}))
		}
	})
}

// statusRecorder captures what ServeMux would answer for a miss.
type statusRecorder struct {
	header http.Header
	status int
}

func (s *statusRecorder) Header() http.Header         { return s.header }
func (s *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
}
