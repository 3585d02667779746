package inspector

import (
	"bytes"
	"compress/gzip"
	"embed"
	"io"
	"net/http"
	"strings"

	swagger "github.com/swaggest/swgui/v5/static"
)

//go:embed docs
var docsFiles embed.FS

// Docs serves the API documentation at /docs: Swagger UI rendering
// /openapi.json, every file embedded in the binary (the Swagger UI bundle
// from the Go module github.com/swaggest/swgui, the page and its start-up
// script from this package), so the page works offline and under the same
// Content-Security-Policy as the inspector. /docs and /docs/ serve the page;
// /docs/<file> one of its files; anything else under /docs/ is 404.
func Docs() http.Handler {
	page, err := loadDir(docsFiles, "docs")
	if err != nil {
		panic("inspector: embedded docs files: " + err.Error())
	}
	bundle, err := loadDir(swagger.FS, ".")
	if err != nil {
		panic("inspector: embedded Swagger UI: " + err.Error())
	}
	assets := map[string]*asset{}
	for _, name := range []string{"swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png", "favicon-16x16.png"} {
		if bundle[name] == nil {
			panic("inspector: Swagger UI lacks " + name)
		}
		assets[name] = bundle[name]
	}
	for name, a := range page {
		assets[name] = a
	}
	return &docsHandler{assets: assets, index: page["index.html"]}
}

type docsHandler struct {
	assets map[string]*asset
	index  *asset
}

func (h *docsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	a := h.index
	if name := strings.TrimPrefix(r.URL.Path, "/docs/"); r.URL.Path != "/docs" && name != "" {
		if a = h.assets[name]; a == nil {
			http.NotFound(w, r)
			return
		}
	}
	page := ""
	if a == h.index {
		page = csp
	}
	serveAsset(w, r, a, page)
}

// gunzip returns a gzip-compressed asset's body decompressed, for the rare
// client that does not accept gzip.
func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(zr, 64<<20))
}

// acceptsGzip reports whether the request accepts a gzip body.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(strings.TrimSpace(q), " ", "") != "q=0" {
			return true
		}
	}
	return false
}
