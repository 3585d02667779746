package inspector

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func serve(t *testing.T, method, target string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	return serveWith(t, Handler(), method, target, hdr...)
}

// serveWith sends one request to h; hdr are header name/value pairs.
func serveWith(t *testing.T, h http.Handler, method, target string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, "http://daemon"+target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestContentTypes(t *testing.T) {
	tests := []struct {
		path, wantType, wantIn string
	}{
		{"/ui/", "text/html; charset=utf-8", "<title>Sandbox Agent inspector</title>"},
		{"/ui/index.html", "text/html; charset=utf-8", `src="/ui/js/main.js"`},
		{"/ui/style.css", "text/css; charset=utf-8", ":root"},
		{"/ui/js/main.js", "text/javascript; charset=utf-8", "import"},
		{"/ui/js/sse.js", "text/javascript; charset=utf-8", "Last-Event-ID"},
		{"/ui/favicon.svg", "image/svg+xml", "<svg"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rec := serve(t, http.MethodGet, tt.path)
			if rec.Code != http.StatusOK {
				t.Fatalf("status = %d, want 200", rec.Code)
			}
			if got := rec.Header().Get("Content-Type"); got != tt.wantType {
				t.Errorf("Content-Type = %q, want %q", got, tt.wantType)
			}
			if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options = %q, want nosniff", got)
			}
			if !strings.Contains(rec.Body.String(), tt.wantIn) {
				t.Errorf("body does not contain %q", tt.wantIn)
			}
		})
	}
}

// TestEveryAssetReferenced checks that each module the page imports is
// embedded, so a renamed file cannot silently turn into index.html.
func TestEveryAssetReferenced(t *testing.T) {
	assets, err := load(files)
	if err != nil {
		t.Fatal(err)
	}
	for name, a := range assets {
		if !strings.HasSuffix(name, ".js") {
			continue
		}
		sc := bufio.NewScanner(strings.NewReader(string(a.body)))
		for sc.Scan() {
			line := sc.Text()
			i := strings.Index(line, `from "./`)
			if !strings.HasPrefix(line, "import") || i < 0 {
				continue
			}
			dep := line[i+len(`from "./`):]
			dep = "js/" + dep[:strings.IndexByte(dep, '"')]
			if assets[dep] == nil {
				t.Errorf("%s imports %s, which is not embedded", name, dep)
			}
		}
	}
}

func TestSPAFallback(t *testing.T) {
	index := serve(t, http.MethodGet, "/ui/").Body.String()
	for _, p := range []string{"/ui/sessions", "/ui/files/some/deep/path", "/ui/js", "/ui/js/missing.js", "/ui/agents?x=1"} {
		t.Run(p, func(t *testing.T) {
			rec := serve(t, http.MethodGet, p)
			if rec.Code != http.StatusOK {
				t.Fatalf("status = %d, want 200", rec.Code)
			}
			if got := rec.Header().Get("Content-Type"); got != "text/html; charset=utf-8" {
				t.Errorf("Content-Type = %q, want text/html", got)
			}
			if rec.Body.String() != index {
				t.Errorf("body is not index.html")
			}
		})
	}
}

// TestNoPathEscape sends paths that would leave the ui directory if they
// were joined onto a file system path; each must answer index.html.
func TestNoPathEscape(t *testing.T) {
	index := serve(t, http.MethodGet, "/ui/").Body.String()
	for _, p := range []string{
		"/ui/../handler.go", "/ui/../../go.mod", "/ui/%2e%2e/handler.go", "/ui/js/../../handler.go",
		"/ui/..%2fhandler.go", "/ui//etc/passwd", "/ui/./index.html/../../doc.go", "/ui/ui/index.html",
	} {
		t.Run(p, func(t *testing.T) {
			rec := serve(t, http.MethodGet, p)
			if rec.Code != http.StatusOK || rec.Body.String() != index {
				t.Errorf("status %d, body %.60q: want index.html", rec.Code, rec.Body.String())
			}
			if strings.Contains(rec.Body.String(), "package inspector") || strings.Contains(rec.Body.String(), "module ") {
				t.Errorf("served a source file")
			}
		})
	}
}

