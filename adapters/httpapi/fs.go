package httpapi

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"path"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi/internal/route"
	"github.com/sandbox-agent-go/sandbox-agent/app/authz"
	"github.com/sandbox-agent-go/sandbox-agent/app/files"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// The filesystem routes of docs/api.md section 6. Bodies are streams: GET file
// is served with http.ServeContent (ranges, conditional requests) straight
// from the file, PUT file and upload-batch read the request body as it
// arrives. None of them goes through huma's body reading, which would
// buffer and cap it.

// Query fields are repeated rather than embedded: huma does not look into
// embedded structs of unexported types.
type fsPathInput struct {
	Path string `query:"path" doc:"File or directory path: absolute, or relative to the home directory (no '..')."`
}

type fsRawInput struct {
	route.RawRequest
	Path string `query:"path" doc:"File or directory path: absolute, or relative to the home directory (no '..')."`
}

type fsDeleteInput struct {
	Path      string `query:"path" doc:"File or directory path: absolute, or relative to the home directory (no '..')."`
	Recursive bool   `query:"recursive" doc:"Delete a directory and everything in it."`
}

type fsMoveInput struct {
	Body struct {
		_         struct{} `json:"-" additionalProperties:"true"`
		From      string   `json:"from" doc:"Path to move."`
		To        string   `json:"to" doc:"New path; its parents are created."`
		Overwrite *bool    `json:"overwrite,omitempty" doc:"Replace an existing destination."`
	}
}

// listingEntryCost is what one entry of a listing holds until it is
// answered (the entry, its JSON and the buffer it is written from),
// measured at about 1.5 KiB: charged to the in-flight budget, so slow
// readers of a large directory wait (503) instead of each holding it.
const listingEntryCost = 1536

// writeEntries writes a listing as one JSON array, batch by batch as the
// directory is read, byte for byte what encoding it whole would give
// (huma's JSON: no HTML escaping, a final newline): a directory of any
// size is answered holding one batch.
func writeEntries(w io.Writer, l *files.Listing) error {
	bw := bufio.NewWriterSize(w, 32<<10)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	sep := byte('[')
	for {
		batch, err := l.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		for i := range batch {
			buf.Reset()
			if err := enc.Encode(&batch[i]); err != nil {
				return err
			}
			_ = bw.WriteByte(sep)
			sep = ','
			if _, err := bw.Write(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})); err != nil {
				return err
			}
		}
	}
	if sep == '[' {
		_ = bw.WriteByte('[')
	}
	_, _ = bw.WriteString("]\n")
	return bw.Flush()
}

// writerFunc is a function as an io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// entriesSchema is the schema of a listing's answer, the one huma derives
// for []domain.FSEntry (the handler streams the array itself).
func entriesSchema(api huma.API) *huma.Schema {
	return api.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[[]domain.FSEntry](), true, "")
}

type fsPathOutput struct {
	Body struct {
		Path string `json:"path"`
	}
}

type fsMoveOutput struct {
	Body struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
}

type fsStatOutput struct{ Body domain.FSStat }
type fsWriteOutput struct{ Body domain.FSWrite }
type fsUploadOutput struct{ Body domain.FSUpload }

var fsTags = []string{"fs"}

