package e2e

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// TestBrowserHeaders checks, on the built binary, what a browser is told
// by each kind of answer: the inspector's and the docs' pages (a strict
// CSP, Trusted Types for the inspector, no framing, no Referer, no opener),
// a file of the fs API (a download, never a page: an agent's HTML or SVG
// file would otherwise run on the origin where the inspector keeps its
// token), and every answer's nosniff; another site's no-cors embedding is
// refused.
func TestBrowserHeaders(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{Args: []string{"--token", "hdr-t0ken"}})
	if err := os.WriteFile(filepath.Join(d.Home, "evil.html"), []byte("<script>alert(document.domain)</script>"), 0o644); err != nil {
		t.Fatal(err)
	}
	auth := []string{"Authorization", "Bearer hdr-t0ken"}
	type want map[string]string // "" means absent
	for _, tt := range []struct {
		name, path string
		hdr        []string
		status     int
		want       want
	}{
		{"inspector page", "/ui/", nil, 200, want{
			"Content-Security-Policy":    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'; require-trusted-types-for 'script'; trusted-types 'none'",
			"X-Frame-Options":            "DENY",
			"X-Content-Type-Options":     "nosniff",
			"Referrer-Policy":            "no-referrer",
			"Cross-Origin-Opener-Policy": "same-origin",
		}},
		{"inspector script", "/ui/js/main.js", nil, 200, want{"Content-Type": "text/javascript; charset=utf-8", "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY"}},
		{"docs page", "/docs", nil, 200, want{
			"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'",
			"X-Frame-Options":         "DENY",
			"X-Content-Type-Options":  "nosniff",
		}},
		{"an agent's HTML file", "/v1/fs/file?path=evil.html", auth, 200, want{
			"Content-Type":            "application/octet-stream",
			"Content-Disposition":     "attachment; filename=evil.html",
			"Content-Security-Policy": "sandbox; default-src 'none'",
			"X-Content-Type-Options":  "nosniff",
		}},
		{"a problem", "/v1/fs/file?path=nope.html", auth, 404, want{"Content-Type": "application/problem+json", "X-Content-Type-Options": "nosniff", "Content-Disposition": ""}},
		{"401", "/v1/health", nil, 401, want{"X-Content-Type-Options": "nosniff"}},
		{"the OpenAPI document", "/openapi.json", nil, 200, want{"X-Content-Type-Options": "nosniff"}},
		{"another site's <script src>", "/v1/fs/file?path=evil.html", append([]string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors", "Sec-Fetch-Dest", "script"}, auth...), 403, want{"X-Content-Type-Options": "nosniff"}},
		{"a link from another site", "/v1/fs/file?path=evil.html", append([]string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate"}, auth...), 200, want{"Content-Disposition": "attachment; filename=evil.html"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, h, body := d.Do("GET", tt.path, nil, tt.hdr...)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			for k, v := range tt.want {
				if got := h.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

// TestTokenNotLogged: a token in a URL (the inspector's ?token=, the
// terminal's ?access_token=, a wrong one refused) never reaches the
// daemon's log, even at debug level.
func TestTokenNotLogged(t *testing.T) {
	t.Parallel()
	const token, wrong = "tok-SECRET-4711", "wrong-SECRET-0815"
	d := harness.Start(t, harness.Options{Args: []string{"--token", token}})
	for _, tt := range []struct {
		path string
		hdr  []string
	}{
		{"/ui/?token=" + token, nil},
		{"/ui?token=" + token, nil},
		{"/v1/health?token=" + token + "&access_token=" + token, nil},
		{"/v1/processes/nope/terminal/ws?access_token=" + token, []string{"Upgrade", "websocket", "Connection", "Upgrade", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}},
		{"/v1/processes/nope/terminal/ws?access_token=" + wrong, []string{"Upgrade", "websocket", "Connection", "Upgrade", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}},
		{"/v1/fs/stat?path=" + url.QueryEscape(wrong), []string{"Authorization", "Bearer " + wrong}},
	} {
		d.Do("GET", tt.path, nil, tt.hdr...)
	}
	// The daemon logs each request; one more request, answered, means the
	// earlier ones' lines are written.
	harness.Eventually(t, 10*time.Second, "the requests are logged", func() bool {
		return strings.Count(d.Logs(), "/v1/processes/nope/terminal/ws") >= 2
	})
	if logs := d.Logs(); strings.Contains(logs, "SECRET") {
		t.Errorf("a token reached the log:\n%s", harness.Tail(logs, 40))
	}
}

// TestCORSHostile: with CORS on for one origin, credentials allowed,
// neither another origin nor "null" is ever reflected, their preflights
// fail and their state-changing requests are refused; the trusted origin
// works, given with capitals and a trailing '/'. What is no origin at
// all, and "null" with credentials, is refused at start-up.
func TestCORSHostile(t *testing.T) {
	t.Parallel()
	const app = "http://app.example:5173"
	// Given as an address bar shows it: the origin browsers send is meant.
	d := harness.Start(t, harness.Options{Args: []string{"--token", "c0rs", "-O", "HTTP://App.example:5173/", "-C",
		"-M", "GET", "-M", "POST", "-M", "DELETE", "-A", "authorization", "-A", "content-type"}})
	auth := []string{"Authorization", "Bearer c0rs"}
	for _, tt := range []struct {
		name, method, path, origin string
		hdr                        []string
		status                     int
		acao, acac                 string
	}{
		{"trusted preflight", "OPTIONS", "/v1/acp/x", app, []string{"Access-Control-Request-Method", "DELETE", "Access-Control-Request-Headers", "authorization"}, 204, app, "true"},
		{"hostile preflight", "OPTIONS", "/v1/acp/x", "https://evil.example", []string{"Access-Control-Request-Method", "DELETE"}, 401, "", ""},
		{"null preflight", "OPTIONS", "/v1/acp/x", "null", []string{"Access-Control-Request-Method", "DELETE"}, 401, "", ""},
		{"look-alike preflight", "OPTIONS", "/v1/acp/x", app + ".evil.example", []string{"Access-Control-Request-Method", "DELETE"}, 401, "", ""},
		{"trusted read", "GET", "/v1/health", app, auth, 200, app, "true"},
		{"hostile read: answered, never readable", "GET", "/v1/health", "https://evil.example", auth, 200, "", ""},
		{"hostile delete", "DELETE", "/v1/acp/x", "https://evil.example", auth, 403, "", ""},
		{"null delete", "DELETE", "/v1/acp/x", "null", auth, 403, "", ""},
		{"trusted delete", "DELETE", "/v1/acp/x", app, auth, 204, app, "true"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, h, body := d.Do(tt.method, tt.path, nil, append([]string{"Origin", tt.origin}, tt.hdr...)...)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			if got := h.Get("Access-Control-Allow-Origin"); got != tt.acao {
				t.Errorf("Access-Control-Allow-Origin = %q, want %q", got, tt.acao)
			}
			if got := h.Get("Access-Control-Allow-Credentials"); got != tt.acac {
				t.Errorf("Access-Control-Allow-Credentials = %q, want %q", got, tt.acac)
			}
			// A 403 of the browser guard is not cacheable; anything else
			// depends on Origin and says so.
			if status != 403 && !strings.Contains(strings.Join(h.Values("Vary"), ","), "Origin") {
				t.Errorf("Vary = %q: the answer depends on Origin", h.Values("Vary"))
			}
		})
	}
	env := append(os.Environ(), "HOME="+t.TempDir())
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-O", "null", "-C", "-M", "GET", "-A", "authorization"}, "'null'"},
		{[]string{"-O", "*", "-C", "-M", "GET", "-A", "authorization"}, "wildcard origin"},
		{[]string{"-O", "http://app.example:5173/app"}, "not an origin"},
		{[]string{"-O", "app.example"}, "not an origin"},
	} {
		r := runCLI(t, harness.Binary, env, -1, append([]string{"server", "--host", "127.0.0.1", "--port", "0"}, tt.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
}