func TestRedirect(t *testing.T) {
	tests := map[string]string{"/ui": "/ui/", "/ui?token=abc": "/ui/?token=abc"}
	for in, want := range tests {
		rec := serve(t, http.MethodGet, in)
		if rec.Code != http.StatusMovedPermanently {
			t.Errorf("GET %s: status = %d, want 301", in, rec.Code)
		}
		if got := rec.Header().Get("Location"); got != want {
			t.Errorf("GET %s: Location = %q, want %q", in, got, want)
		}
	}
}

func TestMethodsAndCaching(t *testing.T) {
	if rec := serve(t, http.MethodPost, "/ui/"); rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: status %d Allow %q, want 405 with Allow: GET, HEAD", rec.Code, rec.Header().Get("Allow"))
	}
	head := serve(t, http.MethodHead, "/ui/style.css")
	if head.Code != http.StatusOK || head.Body.Len() != 0 || head.Header().Get("Content-Type") != "text/css; charset=utf-8" {
		t.Errorf("HEAD: status %d, %d body bytes, type %q", head.Code, head.Body.Len(), head.Header().Get("Content-Type"))
	}
	etag := head.Header().Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	if rec := serve(t, http.MethodGet, "/ui/style.css", "If-None-Match", etag); rec.Code != http.StatusNotModified {
		t.Errorf("If-None-Match: status = %d, want 304", rec.Code)
	}
	if csp := serve(t, http.MethodGet, "/ui/").Header().Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("index.html CSP = %q", csp)
	}
}

// TestSecurityHeaders: the inspector's pages run only the daemon's own
// script files, under Trusted Types, cannot be framed, keep no opener and
// send no Referer; every file says nosniff. The docs page has the same
// policy but Trusted Types (Swagger UI renders markdown as HTML).
func TestSecurityHeaders(t *testing.T) {
	for _, p := range []string{"/ui/", "/ui/index.html", "/ui/files/x", "/ui/js/main.js", "/ui/style.css", "/ui/favicon.svg", "/docs", "/docs/init.js"} {
		t.Run(p, func(t *testing.T) {
			var rec *httptest.ResponseRecorder
			if strings.HasPrefix(p, "/docs") {
				rec = serveDocs(t, p)
			} else {
				rec = serve(t, http.MethodGet, p)
			}
			page := strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html")
			want := map[string]string{
				"X-Content-Type-Options": "nosniff",
				"X-Frame-Options":        "DENY",
				"Referrer-Policy":        "no-referrer",
			}
			switch {
			case page && strings.HasPrefix(p, "/docs"):
				want["Content-Security-Policy"] = csp
				want["Cross-Origin-Opener-Policy"] = "same-origin"
			case page:
				want["Content-Security-Policy"] = uiCSP
				want["Cross-Origin-Opener-Policy"] = "same-origin"
			default:
				want["Content-Security-Policy"] = ""
			}
			for k, v := range want {
				if got := rec.Header().Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
	for _, directive := range []string{"script-src 'self';", "object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'", "form-action 'none'",
		"require-trusted-types-for 'script'", "trusted-types 'none'"} {
		if !strings.Contains(uiCSP, directive) {
			t.Errorf("the inspector's CSP lacks %s: %s", directive, uiCSP)
		}
	}
	if strings.Contains(uiCSP, "unsafe") || strings.Contains(csp, "unsafe") {
		t.Errorf("a CSP allows unsafe-*: %s", uiCSP)
	}
	// The redirect keeps a ?token= out of caches and Referers.
	rec := serve(t, http.MethodGet, "/ui?token=s3cret")
	if rec.Header().Get("Cache-Control") != "no-store" || rec.Header().Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("redirect headers: %v", rec.Header())
	}
}

// TestNoHTMLSinks: no module of the page parses a string as markup or
// code. Everything agents, files and processes send is shown as text;
// the CSP's Trusted Types make such a sink throw at run time, this says
// so at review time.
func TestNoHTMLSinks(t *testing.T) {
	assets, err := load(files)
	if err != nil {
		t.Fatal(err)
	}
	sinks := []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "srcdoc",
		"createContextualFragment", "DOMParser", "javascript:", `setAttribute("on`, "setTimeout(\"", "setInterval(\""}
	for name, a := range assets {
		if !strings.HasSuffix(name, ".js") && !strings.HasSuffix(name, ".html") {
			continue
		}
		for i, line := range strings.Split(string(a.body), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue // comments may name them
			}
			for _, s := range sinks {
				if strings.Contains(line, s) {
					t.Errorf("%s:%d uses %s", name, i+1, s)
				}
			}
		}
	}
}