func registerFS(api huma.API, cfg *Config) {
	files := cfg.Files

	route.Register(api, huma.Operation{
		OperationID: "get_v1_fs_entries", Method: http.MethodGet, Path: "/v1/fs/entries",
		Summary:     "List a directory",
		Description: "Entries are not followed through symbolic links (lstat): a link keeps the reference's `entryType` (`file`) and adds `symlink: true`. `path` defaults to the home directory.",
		Tags:        fsTags, Security: route.Bearer,
		Responses: map[string]*huma.Response{
			"200": {Description: "OK", Content: map[string]*huma.MediaType{"application/json": {Schema: entriesSchema(api)}}},
		},
	}, route.OnPath(domain.ActionFSRead), func(ctx context.Context, in *fsPathInput) (*huma.StreamResponse, error) {
		l, err := files.OpenListing(ctx, cmp.Or(in.Path, "."), func(n int) error {
			return route.Hold(ctx, listingEntryCost*int64(n))
		})
		if err != nil {
			return nil, err
		}
		return &huma.StreamResponse{Body: func(hctx huma.Context) {
			defer l.Close()
			_, w := route.Unwrap(hctx)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			// A reader that takes nothing for the stream write timeout
			// is dropped, as an event stream's is: the listing holds its
			// directory and its charge until it is written.
			rc := http.NewResponseController(w)
			defer route.ClearDeadline(rc)
			timeout := cfg.env.StreamWriteTimeout
			out := writerFunc(func(p []byte) (int, error) {
				if timeout > 0 {
					_ = rc.SetWriteDeadline(time.Now().Add(timeout))
				}
				return w.Write(p)
			})
			if err := writeEntries(out, l); err != nil {
				// The status is sent: a listing cut short ends the
				// connection, so the client sees a broken answer, never
				// a shorter list that parses.
				route.Logger(ctx).Warn("listing cut short", "path", in.Path, "err", err)
				panic(http.ErrAbortHandler)
			}
		}}, nil
	})

	route.Register(api, huma.Operation{
		OperationID: "get_v1_fs_file", Method: http.MethodGet, Path: "/v1/fs/file",
		Summary:     "Read a file",
		Description: "Streams the file as application/octet-stream, always as a download (`Content-Disposition: attachment` with the file's name, `Content-Security-Policy: sandbox`), so a browser never opens an HTML or SVG file as a page of the daemon. Supports `Range` (206; 416 when no range overlaps the file; an invalid `Range` is ignored: 200, the whole file) and conditional requests. A missing path is 404 `not_found`; a FIFO, socket or device is 400.",
		Tags:        fsTags, Security: route.Bearer,
		Responses: map[string]*huma.Response{
			"200": {Description: "The file's bytes.", Content: map[string]*huma.MediaType{"application/octet-stream": {Schema: binarySchema}}},
			"206": {Description: "The requested range.", Content: map[string]*huma.MediaType{"application/octet-stream": {Schema: binarySchema}}},
		},
	}, route.OnPath(domain.ActionFSRead), func(ctx context.Context, in *fsRawInput) (*huma.StreamResponse, error) {
		if err := requirePath(in.Path); err != nil {
			return nil, err
		}
		file, fi, err := files.Open(ctx, in.Path)
		if err != nil {
			return nil, err
		}
		return &huma.StreamResponse{Body: func(hctx huma.Context) {
			defer file.Close()
			r, w := route.Unwrap(hctx)
			if fi.Size() == 0 && !seekable(file) {
				// A /proc file: size 0, no seeking to its end, which
				// ServeContent needs (it answered a text/plain 500).
				// Streamed whole, without ranges, as a read gives it.
				download(w.Header(), in.Path)
				w.Header().Set("Last-Modified", fi.ModTime().UTC().Format(http.TimeFormat))
				w.WriteHeader(http.StatusOK)
				if r.Method != http.MethodHead {
					_, _ = io.Copy(w, file)
				}
				return
			}
			if rng := r.Header.Values("Range"); len(rng) > 0 {
				// Judged by RFC 9110 before ServeContent sees it
				// (ranges.go); two Range fields are not one valid value.
				if h, ok := canonicalRange(rng[0], fi.Size()); ok && len(rng) == 1 {
					r.Header.Set("Range", h)
				} else {
					r.Header.Del("Range")
				}
			}
			download(w.Header(), in.Path)
			http.ServeContent(&rangeProblems{ResponseWriter: w, ctx: r.Context()}, r, "", fi.ModTime(), file)
		}}, nil
	})

	route.Register(api, huma.Operation{
		OperationID: "put_v1_fs_file", Method: http.MethodPut, Path: "/v1/fs/file",
		Summary:     "Write a file",
		Description: "Streams the body to a temporary file next to the target and renames it into place; parents are created. Answers 413 past --max-upload, 507 when the write would leave less than --min-free on the filesystem (nothing is left behind).",
		Tags:        fsTags, Security: route.Bearer,
		RequestBody: route.RawBody("application/octet-stream"),
	}, route.OnPath(domain.ActionFSWrite), func(ctx context.Context, in *fsRawInput) (*fsWriteOutput, error) {
		if err := requirePath(in.Path); err != nil {
			return nil, err
		}
		body, err := route.LimitBody(in.Request(), cfg.MaxUpload)
		if err != nil {
			return nil, err
		}
		res, err := files.Write(ctx, in.Path, body, in.Request().ContentLength)
		if err != nil {
			return nil, err
		}
		return &fsWriteOutput{Body: res}, nil
	})
	route.DocumentBody(api, "/v1/fs/file", http.MethodPut, "application/octet-stream", binarySchema)

	route.Register(api, huma.Operation{
		OperationID: "delete_v1_fs_entry", Method: http.MethodDelete, Path: "/v1/fs/entry",
		Summary:     "Delete a file or directory",
		Description: "A symbolic link is removed, not its target. A directory that is not empty needs `recursive=true`.",
		Tags:        fsTags, Security: route.Bearer,
	}, route.OnPath(domain.ActionFSWrite), func(ctx context.Context, in *fsDeleteInput) (*fsPathOutput, error) {
		if err := requirePath(in.Path); err != nil {
			return nil, err
		}
		return pathOutput(files.Delete(ctx, in.Path, in.Recursive))
	})

	route.Register(api, huma.Operation{
		OperationID: "post_v1_fs_mkdir", Method: http.MethodPost, Path: "/v1/fs/mkdir",
		Summary: "Create a directory and its parents", Tags: fsTags, Security: route.Bearer,
	}, route.OnPath(domain.ActionFSWrite), func(ctx context.Context, in *fsPathInput) (*fsPathOutput, error) {
		if err := requirePath(in.Path); err != nil {
			return nil, err
		}
		return pathOutput(files.Mkdir(ctx, in.Path))
	})

	route.Register(api, huma.Operation{
		OperationID: "post_v1_fs_move", Method: http.MethodPost, Path: "/v1/fs/move",
		Summary:     "Move or rename a file or directory",
		Description: "An existing destination is replaced only with `overwrite: true`.",
		Tags:        fsTags, Security: route.Bearer,
		Metadata: map[string]any{route.MetaPeekBody: true},
	}, describeMove, func(ctx context.Context, in *fsMoveInput) (*fsMoveOutput, error) {
		from, to, err := files.Move(ctx, in.Body.From, in.Body.To, in.Body.Overwrite != nil && *in.Body.Overwrite)
		if err != nil {
			return nil, err
		}
		out := &fsMoveOutput{}
		out.Body.From, out.Body.To = from, to
		return out, nil
	})

	route.Register(api, huma.Operation{
		OperationID: "get_v1_fs_stat", Method: http.MethodGet, Path: "/v1/fs/stat",
		Summary: "Describe a path (following symbolic links)", Tags: fsTags, Security: route.Bearer,
	}, route.OnPath(domain.ActionFSRead), func(ctx context.Context, in *fsPathInput) (*fsStatOutput, error) {
		if err := requirePath(in.Path); err != nil {
			return nil, err
		}
		st, err := files.Stat(ctx, in.Path)
		if err != nil {
			return nil, err
		}
		return &fsStatOutput{Body: st}, nil
	})

	route.Register(api, huma.Operation{
		OperationID: "post_v1_fs_upload_batch", Method: http.MethodPost, Path: "/v1/fs/upload-batch",
		Summary:     "Extract a tar archive into a directory",
		Description: "The body is a plain tar (Content-Type application/x-tar), extracted as it arrives into a stage directory (`.sandbox-agent-stage-*`) and moved into `path` (default: the home directory) only when the whole archive is good: a refused archive leaves nothing. Entries leaving the directory, links leading out and sparse entries are refused (400). The extracted size (holes included) counts against --max-extract and --max-upload (413, `details.limitBytes`); 507 past --min-free. At most 1024 paths are listed; `truncated` says more were written.",
		Tags:        fsTags, Security: route.Bearer,
		RequestBody: route.RawBody("application/x-tar"),
	}, route.OnPath(domain.ActionFSWrite), func(ctx context.Context, in *fsRawInput) (*fsUploadOutput, error) {
		if !strings.HasPrefix(strings.ToLower(strings.TrimSpace(in.Request().Header.Get("Content-Type"))), "application/x-tar") {
			return nil, route.Invalid("content-type must be application/x-tar")
		}
		body, err := route.LimitBody(in.Request(), cfg.MaxUpload)
		if err != nil {
			return nil, err
		}
		res, err := files.Upload(ctx, in.Path, body)
		if err != nil {
			return nil, err
		}
		return &fsUploadOutput{Body: res}, nil
	})
	route.DocumentBody(api, "/v1/fs/upload-batch", http.MethodPost, "application/x-tar", binarySchema)

	requiredInDocument(api, "path",
		"/v1/fs/file", "/v1/fs/entry", "/v1/fs/mkdir", "/v1/fs/stat")
}

