package httpapi

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"strings"
	"testing"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/app/files"
)

// fsServer serves /v1/fs and /v1/config on fsys with home as $HOME.
func fsServer(t *testing.T, fsys afero.Fs, home string, maxUpload int64) *httptest.Server {
	t.Helper()
	for p, content := range map[string]string{
		"a.txt":         "hello world",
		"dir/inner.txt": "inner",
	} {
		full := path.Join(home, p)
		if err := fsys.MkdirAll(path.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := afero.WriteFile(fsys, full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.MkdirAll(path.Join(home, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Config{
		Files:     &files.Files{Fs: fsys, Home: home},
		Config:    &files.ConfigStore{Fs: fsys, Base: home},
		MaxUpload: maxUpload,
	}))
	t.Cleanup(srv.Close)
	return srv
}

type fsCall struct {
	method, target string
	body           []byte
	headers        map[string]string
}

type fsReply struct {
	status int
	header http.Header
	body   []byte
}

func (r fsReply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

func fsDo(t *testing.T, srv *httptest.Server, c fsCall) fsReply {
	t.Helper()
	var body io.Reader
	if c.body != nil {
		body = bytes.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, srv.URL+c.target, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fsReply{resp.StatusCode, resp.Header, b}
}

// backends are the filesystems the route tables run against.
func backends(t *testing.T) map[string]func(t *testing.T) (afero.Fs, string) {
	return map[string]func(t *testing.T) (afero.Fs, string){
		"memory": func(t *testing.T) (afero.Fs, string) { return afero.NewMemMapFs(), "/home/u" },
		"os":     func(t *testing.T) (afero.Fs, string) { return afero.NewOsFs(), t.TempDir() },
	}
}

func tarOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// fsRouteCase is one request against a fresh tree; "HOME" in target and
// want stands for the backend's home directory.
type fsRouteCase struct {
	name   string
	call   fsCall
	status int
	want   string // substring of the body
	check  func(t *testing.T, r fsReply, home string)
}

var jsonCT = map[string]string{"Content-Type": "application/json"}
var tarCT = map[string]string{"Content-Type": "application/x-tar"}

func fsRouteCases(t *testing.T) []fsRouteCase {
	return []fsRouteCase{
		{name: "list home", call: fsCall{method: "GET", target: "/v1/fs/entries"}, status: 200,
			check: func(t *testing.T, r fsReply, home string) {
				var entries []map[string]any
				if err := json.Unmarshal(r.body, &entries); err != nil {
					t.Fatal(err)
				}
				if len(entries) != 3 || entries[0]["name"] != "a.txt" || entries[0]["path"] != home+"/a.txt" ||
					entries[0]["entryType"] != "file" || entries[0]["size"] != 11.0 || entries[1]["entryType"] != "directory" {
					t.Fatalf("entries %s", r.body)
				}
				if m, _ := entries[0]["modified"].(string); !strings.HasSuffix(m, "+00:00") {
					t.Fatalf("modified %q", m)
				}
			}},
		{name: "list missing", call: fsCall{method: "GET", target: "/v1/fs/entries?path=nope"}, status: 404,
			want: `"type":"urn:sandbox-agent:error:not_found","title":"Not Found","status":404,"detail":"not found: path not found: HOME/nope"`},
		{name: "list a file", call: fsCall{method: "GET", target: "/v1/fs/entries?path=a.txt"}, status: 400,
			want: "path is not a directory: HOME/a.txt"},
		{name: "list dot-dot", call: fsCall{method: "GET", target: "/v1/fs/entries?path=../x"}, status: 400,
			want: "invalid relative path: ../x"},
		{name: "read file", call: fsCall{method: "GET", target: "/v1/fs/file?path=a.txt", headers: map[string]string{"Accept": "application/octet-stream"}}, status: 200,
			check: func(t *testing.T, r fsReply, _ string) {
				if string(r.body) != "hello world" || r.header.Get("Content-Type") != "application/octet-stream" {
					t.Fatalf("%q %v", r.body, r.header)
				}
			}},
		{name: "read range", call: fsCall{method: "GET", target: "/v1/fs/file?path=HOME/a.txt", headers: map[string]string{"Range": "bytes=6-10"}}, status: 206,
			check: func(t *testing.T, r fsReply, _ string) {
				if string(r.body) != "world" || r.header.Get("Content-Range") != "bytes 6-10/11" {
					t.Fatalf("%q %v", r.body, r.header)
				}
			}},
		{name: "read bad range", call: fsCall{method: "GET", target: "/v1/fs/file?path=a.txt", headers: map[string]string{"Range": "bytes=100-200"}}, status: 416,
			want: `"type":"urn:sandbox-agent:error:invalid_request"`},
		{name: "read without path", call: fsCall{method: "GET", target: "/v1/fs/file"}, status: 400,
			want: "missing required 'path' query parameter"},
		{name: "read a directory", call: fsCall{method: "GET", target: "/v1/fs/file?path=dir"}, status: 400,
			want: "path is not a file: HOME/dir"},
		{name: "read NUL", call: fsCall{method: "GET", target: "/v1/fs/file?path=a%00b"}, status: 400, want: "NUL"},
		{name: "write", call: fsCall{method: "PUT", target: "/v1/fs/file?path=new/deep/f.bin", body: []byte("0123456789"),
			headers: map[string]string{"Content-Type": "application/octet-stream"}}, status: 200,
			want: `{"path":"HOME/new/deep/f.bin","bytesWritten":10}`},
		{name: "write over a directory", call: fsCall{method: "PUT", target: "/v1/fs/file?path=dir", body: []byte("x")}, status: 400,
			want: "path is not a file"},
		{name: "delete file", call: fsCall{method: "DELETE", target: "/v1/fs/entry?path=a.txt"}, status: 200,
			want: `{"path":"HOME/a.txt"}`},
		{name: "delete full dir", call: fsCall{method: "DELETE", target: "/v1/fs/entry?path=dir&recursive=false"}, status: 400,
			want: "directory is not empty"},
		{name: "delete recursive", call: fsCall{method: "DELETE", target: "/v1/fs/entry?path=dir&recursive=true"}, status: 200},
		{name: "delete missing", call: fsCall{method: "DELETE", target: "/v1/fs/entry?path=nope"}, status: 404,
			want: "path not found"},
		{name: "mkdir", call: fsCall{method: "POST", target: "/v1/fs/mkdir?path=m/n"}, status: 200,
			want: `{"path":"HOME/m/n"}`},
		{name: "mkdir over file", call: fsCall{method: "POST", target: "/v1/fs/mkdir?path=a.txt"}, status: 400,
			want: "path is not a directory"},
		{name: "move", call: fsCall{method: "POST", target: "/v1/fs/move", body: []byte(`{"from":"a.txt","to":"moved/b.txt","extra":1}`), headers: jsonCT},
			status: 200, want: `{"from":"HOME/a.txt","to":"HOME/moved/b.txt"}`},
		{name: "move onto existing", call: fsCall{method: "POST", target: "/v1/fs/move", body: []byte(`{"from":"a.txt","to":"dir"}`), headers: jsonCT},
			status: 400, want: "invalid request: destination already exists: HOME/dir"},
		{name: "move overwrite", call: fsCall{method: "POST", target: "/v1/fs/move", body: []byte(`{"from":"a.txt","to":"dir","overwrite":true}`), headers: jsonCT},
			status: 200},
		{name: "move missing field", call: fsCall{method: "POST", target: "/v1/fs/move", body: []byte(`{"from":"a.txt"}`), headers: jsonCT},
			status: 422},
		{name: "stat dir", call: fsCall{method: "GET", target: "/v1/fs/stat?path=dir"}, status: 200,
			check: func(t *testing.T, r fsReply, home string) {
				m := r.json(t)
				if m["path"] != home+"/dir" || m["entryType"] != "directory" {
					t.Fatalf("stat %s", r.body)
				}
			}},
		{name: "stat missing", call: fsCall{method: "GET", target: "/v1/fs/stat?path=nope"}, status: 404, want: "path not found"},
		{name: "upload", call: fsCall{method: "POST", target: "/v1/fs/upload-batch?path=up", body: tarOf(t, map[string]string{"x/y.txt": "y"}), headers: tarCT},
			status: 200, want: `{"paths":["HOME/up/x/y.txt"],"truncated":false}`},
		// Media types are case-insensitive (RFC 9110 section 8.3.1).
		{name: "upload type in capitals", call: fsCall{method: "POST", target: "/v1/fs/upload-batch?path=up", body: tarOf(t, map[string]string{"x/y.txt": "y"}),
			headers: map[string]string{"Content-Type": "Application/X-Tar"}}, status: 200, want: `{"paths":["HOME/up/x/y.txt"],"truncated":false}`},
		{name: "upload wrong type", call: fsCall{method: "POST", target: "/v1/fs/upload-batch", body: tarOf(t, nil),
			headers: map[string]string{"Content-Type": "application/zip"}}, status: 400,
			want: "content-type must be application/x-tar"},
		{name: "upload escaping entry", call: fsCall{method: "POST", target: "/v1/fs/upload-batch?path=up", body: tarOf(t, map[string]string{"../../evil": "x"}), headers: tarCT},
			status: 400, want: "tar entry"},
	}
}

func TestFSRoutes(t *testing.T) {
	for name, newFs := range backends(t) {
		t.Run(name, func(t *testing.T) {
			for _, tt := range fsRouteCases(t) {
				t.Run(tt.name, func(t *testing.T) {
					fsys, home := newFs(t)
					srv := fsServer(t, fsys, home, 0)
					c := tt.call
					c.target = strings.ReplaceAll(c.target, "HOME", home)
					want := strings.ReplaceAll(tt.want, "HOME", home)
					r := fsDo(t, srv, c)
					if r.status != tt.status {
						t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
					}
					if r.status >= 400 && r.header.Get("Content-Type") != "application/problem+json" {
						t.Fatalf("error content type %q", r.header.Get("Content-Type"))
					}
					if want != "" && !strings.Contains(string(r.body), want) {
						t.Fatalf("body %s\nlacks %s", r.body, want)
					}
					if tt.check != nil {
						tt.check(t, r, home)
					}
				})
			}
		})
	}
}

func TestFSUploadLimit(t *testing.T) {
	srv := fsServer(t, afero.NewMemMapFs(), "/home/u", 16)
	r := fsDo(t, srv, fsCall{method: "PUT", target: "/v1/fs/file?path=big", body: bytes.Repeat([]byte("x"), 17)})
	if r.status != 413 || !strings.Contains(string(r.body), `"details":{"limitBytes":16}`) ||
		!strings.Contains(string(r.body), `"type":"urn:sandbox-agent:error:payload_too_large"`) {
		t.Fatalf("declared length: %d %s", r.status, r.body)
	}
	// A chunked body (no Content-Length) is cut off while streaming.
	req, _ := http.NewRequest("PUT", srv.URL+"/v1/fs/file?path=big", io.MultiReader(strings.NewReader(strings.Repeat("y", 10)), strings.NewReader(strings.Repeat("y", 10))))
	req.ContentLength = -1
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || !strings.Contains(string(b), "limitBytes") {
		t.Fatalf("chunked: %d %s", resp.StatusCode, b)
	}
	r = fsDo(t, srv, fsCall{method: "GET", target: "/v1/fs/stat?path=big"})
	if r.status != 404 {
		t.Fatalf("a refused upload left a file: %d %s", r.status, r.body)
	}
	r = fsDo(t, srv, fsCall{method: "PUT", target: "/v1/fs/file?path=small", body: bytes.Repeat([]byte("x"), 16)})
	if r.status != 200 {
		t.Fatalf("at the limit: %d %s", r.status, r.body)
	}
	r = fsDo(t, srv, fsCall{method: "POST", target: "/v1/fs/upload-batch", body: tarOf(t, map[string]string{"a": "b"}),
		headers: map[string]string{"Content-Type": "application/x-tar"}})
	if r.status != 413 {
		t.Fatalf("upload-batch over the limit: %d %s", r.status, r.body)
	}
}

// brokenFs fails every open with an error that names a host path.
type brokenFs struct{ afero.Fs }

func (b brokenFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	return nil, &fs.PathError{Op: "open", Path: "/var/lib/hidden/" + name, Err: errors.New("input/output error")}
}

func (b brokenFs) Open(name string) (afero.File, error) { return b.OpenFile(name, os.O_RDONLY, 0) }

func TestFSStreamErrorHidesPaths(t *testing.T) {
	mem := afero.NewMemMapFs()
	srv := fsServer(t, mem, "/home/u", 0)
	srv.Config.Handler = New(Config{Files: &files.Files{Fs: brokenFs{mem}, Home: "/home/u"}})
	for _, c := range []fsCall{
		{method: "GET", target: "/v1/fs/file?path=a.txt"},
		{method: "GET", target: "/v1/fs/entries"},
		{method: "PUT", target: "/v1/fs/file?path=x", body: []byte("x")},
	} {
		r := fsDo(t, srv, c)
		if r.status != 502 {
			t.Fatalf("%s %s: %d %s", c.method, c.target, r.status, r.body)
		}
		m := r.json(t)
		details, _ := m["details"].(map[string]any)
		if m["type"] != "urn:sandbox-agent:error:stream_error" || m["detail"] != "stream error: input/output error" ||
			details["message"] != "input/output error" || strings.Contains(string(r.body), "/var/lib/hidden") {
			t.Fatalf("%s %s: %s", c.method, c.target, r.body)
		}
	}
}

func TestFSDocument(t *testing.T) {
	doc := OpenAPI("test")
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{
		"get_v1_fs_entries", "get_v1_fs_file", "put_v1_fs_file", "delete_v1_fs_entry", "post_v1_fs_mkdir",
		"post_v1_fs_move", "get_v1_fs_stat", "post_v1_fs_upload_batch",
		"get_v1_config_mcp", "put_v1_config_mcp", "delete_v1_config_mcp",
		"get_v1_config_skills", "put_v1_config_skills", "delete_v1_config_skills",
	} {
		if !bytes.Contains(b, []byte(`"operationId":"`+id+`"`)) {
			t.Errorf("operation %s missing from the document", id)
		}
	}
	put := doc.Paths["/v1/fs/file"].Put
	if put.RequestBody.Content["application/octet-stream"].Schema == nil {
		t.Error("PUT /v1/fs/file body undocumented")
	}
	for _, p := range doc.Paths["/v1/fs/file"].Get.Parameters {
		if p.Name == "path" && !p.Required {
			t.Error("path not marked required")
		}
	}
	if mcp := doc.Paths["/v1/config/mcp"].Put.RequestBody.Content["application/json"].Schema; mcp == nil || len(mcp.OneOf) != 2 {
		t.Error("MCP config schema missing")
	}
}

// TestRefusedBodyNotReadAsNextRequest: after a 413 that left most of a
// body unread, the next request on the client's connection is answered as
// itself (the connection is closed, not reused with the remainder in it).
func TestRefusedBodyNotReadAsNextRequest(t *testing.T) {
	srv := fsServer(t, afero.NewMemMapFs(), "/home/u", 0)
	big := []byte(`{"from":"` + strings.Repeat("a", 2<<20) + `","to":"b"}`)
	for range 2 {
		r := fsDo(t, srv, fsCall{method: "POST", target: "/v1/fs/move", body: big, headers: jsonCT})
		if r.status != 413 || !strings.Contains(string(r.body), `"limitBytes":1048576`) {
			t.Fatalf("move: %d %.200s", r.status, r.body)
		}
		if r := fsDo(t, srv, fsCall{method: "GET", target: "/v1/fs/stat?path=a.txt"}); r.status != 200 {
			t.Fatalf("next request: %d %s", r.status, r.body)
		}
	}
}

// A listing is held whole while it is answered (the entries, then their
// JSON: about 1.5 KiB an entry): it is charged to the in-flight budget
// until answered, so slow readers of a large directory wait (503) instead
// of each holding it: twenty clients that did not read the listing of
// 100 000 files held 1.2 GB.
func TestFSEntriesCharged(t *testing.T) {
	fsys := afero.NewMemMapFs()
	for i := range 1000 {
		if err := afero.WriteFile(fsys, fmt.Sprintf("/big/f%04d", i), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{Files: &files.Files{Fs: fsys, Home: "/"}, Config: &files.ConfigStore{Fs: fsys, Base: "/"}, InflightBytes: 1 << 20}
	cfg.fill()
	srv := httptest.NewServer(New(cfg))
	defer srv.Close()
	budget := cfg.env.Budget
	list := fsCall{method: "GET", target: "/v1/fs/entries?path=/big"}
	if !budget.Take(600 << 10) {
		t.Fatal("take")
	}
	if r := fsDo(t, srv, list); r.status != 503 || r.header.Get("Retry-After") == "" {
		t.Errorf("with the budget half spent: %d %v %.200s", r.status, r.header, r.body)
	}
	budget.Give(600 << 10)
	if r := fsDo(t, srv, list); r.status != 200 {
		t.Errorf("list: %d %.200s", r.status, r.body)
	}
	if u := budget.Used(); u != 0 {
		t.Errorf("%d bytes still charged after the answer", u)
	}
}

// A file is always a download: Content-Disposition attachment with its
// name (a hostile name encoded, never breaking the header), a sandboxing
// CSP and octet-stream, so an HTML or SVG file an agent wrote never opens
// as a page of the daemon's origin. The bytes are the file's, unchanged.
func TestFSFileIsADownload(t *testing.T) {
	fsys, home := afero.NewMemMapFs(), "/home/u"
	srv := fsServer(t, fsys, home, 0)
	const page = `<html><script>alert(document.domain)</script></html>`
	for _, tt := range []struct{ name, disposition string }{
		{"evil.html", `attachment; filename=evil.html`},
		{`a "quoted"; name.svg`, `attachment; filename="a \"quoted\"; name.svg"`},
		{"é.html", `attachment; filename*=utf-8''%C3%A9.html`},
		{"line\r\nX-Injected: 1.html", `attachment; filename*=utf-8''line%0D%0AX-Injected%3A%201.html`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := path.Join(home, tt.name)
			if err := afero.WriteFile(fsys, p, []byte(page), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, rng := range []string{"", "bytes=0-5"} {
				r := fsDo(t, srv, fsCall{method: "GET", target: "/v1/fs/file?path=" + url.QueryEscape(p), headers: map[string]string{"Range": rng}})
				want := page
				if rng != "" {
					want = page[:6]
				}
				if r.status/100 != 2 || string(r.body) != want {
					t.Fatalf("Range %q: %d %q", rng, r.status, r.body)
				}
				for k, v := range map[string]string{
					"Content-Type":            "application/octet-stream",
					"Content-Disposition":     tt.disposition,
					"Content-Security-Policy": "sandbox; default-src 'none'",
					"X-Content-Type-Options":  "nosniff",
					"X-Injected":              "",
				} {
					if got := r.header.Get(k); got != v {
						t.Errorf("Range %q: %s = %q, want %q", rng, k, got, v)
					}
				}
			}
		})
	}
	// A refused range is a problem, not a download.
	r := fsDo(t, srv, fsCall{method: "GET", target: "/v1/fs/file?path=a.txt", headers: map[string]string{"Range": "bytes=500-"}})
	if r.status != 416 || r.header.Get("Content-Disposition") != "" || r.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("416: %d %v", r.status, r.header)
	}
}
