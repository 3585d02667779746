package inspector

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func serveDocs(t *testing.T, target string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	return serveWith(t, Docs(), http.MethodGet, target, hdr...)
}

// TestDocsPage: /docs is a page with the strict CSP that loads only files
// the daemon serves (no CDN), and its script is a file, not inline.
func TestDocsPage(t *testing.T) {
	for _, p := range []string{"/docs", "/docs/"} {
		rec := serveDocs(t, p)
		body := rec.Body.String()
		if rec.Code != 200 || rec.Header().Get("Content-Security-Policy") != csp || !strings.Contains(body, `<div id="swagger-ui">`) {
			t.Fatalf("%s: %d %v\n%s", p, rec.Code, rec.Header(), body)
		}
		if strings.Contains(body, "http://") || strings.Contains(body, "https://") || strings.Contains(body, "<script>") {
			t.Errorf("%s loads something from elsewhere or inline:\n%s", p, body)
		}
		for _, ref := range []string{"/docs/swagger-ui-bundle.js", "/docs/init.js", "/docs/swagger-ui.css", "/docs/favicon-32x32.png"} {
			if !strings.Contains(body, `"`+ref+`"`) {
				t.Errorf("page does not reference %s", ref)
			}
			if rec := serveDocs(t, ref); rec.Code != 200 {
				t.Errorf("%s: %d", ref, rec.Code)
			}
		}
	}
	if rec := serveDocs(t, "/docs/init.js"); !strings.Contains(rec.Body.String(), `url: "/openapi.json"`) || rec.Header().Get("Content-Type") != "text/javascript; charset=utf-8" {
		t.Errorf("init.js: %v\n%s", rec.Header(), rec.Body)
	}
	for _, p := range []string{"/docs/nope.js", "/docs/../ui/index.html", "/docs/embed.go"} {
		if rec := serveDocs(t, p); rec.Code != 404 {
			t.Errorf("%s: %d, want 404", p, rec.Code)
		}
	}
}

// TestDocsGzip: the Swagger UI bundle ships gzip-compressed; it is sent
// as it is to clients that accept gzip and decompressed for the others.
func TestDocsGzip(t *testing.T) {
	gz := serveDocs(t, "/docs/swagger-ui-bundle.js", "Accept-Encoding", "gzip, br")
	if gz.Code != 200 || gz.Header().Get("Content-Encoding") != "gzip" || gz.Header().Get("Content-Type") != "text/javascript; charset=utf-8" {
		t.Fatalf("gzip: %d %v", gz.Code, gz.Header())
	}
	zr, err := gzip.NewReader(gz.Body)
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	plain := serveDocs(t, "/docs/swagger-ui-bundle.js")
	if plain.Code != 200 || plain.Header().Get("Content-Encoding") != "" || plain.Body.String() != string(unzipped) {
		t.Fatalf("identity: %d %v (%d bytes, gzip gave %d)", plain.Code, plain.Header(), plain.Body.Len(), len(unzipped))
	}
	if !strings.Contains(plain.Body.String(), "SwaggerUIBundle") {
		t.Error("the bundle does not define SwaggerUIBundle")
	}
	if gz.Header().Get("ETag") == plain.Header().Get("ETag") {
		t.Error("both encodings share one ETag")
	}
	if q0 := serveDocs(t, "/docs/swagger-ui.css", "Accept-Encoding", "gzip;q=0"); q0.Header().Get("Content-Encoding") != "" {
		t.Error("gzip;q=0 still got gzip")
	}
}
