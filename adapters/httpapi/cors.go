package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
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

// Validate rejects combinations browsers refuse, and origins no browser
// sends, at start-up rather than per request.
func (c CORS) Validate() error {
	for _, o := range c.Origins {
		if err := checkOrigin(o); err != nil {
			return err
		}
	}
	if !c.Credentials {
		return nil
	}
	if slices.Contains(c.Origins, "null") {
		return errors.New("--cors-allow-credentials cannot be combined with the origin 'null': every sandboxed frame, data: URL and file:// page sends it, whatever site it comes from")
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

// NormalizeOrigins writes each origin the way browsers send it: scheme
// and host in lower case, without the trailing '/' a URL copied from the
// address bar has. The reference takes "https://App.example/" as it is
// and never matches it; here it means the origin it names. Anything else
// that is not an origin is left for Validate to refuse.
func NormalizeOrigins(origins []string) []string {
	out := make([]string, 0, len(origins))
	for _, o := range origins {
		if u, err := url.Parse(o); err == nil && u.Scheme != "" && u.Host != "" && u.User == nil &&
			(u.Path == "" || u.Path == "/") && u.RawQuery == "" && u.Fragment == "" && !strings.ContainsAny(o, "?#") {
			o = strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host)
		}
		out = append(out, o)
	}
	return out
}

// checkOrigin accepts what a browser can send as Origin (and '*'): a
// scheme and a host, with a port or not, in lower case (NormalizeOrigins
// makes it so); or "null". An origin written otherwise (a path) would
// never match, and CORS would fail with no word of why.
func checkOrigin(o string) error {
	if o == "*" || o == "null" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || u.Scheme == "" || u.Host == "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" ||
		strings.HasSuffix(o, "?") || strings.HasSuffix(o, "#") {
		return fmt.Errorf("--cors-allow-origin %q is not an origin: write scheme://host[:port], with no path (e.g. https://app.example.com)", o)
	}
	if o != strings.ToLower(o) {
		return fmt.Errorf("--cors-allow-origin %q: browsers send origins in lower case; write %q", o, strings.ToLower(o))
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
		// The answer depends on Origin whether it is allowed or not: a
		// cache must not give one origin's answer to another.
		h := w.Header()
		h.Add("Vary", "Origin")
		origin := r.Header.Get("Origin")
		if !c.allowed(origin) {
			next.ServeHTTP(w, r)
			return
		}
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