// describeMove reads the move's two paths from its JSON body, which the
// middleware has read (charged and checked, route.MetaPeekBody) before the
// chain. A body that is not JSON leaves the paths empty; the operation
// refuses it anyway.
func describeMove(hctx huma.Context, c *authz.Chain, r *domain.AuthRequest) {
	var from, to string
	if b := route.PeekedBody(hctx); b != nil {
		var v struct{ From, To string }
		if json.Unmarshal(b, &v) == nil {
			from, to = v.From, v.To
		}
	}
	c.FS(r, domain.ActionFSWrite, from, to)
	if from == "" {
		r.FSPath = ""
	}
}

// moveBodyLimit is huma's default body limit, which the move route keeps.
const moveBodyLimit = 1 << 20

var binarySchema = &huma.Schema{Type: "string", Format: "binary"}

// seekable reports whether f can seek to its end (and puts it back at its
// start); files of /proc cannot.
func seekable(f io.Seeker) bool {
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return false
	}
	_, err := f.Seek(0, io.SeekStart)
	return err == nil
}

// requirePath answers a missing path with 400, as for any malformed query;
// huma's own check would answer 422.
func requirePath(p string) error {
	if p == "" {
		return route.Invalid("missing required 'path' query parameter")
	}
	return nil
}

// requiredInDocument marks a query parameter required in the document of
// every operation on the given paths. The handlers check it themselves, so
// a missing value gets the contract's 400.
func requiredInDocument(api huma.API, name string, paths ...string) {
	for _, p := range paths {
		item := api.OpenAPI().Paths[p]
		if item == nil {
			continue
		}
		for _, op := range []*huma.Operation{item.Get, item.Put, item.Post, item.Delete} {
			if op == nil {
				continue
			}
			for _, param := range op.Parameters {
				if param.Name == name && param.In == "query" {
					param.Required = true
				}
			}
		}
	}
}

