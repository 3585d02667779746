package httpapi

import (
	"errors"
	"net/http"
	"slices"
	"strings"
)

// CORS is the cross-origin policy of docs/api.md section 3. With no origins, no
// Access-Control-Allow-Origin header is ever sent.
type CORS struct {
	Origins     []string // "*" allows any origin
	Methods     []string // empty: any
	Headers     []string // empty: any
	Credentials bool
}

// Validate rejects combinations browsers refuse, at start-up rather than
// per request.
func (c CORS) Validate() error {
	if !c.Credentials {
		return nil
	}
	if slices.Contains(c.Origins, "*") {
		return errors.New("--cors-allow-credentials cannot be combined with the wildcard origin '*'; list the origins explicitly")
	}
	if len(c.Methods) == 0 || slices.Contains(c.Methods, "*") {
		return errors.New("--cors-allow-credentials needs explicit --cors-allow-method values (wildcard methods are not allowed with credentials)")
	}
	if len(c.Headers) == 0 || slices.Contains(c.Headers, "*") {
		return errors.New("--cors-allow-credentials needs explicit --cors-allow-header values (wildcard headers are not allowed with credentials)")
	}
	return nil
}

func (c CORS) allowed(origin string) bool {
	return origin != "" && (slices.Contains(c.Origins, "*") || slices.Contains(c.Origins, origin))
}

// wrap answers preflights (no token needed) and decorates responses.
func (c CORS) wrap(next http.Handler) http.Handler {
	if len(c.Origins) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if !c.allowed(origin) {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		if slices.Contains(c.Origins, "*") && !c.Credentials {
			h.Set("Access-Control-Allow-Origin", "*")
		} else {
			h.Set("Access-Control-Allow-Origin", origin)
		}
		if c.Credentials {
			h.Set("Access-Control-Allow-Credentials", "true")
		}
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			methods := strings.Join(c.Methods, ", ")
			if len(c.Methods) == 0 || slices.Contains(c.Methods, "*") {
				methods = "GET, POST, PUT, DELETE, OPTIONS"
			}
			headers := strings.Join(c.Headers, ", ")
			if len(c.Headers) == 0 || slices.Contains(c.Headers, "*") {
				headers = r.Header.Get("Access-Control-Request-Headers")
			}
			h.Set("Access-Control-Allow-Methods", methods)
			if headers != "" {
				h.Set("Access-Control-Allow-Headers", headers)
			}
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.Set("Access-Control-Expose-Headers", "Content-Type, X-Request-Id, Acp-Connection-Id")
		next.ServeHTTP(w, r)
	})
}
