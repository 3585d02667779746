package inspector

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed ui
var files embed.FS

// contentTypes is fixed here rather than taken from mime.TypeByExtension,
// which consults the host's mime.types and may, for example, call .js
// "application/x-javascript"; browsers refuse modules served like that.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
	".json": "application/json",
	".png":  "image/png",
	".ico":  "image/x-icon",
}

// csp keeps a page to its own origin: it only ever talks to the daemon
// that served it, runs only the script files the daemon serves (no inline
// script, no event handler attributes, no javascript: URLs), and cannot be
// framed. blob: and data: cover file previews and downloads. The docs
// page (Swagger UI) has this one.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"

// uiCSP is the inspector's: csp, and Trusted Types enforced with no
// policy at all, so a string reaching an HTML or script sink (innerHTML,
// insertAdjacentHTML, document.write, an on* attribute, a script's src)
// throws instead of being parsed: the page never uses one, and it shows
// what agents, files and processes send, holding the bearer token.
// Swagger UI renders markdown through innerHTML, so /docs cannot have it.
const uiCSP = csp + "; require-trusted-types-for 'script'; trusted-types 'none'"

// asset is one embedded file, read once at start-up. A gzip asset (a
// "<name>.gz" file, as Swagger UI ships) is served compressed to clients
// that accept gzip.
type asset struct {
	name, contentType, etag string
	body                    []byte
	gzip                    bool
}

// Handler serves the inspector: /ui redirects to /ui/, /ui/ and every
// /ui/<path> that is not an embedded file serve index.html (the page routes
// on the client side). Only GET and HEAD are answered.
func Handler() http.Handler {
	assets, err := load(files)
	if err != nil {
		panic("inspector: embedded files: " + err.Error()) // a build defect, caught by the tests
	}
	return &handler{assets: assets, index: assets["index.html"]}
}

type handler struct {
	assets map[string]*asset
	index  *asset
}

func load(fsys fs.FS) (map[string]*asset, error) {
	assets, err := loadDir(fsys, "ui")
	if err == nil && assets["index.html"] == nil {
		err = fs.ErrNotExist
	}
	return assets, err
}

// loadDir reads every file under dir of fsys, keyed by its path below dir
// ("<name>.gz" as name, marked gzip).
func loadDir(fsys fs.FS, dir string) (map[string]*asset, error) {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		return nil, err
	}
	assets := map[string]*asset{}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".go") {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		name, gz := strings.CutSuffix(p, ".gz")
		ct, ok := contentTypes[path.Ext(name)]
		if !ok {
			ct = "application/octet-stream"
		}
		sum := sha256.Sum256(b)
		assets[name] = &asset{name: name, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, body: b, gzip: gz}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return assets, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == "/ui" {
		target := "/ui/"
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
		// The query may hold ?token=: kept out of caches and Referers.
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		http.Redirect(w, r, target, http.StatusMovedPermanently)
		return
	}
	// Lookup is by exact name in a map of embedded files, so no request
	// path, however spelled, can reach anything else.
	name := strings.TrimPrefix(r.URL.Path, "/ui/")
	a := h.assets[name]
	if a == nil {
		a = h.index
	}
	page := ""
	if a == h.index {
		page = uiCSP
	}
	serveAsset(w, r, a, page)
}

// serveAsset writes one embedded file; a page gets the given
// Content-Security-Policy. Every file says nosniff, sends no Referer (the
// inspector's address may carry ?token=) and may not be framed (the CSP's
// frame-ancestors, and X-Frame-Options for browsers without it); a page
// keeps no opener from another origin (COOP), so a site that opened it
// cannot script or navigate it.
func serveAsset(w http.ResponseWriter, r *http.Request, a *asset, page string) {
	hdr := w.Header()
	hdr.Set("Content-Type", a.contentType)
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("X-Frame-Options", "DENY")
	if page != "" {
		hdr.Set("Content-Security-Policy", page)
		hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
	}
	body := a.body
	if a.gzip {
		hdr.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			hdr.Set("Content-Encoding", "gzip")
			hdr.Set("ETag", a.etag)
			// No Range over the compressed bytes: the whole body or nothing.
			r.Header.Del("Range")
		} else {
			b, err := gunzip(a.body)
			if err != nil {
				http.Error(w, "corrupt embedded file", http.StatusInternalServerError)
				return
			}
			body = b
			hdr.Set("ETag", strings.TrimSuffix(a.etag, `"`)+`-identity"`)
		}
	} else {
		hdr.Set("ETag", a.etag)
	}
	http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(body))
}