// downloadCSP keeps a file's bytes inert if a browser ever shows them as a
// document: no script, no plug-in, no subresource, a unique origin.
const downloadCSP = "sandbox; default-src 'none'"

// download sets the headers of a file's bytes sent to whoever asked: any
// file, an HTML or SVG one an agent wrote included, is a download named
// for the file (Content-Disposition: attachment), never a page on the
// daemon's origin holding the inspector's token; with the daemon-wide
// nosniff, a <script> pointing at it is refused too. The body itself is
// the file's bytes unchanged, as the SDKs read it.
func download(h http.Header, p string) {
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Security-Policy", downloadCSP)
	cd := "attachment"
	if name := path.Base(strings.TrimRight(p, "/")); name != "." && name != "/" && name != "" {
		if v := mime.FormatMediaType("attachment", map[string]string{"filename": name}); v != "" {
			cd = v
		}
	}
	h.Set("Content-Disposition", cd)
}

// rangeProblems turns the 416 that http.ServeContent writes as text/plain
// into a problem, keeping its Content-Range header.
type rangeProblems struct {
	http.ResponseWriter
	ctx     context.Context
	swallow bool
}

func (w *rangeProblems) WriteHeader(code int) {
	if code != http.StatusRequestedRangeNotSatisfiable {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.swallow = true
	h := w.Header()
	h.Del("Content-Disposition")
	h.Del("Content-Security-Policy")
	p := route.ProblemFor(w.ctx, route.WithStatus(code, domain.InvalidRequest("requested range not satisfiable")))
	body := p.Body()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.ResponseWriter.WriteHeader(code)
	_, _ = w.ResponseWriter.Write(body)
}

func (w *rangeProblems) Write(b []byte) (int, error) {
	if w.swallow {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// ReadFrom keeps the sendfile path of the underlying writer.
func (w *rangeProblems) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok && !w.swallow {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{w}, r)
}

func (w *rangeProblems) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// pathOutput answers {"path": p}, the shape of delete and mkdir.
func pathOutput(p string, err error) (*fsPathOutput, error) {
	if err != nil {
		return nil, err
	}
	out := &fsPathOutput{}
	out.Body.Path = p
	return out, nil
}
