package httpapi

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi/internal/route"
	"github.com/sandbox-agent-go/sandbox-agent/app/authz"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

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
		l := route.WithLazy(base, slog.String("request_id", id))
		ctx := route.WithLogger(r.Context(), l)
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				l.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", v)
				route.WriteProblem(w, route.ProblemFor(ctx, errors.New("panic")))
			}
		}()
		if l.Enabled(ctx, slog.LevelDebug) {
			l.Debug("request", "method", r.Method, "path", r.URL.Path)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// problemOnMiss answers unknown routes and wrong methods with problems
// instead of ServeMux's text/plain, keeping its Allow header. Under /v1 and
// /acp it first asks for the token when one is configured, as for every
// path there.
func problemOnMiss(mux *http.ServeMux, cfg *Config) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		if !tokenOnly(w, r, cfg) {
			return
		}
		rec := &statusRecorder{header: http.Header{}}
		mux.ServeHTTP(rec, r)
		switch rec.status {
		case http.StatusMethodNotAllowed:
			p := route.ProblemFor(r.Context(), route.WithStatus(http.StatusMethodNotAllowed, domain.InvalidRequest("method not allowed")))
			route.WriteProblem(w, p.WithHeader("Allow", rec.header.Get("Allow")))
		case http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
			for k, v := range rec.header {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.status)
		default:
			route.WriteProblem(w, route.EndpointNotFound())
		}
	})
}

// oneCredential refuses, 400, a request with more than one Authorization
// header (or more than one of the router's token header): the token
// check reads one of them and a policy could read another, so two are
// ambiguous, as case-variant duplicate keys in a body are; and no client
// sends two.
func oneCredential(next http.Handler, tokenHeader string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, name := range [2]string{"Authorization", tokenHeader} {
			if name != "" && len(r.Header.Values(name)) > 1 {
				route.WriteProblem(w, route.ProblemFor(r.Context(), domain.InvalidRequest("more than one %s header", http.CanonicalHeaderKey(name))))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// tokenOnly is the auth of /v1 and /acp paths that are no operation
// (unknown routes, wrong methods, the removed /v1/rpc): they do nothing and
// have no action for a policy to judge, so only the built-in token check
// applies, keeping "every /v1 and /acp path needs the token" true. It
// answers 401 itself and reports whether the request may go on.
func tokenOnly(w http.ResponseWriter, r *http.Request, cfg *Config) bool {
	if !route.Guarded(r.URL.Path) {
		return true
	}
	if !cfg.env.Chain.TokenConfigured() || cfg.env.Chain.Tokens.Check(cfg.env.PresentedAuthorization(r, "")) {
		return true
	}
	route.WriteAuthProblem(w, r.Context(), authz.ErrTokenInvalid)
	return false
}

// statusRecorder captures what ServeMux would answer for a miss.
type statusRecorder struct {
	header http.Header
	status int
}

func (s *statusRecorder) Header() http.Header         { return s.header }
func (s *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (s *statusRecorder) WriteHeader(code int) {
	s.status = cmp.Or(s.status, code)
}
