package httpapi

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi/internal/route"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Browser safety (docs/api.md section 3), token or not. A web page on another
// site can make a browser send requests to the daemon: simple ones
// (no-cors fetch, forms) without asking it first, and, through DNS
// rebinding, even as if from the daemon's own origin. The MCP transport
// rules are the model:
//
//   - Host: on a loopback listener, Host must name the loopback
//     (localhost, 127.0.0.0/8, [::1], any port) or an --allowed-host, or
//     the request is answered 421: a rebinding page's requests carry its
//     own name.
//   - Origin: a state-changing request (anything but GET, HEAD, OPTIONS,
//     and WebSocket upgrades, which browsers send cross-site without
//     CORS) whose Origin is neither the daemon's own nor allowed by -O is
//     answered 403, as is one marked Sec-Fetch-Site: cross-site without
//     an allowed Origin. Non-browser clients send neither header.
//   - Embedding: a request a page on another site makes without CORS
//     (Sec-Fetch-Site: cross-site, Sec-Fetch-Mode: no-cors: a <script>,
//     <img>, <link> or <video> pointing at the daemon) is answered 403,
//     unless -O allows any origin ('*'). Such a page cannot read the
//     answer, but a file run as its script (a .js or JSONP-shaped file
//     served by /v1/fs/file) or measured as its image would leak to it,
//     and without a token nothing else stops it. Navigations (a link, a
//     download) and CORS requests (the browser enforces -O) pass.
//   - Sniffing: every response says X-Content-Type-Options: nosniff, so a
//     browser never runs or renders a body as something its Content-Type
//     does not say: a file of the fs API (application/octet-stream) loaded
//     by a <script> on the daemon's own origin is refused, not run.
//   - Content type: operations taking JSON require application/json
//     (checkJSONBody), which a page cannot send without a preflight.
func guardBrowsers(next http.Handler, cfg *Config) http.Handler {
	allowed := map[string]bool{}
	for _, h := range cfg.AllowedHosts {
		allowed[hostName(h)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["X-Content-Type-Options"] = nosniff
		if cfg.CheckHost && !hostAllowed(r.Host, allowed) {
			msg := "host '" + r.Host + "' is not allowed; use localhost or 127.0.0.1, or start the daemon with --allowed-host NAME"
			route.WriteProblem(w, route.ProblemFor(r.Context(), route.WithStatus(http.StatusMisdirectedRequest, domain.InvalidRequest("%s", msg))))
			return
		}
		msg := ""
		if changesState(r) {
			msg = crossSite(r, cfg.CORS)
		} else if embedded(r) && !slices.Contains(cfg.CORS.Origins, "*") {
			msg = "cross-site request refused: a page on another site cannot embed the daemon's responses (Sec-Fetch-Mode: no-cors); fetch with CORS (see --cors-allow-origin)"
		}
		if msg != "" {
			route.WriteProblem(w, route.ProblemFor(r.Context(), domain.PermissionDenied(msg)))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// nosniff is the X-Content-Type-Options value, shared by every response
// (a slice literal: an Add would copy it, never write into it).
var nosniff = []string{"nosniff"}

// embedded reports whether r is a browser's no-cors request from another
// site: a page embedding a daemon URL as a script, image, style or media.
func embedded(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Sec-Fetch-Site"), "cross-site") &&
		strings.EqualFold(r.Header.Get("Sec-Fetch-Mode"), "no-cors")
}

// changesState reports whether a browser could change something with r:
// any method but GET, HEAD and OPTIONS, and WebSocket upgrades.
func changesState(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	case http.MethodOptions:
		return false
	}
	return true
}

// crossSite returns why r must be refused as a cross-site browser
// request, or "".
func crossSite(r *http.Request, cors CORS) string {
	origin := r.Header.Get("Origin")
	if origin == "" {
		if strings.EqualFold(r.Header.Get("Sec-Fetch-Site"), "cross-site") {
			return "cross-site request refused (Sec-Fetch-Site: cross-site without an allowed Origin)"
		}
		return ""
	}
	if sameOrigin(origin, r) || cors.allowed(origin) {
		return ""
	}
	return "cross-origin request refused: origin " + origin + " is not allowed (see --cors-allow-origin)"
}

// sameOrigin reports whether origin is the daemon's own as the request
// reached it (scheme and Host), as for the inspector's own requests.
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.Path != "" {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return strings.EqualFold(u.Scheme, scheme) && strings.EqualFold(u.Host, r.Host)
}

// hostAllowed reports whether a Host header names the loopback or an
// allowed name. An absent Host (HTTP/1.0) is no browser's and passes.
func hostAllowed(host string, allowed map[string]bool) bool {
	if host == "" {
		return true
	}
	name := hostName(host)
	if name == "localhost" || allowed[name] {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

// hostName is a Host value without port, brackets or trailing dot, in
// lower case.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.ToLower(strings.TrimSuffix(host, "."))
}
