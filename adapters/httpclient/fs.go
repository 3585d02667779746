package httpclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

func pathQuery(p string) url.Values { return url.Values{"path": {p}} }

// FSEntries is GET /v1/fs/entries: a directory listing (links not
// followed). Relative paths resolve against the daemon's home directory.
func (c *Client) FSEntries(ctx context.Context, dir string) ([]domain.FSEntry, error) {
	var out []domain.FSEntry
	err := c.Do(ctx, http.MethodGet, "/v1/fs/entries", pathQuery(dir), nil, &out)
	return out, err
}

// FSStat is GET /v1/fs/stat (links followed).
func (c *Client) FSStat(ctx context.Context, path string) (domain.FSStat, error) {
	var out domain.FSStat
	err := c.Do(ctx, http.MethodGet, "/v1/fs/stat", pathQuery(path), nil, &out)
	return out, err
}

// OpenFile is GET /v1/fs/file, streamed: the caller reads and closes the
// body. offset and length select a byte range (Range: bytes=...; the
// daemon answers 206); length < 0 reads to the end, so (0, -1) is the whole
// file. A range starting past the end is a *Problem with status 416.
func (c *Client) OpenFile(ctx context.Context, path string, offset, length int64) (io.ReadCloser, error) {
	if offset < 0 || length == 0 {
		return nil, fmt.Errorf("open file %q: invalid range offset %d length %d", path, offset, length)
	}
	h := http.Header{"Accept": {"application/octet-stream"}}
	ranged := offset > 0 || length > 0
	if ranged {
		r := "bytes=" + strconv.FormatInt(offset, 10) + "-"
		if length > 0 {
			r += strconv.FormatInt(offset+length-1, 10)
		}
		h.Set("Range", r)
	}
	resp, err := c.raw(ctx, http.MethodGet, "/v1/fs/file", pathQuery(path), nil, "", h)
	if err != nil {
		return nil, err
	}
	if ranged && resp.StatusCode != http.StatusPartialContent {
		resp.Body.Close()
		return nil, fmt.Errorf("open file %q: asked for a range, got status %d", path, resp.StatusCode)
	}
	return resp.Body, nil
}

// ReadFile reads a whole file into memory; for large files use OpenFile.
func (c *Client) ReadFile(ctx context.Context, path string) ([]byte, error) {
	body, err := c.OpenFile(ctx, path, 0, -1)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return io.ReadAll(body)
}

// WriteFile is PUT /v1/fs/file: r is streamed to the daemon, which writes
// it atomically (temporary file, then rename) and creates the parents.
// When ctx ends the call returns at once, even while a Read of r blocks
// (see UploadBatch).
func (c *Client) WriteFile(ctx context.Context, path string, r io.Reader) (domain.FSWrite, error) {
	var out domain.FSWrite
	body, stop := cancelableBody(ctx, r)
	defer stop()
	resp, err := c.raw(ctx, http.MethodPut, "/v1/fs/file", pathQuery(path), body, "application/octet-stream", http.Header{"Accept": {"application/json"}})
	if err != nil {
		return out, err
	}
	return out, decodeBody(resp, &out)
}

// DeleteFSEntry is DELETE /v1/fs/entry; a non-empty directory needs
// recursive. It returns the absolute path deleted.
func (c *Client) DeleteFSEntry(ctx context.Context, path string, recursive bool) (string, error) {
	q := pathQuery(path)
	q.Set("recursive", strconv.FormatBool(recursive))
	var out struct {
		Path string `json:"path"`
	}
	err := c.Do(ctx, http.MethodDelete, "/v1/fs/entry", q, nil, &out)
	return out.Path, err
}

// Mkdir is POST /v1/fs/mkdir (mkdir -p); it returns the absolute path.
func (c *Client) Mkdir(ctx context.Context, path string) (string, error) {
	var out struct {
		Path string `json:"path"`
	}
	err := c.Do(ctx, http.MethodPost, "/v1/fs/mkdir", pathQuery(path), nil, &out)
	return out.Path, err
}

// Move is POST /v1/fs/move; an existing destination is replaced only with
// overwrite. It returns the absolute paths.
func (c *Client) Move(ctx context.Context, from, to string, overwrite bool) (absFrom, absTo string, err error) {
	in := map[string]any{"from": from, "to": to}
	if overwrite {
		in["overwrite"] = true
	}
	var out struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
	err = c.Do(ctx, http.MethodPost, "/v1/fs/move", nil, in, &out)
	return out.From, out.To, err
}

// UploadBatch is POST /v1/fs/upload-batch: the plain tar archive read from
// tar is streamed to the daemon and extracted into dir (the home directory
// when empty). Entries that would leave dir are refused.
//
// When ctx ends the call returns at once with ctx's error, even while a
// Read of tar blocks (net/http alone would wait for that Read to return).
// tar is closed if it is an io.Closer, as net/http closes a request body,
// once the call is over or ctx ended (which ends a blocked Read of a
// pipe, a file or a connection); a Read of another reader still in
// progress is left to return on its own.
func (c *Client) UploadBatch(ctx context.Context, dir string, tar io.Reader) (domain.FSUpload, error) {
	var out domain.FSUpload
	var q url.Values
	if dir != "" {
		q = pathQuery(dir)
	}
	body, stop := cancelableBody(ctx, tar)
	defer stop()
	resp, err := c.raw(ctx, http.MethodPost, "/v1/fs/upload-batch", q, body, "application/x-tar", http.Header{"Accept": {"application/json"}})
	if err != nil {
		return out, err
	}
	return out, decodeBody(resp, &out)
}

// cancelableBody returns the body of a request made on ctx that streams r:
// it reads r on a goroutine of its own and ends with ctx's error as soon
// as ctx ends, even while a Read of r blocks, since net/http waits for
// the body's Read to return before the call returns. r is closed, if it
// is an io.Closer, once ctx ends or the call is over (stop), as net/http
// closes a request body: that also ends a blocked Read of a pipe, a file
// or a connection; a Read of any other reader is left to return on its
// own, and the goroutine with it. In-memory readers, which never block,
// are returned as they are (their length known).
func cancelableBody(ctx context.Context, r io.Reader) (body io.Reader, stop func()) {
	switch r.(type) {
	case nil, *bytes.Reader, *bytes.Buffer, *strings.Reader:
		return r, func() {}
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := io.Copy(pw, r)
		pw.CloseWithError(err) // nil: EOF
	}()
	var once sync.Once
	abandon := func(err error) {
		once.Do(func() {
			pr.CloseWithError(err)
			if c, ok := r.(io.Closer); ok {
				_ = c.Close()
			}
		})
	}
	after := context.AfterFunc(ctx, func() { abandon(ctx.Err()) })
	return pr, func() {
		after()
		// Whatever of r was not sent is not wanted (the daemon answered
		// first); the copy ends at its next write.
		abandon(errors.New("request over"))
	}
}
