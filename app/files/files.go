package files

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// Files is the filesystem use case behind /v1/fs/* (docs/api.md section 6).
//
// Paths from clients are resolved by domain.ResolveFSPath against Home and
// then handed to Fs, which decides what they can reach: the host (the
// reference's behaviour), a directory confined with os.Root (--fs-root,
// where Home is that directory), or memory. Bodies are streamed in both
// directions; whole files are written to a temporary file next to the
// target and renamed into place, so readers never see half a file.
//
// Files is safe for concurrent use; concurrent writers of one path race as
// renames do: the last one wins, and each result is a whole file.
type Files struct {
	Fs   afero.Fs
	Home string
	// Root, when set, is the directory Fs is confined to (--fs-root):
	// deleting it is refused, as deleting "/" is.
	Root string

	// Limits bound what writes may take from the disk (--max-extract,
	// --min-free). MaxUpload, when positive, also bounds what one
	// upload-batch expands to, so --max-upload means the same for PUT and
	// upload-batch.
	Limits
	MaxUpload int64

	// Secrets, when set, recognises the daemon's own secrets among the
	// paths of Fs (the host backends): every operation refuses them with
	// 403 permission_denied, and a listing leaves them out (secrets.go).
	Secrets ports.Secrets
}

// Resolve turns a client path into the absolute path used on Fs.
func (f *Files) Resolve(p string) (string, error) {
	abs, err := domain.ResolveFSPath(f.Home, p)
	if err != nil {
		return "", domain.InvalidRequest("%s", err.Error())
	}
	return abs, nil
}

// SortedUpTo is the size up to which a listing is in name order. A larger
// directory is answered in the order the filesystem gives, which is what
// the reference always answers, batch by batch as it is read: sorting
// would hold every entry of a directory of any size at once (a directory
// of 300 000 long names held 800 MB), and a listing holds at most this
// many.
const SortedUpTo = 10000

// Listing is a directory being listed (OpenListing): Next gives its
// entries in batches, without following links (docs/api.md: lstat).
// Entries that are the daemon's secrets are left out.
type Listing struct {
	f      *Files
	ctx    context.Context
	target string
	dir    afero.File
	first  []domain.FSEntry // read by OpenListing, given by the first Next
	done   bool
	// Sorted is true when the whole directory fit in SortedUpTo entries
	// and the entries come in name order.
	Sorted bool
}

// OpenListing opens the directory p and reads up to SortedUpTo entries:
// every error of the path itself (missing, not a directory, a secret,
// unreadable) comes here, before any entry was given, so that a handler
// can still answer it with its status. charge, when set, is called with
// the number of entries read before the first Next (all that a listing
// holds at once); its error ends the listing. Close must be called.
func (f *Files) OpenListing(ctx context.Context, p string, charge func(entries int) error) (*Listing, error) {
	target, err := f.Resolve(p)
	if err != nil {
		return nil, err
	}
	if err := guardPath(f.Secrets, target, target, true); err != nil {
		return nil, err
	}
	fi, err := f.Fs.Stat(target)
	if err != nil {
		return nil, fsError(target, err)
	}
	if !fi.IsDir() {
		return nil, domain.InvalidRequest("path is not a directory: %s", target)
	}
	dir, err := f.Fs.Open(target)
	if err != nil {
		return nil, fsError(target, err)
	}
	l := &Listing{f: f, ctx: ctx, target: target, dir: dir}
	for len(l.first) <= SortedUpTo && !l.done {
		// In batches, each charged as it is read.
		batch, err := l.read(min(listBatch, SortedUpTo+1-len(l.first)), charge)
		if err != nil {
			dir.Close()
			return nil, err
		}
		l.first = append(l.first, batch...)
	}
	if l.done && len(l.first) <= SortedUpTo {
		l.Sorted = true
		sort.Slice(l.first, func(i, j int) bool { return l.first[i].Name < l.first[j].Name })
	}
	if l.first == nil {
		l.first = []domain.FSEntry{}
	}
	return l, nil
}

// read reads up to n entries, charged; done is set at the directory's end.
func (l *Listing) read(n int, charge func(entries int) error) ([]domain.FSEntry, error) {
	infos, err := l.dir.Readdir(n)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fsError(l.target, err)
	}
	if err != nil || len(infos) == 0 {
		l.done = true
	}
	if charge != nil && len(infos) > 0 {
		if err := charge(len(infos)); err != nil {
			return nil, err
		}
	}
	if l.f.Secrets != nil {
		infos = l.f.Secrets.Hide(l.target, infos)
	}
	out := make([]domain.FSEntry, 0, len(infos))
	for _, fi := range infos {
		out = append(out, domain.FSEntry{
			Name:      fi.Name(),
			Path:      path.Join(l.target, fi.Name()),
			EntryType: entryType(fi),
			Size:      fi.Size(),
			Modified:  modified(fi),
			Symlink:   isLink(fi),
		})
	}
	return out, l.ctx.Err()
}

// Next returns the next entries, and io.EOF once they were all given. A
// batch may be empty (every entry of it was a secret).
func (l *Listing) Next() ([]domain.FSEntry, error) {
	if l.first != nil {
		first := l.first
		l.first = nil
		return first, nil
	}
	if l.done {
		return nil, io.EOF
	}
	return l.read(listBatch, nil)
}

// Close closes the directory.
func (l *Listing) Close() error { return l.dir.Close() }

// Entries lists a directory whole (OpenListing, then every batch): for
// callers that need it all at once, which a directory larger than
// SortedUpTo makes as large as it is.
func (f *Files) Entries(ctx context.Context, p string, charge func(entries int) error) ([]domain.FSEntry, error) {
	l, err := f.OpenListing(ctx, p, charge)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	var out []domain.FSEntry
	for {
		batch, err := l.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = []domain.FSEntry{}
		}
		out = append(out, batch...)
	}
}

// listBatch is how many entries a listing reads at a time.
const listBatch = 1024

// Stat describes a path, following links.
func (f *Files) Stat(ctx context.Context, p string) (domain.FSStat, error) {
	target, err := f.Resolve(p)
	if err != nil {
		return domain.FSStat{}, err
	}
	if err := guardPath(f.Secrets, target, target, true); err != nil {
		return domain.FSStat{}, err
	}
	fi, err := f.Fs.Stat(target)
	if err != nil {
		return domain.FSStat{}, fsError(target, err)
	}
	if err := guardInfo(f.Secrets, target, fi); err != nil {
		return domain.FSStat{}, err
	}
	return domain.FSStat{Path: target, EntryType: entryType(fi), Size: fi.Size(), Modified: modified(fi)}, nil
}

// Open opens a regular file for reading. The caller closes the file; it
// supports Seek, so ranges can be served from it.
func (f *Files) Open(ctx context.Context, p string) (afero.File, fs.FileInfo, error) {
	target, err := f.Resolve(p)
	if err != nil {
		return nil, nil, err
	}
	if err := guardPath(f.Secrets, target, target, true); err != nil {
		return nil, nil, err
	}
	// Opened without blocking, so a FIFO or device (even one swapped in
	// after a check) is refused instead of hanging the request.
	file, err := openRegular(f.Fs, target)
	if err != nil {
		return nil, nil, fsError(target, err)
	}
	if err := guardFile(f.Secrets, target, file); err != nil {
		return nil, nil, err
	}
	fi, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, nil, fsError(target, err)
	}
	return file, fi, nil
}

// Write stores body as the file at p, creating parent directories. The
// bytes go to a temporary file in the target's directory that is renamed
// over the target once complete; a failed or aborted upload leaves the old
// file as it was. A link at p is followed, so the file it names is replaced
// and the link kept; only a regular file is replaced (a FIFO, socket or
// device at p is 400). Errors from body are returned unchanged when they are
// domain errors (the HTTP adapter's size limit), else as invalid_request.
// size is the body's declared length (-1 unknown): a body that would leave
// less than MinFree free is refused before a byte is written, and the free
// space is checked again as it arrives.
func (f *Files) Write(ctx context.Context, p string, body io.Reader, size int64) (domain.FSWrite, error) {
	target, err := f.Resolve(p)
	if err != nil {
		return domain.FSWrite{}, err
	}
	// Judged as named (the kernel's resolution, /proc/self and /dev/fd
	// included) and where followLinks lands, which reads links as text.
	if err := guardPath(f.Secrets, target, target, true); err != nil {
		return domain.FSWrite{}, err
	}
	real, err := f.followLinks(target)
	if err != nil {
		return domain.FSWrite{}, err
	}
	if err := guardPath(f.Secrets, target, real, true); err != nil {
		return domain.FSWrite{}, err
	}
	perm := fs.FileMode(0o644)
	if fi, err := f.Fs.Stat(real); err == nil {
		// Only a regular file is replaced: the rename would put a file
		// where a FIFO, a socket or a device (/dev/null) was.
		if !fi.Mode().IsRegular() {
			return domain.FSWrite{}, domain.InvalidRequest("path is not a file: %s", target)
		}
		perm = fi.Mode().Perm()
	}
	guard, err := newSpaceGuard(f.Space, f.MinFree, real)
	if err != nil {
		return domain.FSWrite{}, err
	}
	if size > 0 {
		if err := guard.reserve(size); err != nil {
			return domain.FSWrite{}, err
		}
	}
	if err := f.ensureDir(path.Dir(real), target); err != nil {
		return domain.FSWrite{}, err
	}
	n, err := f.writeAtomic(ctx, real, body, perm, guard)
	if err != nil {
		return domain.FSWrite{}, fsError(target, err)
	}
	return domain.FSWrite{Path: target, BytesWritten: n}, nil
}

// maxLinkHops bounds link following, as the kernel's ELOOP does.
const maxLinkHops = 40

// followLinks resolves symbolic links at the last element of p, so a write
// replaces the file a link names instead of the link. Backends without
// links return p.
func (f *Files) followLinks(p string) (string, error) {
	ls, ok := f.Fs.(afero.Symlinker)
	if !ok {
		return p, nil
	}
	asked := p
	for range maxLinkHops {
		fi, _, err := ls.LstatIfPossible(p)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		dest, err := ls.ReadlinkIfPossible(p)
		if err != nil {
			return "", fsError(asked, err)
		}
		if !path.IsAbs(dest) {
			dest = path.Join(path.Dir(p), dest)
		}
		p = path.Clean(dest)
	}
	return "", domain.InvalidRequest("too many levels of symbolic links: %s", asked)
}

// copyBufs holds the buffers of streamed copies; large buffers keep the
// number of write calls (and syscalls) low on multi-gigabyte files.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// readError marks a failure to read the upload, as opposed to a failure to
// store it.
type readError struct{ err error }

func (e *readError) Error() string { return "reading upload: " + e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// trackedReader remembers its source's first error, so extraction can tell
// a broken upload from a broken archive or disk.
type trackedReader struct {
	r   io.Reader
	err error
}

func (t *trackedReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF && t.err == nil {
		t.err = err
	}
	return n, err
}

// writerOnly hides io.ReaderFrom so io.CopyBuffer uses the pooled buffer.
type writerOnly struct{ io.Writer }

// writeAtomic streams r into a new temporary file next to dst and renames it
// over dst (ports.WriteAtomic), counting each byte against guard. A failure
// reading r is a readError.
func (f *Files) writeAtomic(ctx context.Context, dst string, r io.Reader, perm fs.FileMode, guard *spaceGuard) (int64, error) {
	var n int64
	err := ports.WriteAtomic(f.Fs, dst, ".sandbox-agent-upload-*", perm, func(w io.Writer) error {
		bp := copyBufs.Get().(*[]byte)
		defer copyBufs.Put(bp)
		src := &trackedReader{r: r}
		var err error
		n, err = io.CopyBuffer(guard.writer(writerOnly{w}), src, *bp)
		if err != nil {
			if src.err != nil {
				return &readError{src.err}
			}
			return err
		}
		return ctx.Err()
	}, nil)
	return n, err
}

// Delete removes a file, a link (not its target) or a directory; a
// directory that is not empty needs recursive.
func (f *Files) Delete(ctx context.Context, p string, recursive bool) (string, error) {
	target, err := f.Resolve(p)
	if err != nil {
		return "", err
	}
	if target == "/" || (f.Root != "" && target == f.Root) {
		return "", domain.InvalidRequest("refusing to delete the filesystem root: %s", target)
	}
	if err := guardPath(f.Secrets, target, target, false); err != nil {
		return "", err
	}
	fi, err := f.lstat(target)
	if err != nil {
		return "", fsError(target, err)
	}
	if fi.IsDir() {
		if recursive {
			return target, fsError(target, f.Fs.RemoveAll(target))
		}
		empty, err := f.isEmptyDir(target)
		if err != nil {
			return "", fsError(target, err)
		}
		if !empty {
			return "", domain.InvalidRequest("directory is not empty: %s (set recursive=true)", target)
		}
	}
	return target, fsError(target, f.Fs.Remove(target))
}

func (f *Files) isEmptyDir(p string) (bool, error) {
	d, err := f.Fs.Open(p)
	if err != nil {
		return false, err
	}
	defer d.Close()
	names, err := d.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return len(names) == 0, err
}

// Mkdir creates a directory and its parents (mkdir -p).
func (f *Files) Mkdir(ctx context.Context, p string) (string, error) {
	target, err := f.Resolve(p)
	if err != nil {
		return "", err
	}
	if err := guardPath(f.Secrets, target, target, true); err != nil {
		return "", err
	}
	if fi, err := f.Fs.Stat(target); err == nil && !fi.IsDir() {
		return "", domain.InvalidRequest("path is not a directory: %s", target)
	}
	return target, f.ensureDir(target, target)
}

// ensureDir creates dir and its parents. A file where a directory should
// be is the client's mistake (400), whatever the backend reports (the host
// says ENOTDIR; the memory backend says nothing). Errors name shown, the
// path the client asked for: dir may be where a link led, which the client
// is not told.
func (f *Files) ensureDir(dir, shown string) error {
	err := f.Fs.MkdirAll(dir, 0o755)
	if err == nil {
		fi, serr := f.Fs.Stat(dir)
		if serr == nil && fi.IsDir() {
			return nil
		}
		err = serr
	}
	for p := dir; ; p = path.Dir(p) {
		if fi, serr := f.Fs.Stat(p); serr == nil {
			if !fi.IsDir() {
				return domain.InvalidRequest("a parent of %s is not a directory", shown)
			}
			break
		}
		if p == path.Dir(p) {
			break
		}
	}
	if err == nil {
		err = fs.ErrInvalid
	}
	return fsError(shown, err)
}

// Move renames from to to, creating to's parents. An existing to is
// replaced only with overwrite, and never when it is a device, a FIFO or a
// socket; a move that fails leaves it as it was. Moves that would destroy their own source
// (onto itself, or over a directory holding it) are refused.
func (f *Files) Move(ctx context.Context, from, to string, overwrite bool) (string, string, error) {
	src, err := f.Resolve(from)
	if err != nil {
		return "", "", err
	}
	dst, err := f.Resolve(to)
	if err != nil {
		return "", "", err
	}
	if err := guardPath(f.Secrets, src, src, false); err != nil {
		return "", "", err
	}
	if err := guardPath(f.Secrets, dst, dst, false); err != nil {
		return "", "", err
	}
	srcInfo, err := f.lstat(src)
	if err != nil {
		return "", "", fsError(src, err)
	}
	if src == dst {
		return "", "", domain.InvalidRequest("source and destination are the same: %s", src)
	}
	if _, inside := domain.RootRelative(src, dst); inside {
		return "", "", domain.InvalidRequest("cannot move a directory into itself: %s", dst)
	}
	var aside string // where a replaced destination waits until the move is done
	if fi, err := f.lstat(dst); err == nil {
		if !overwrite {
			return "", "", domain.InvalidRequest("destination already exists: %s", dst)
		}
		if _, inside := domain.RootRelative(dst, src); inside {
			return "", "", domain.InvalidRequest("destination contains the source: %s", dst)
		}
		if t := fi.Mode().Type(); t&(fs.ModeDevice|fs.ModeNamedPipe|fs.ModeSocket|fs.ModeIrregular) != 0 {
			// As a PUT: a device or a FIFO is never replaced by a
			// file (a move over /dev/null as root breaks the box).
			return "", "", fsError(dst, domain.ErrNotRegular)
		}
		if fi.IsDir() || srcInfo.IsDir() {
			// A rename replaces a file by a file itself, atomically;
			// anything else needs the destination out of the way. It
			// is renamed aside in its own directory (the same
			// filesystem, so that cannot fail for being another one)
			// and removed only once the move is done: a move that
			// fails (another filesystem: "invalid cross-device link")
			// puts it back instead of having destroyed it.
			aside = path.Join(path.Dir(dst), "."+path.Base(dst)+".sandbox-agent-replaced-"+strconv.FormatInt(time.Now().UnixNano(), 36))
			if err := f.Fs.Rename(dst, aside); err != nil {
				return "", "", fsError(dst, err)
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", "", fsError(dst, err)
	}
	if err := f.ensureDir(path.Dir(dst), dst); err != nil {
		return "", "", err
	}
	if err := f.Fs.Rename(src, dst); err != nil {
		if aside != "" {
			_ = f.Fs.Rename(aside, dst)
		}
		return "", "", fsError(src, err)
	}
	if aside != "" {
		_ = f.Fs.RemoveAll(aside) // the move is done; what is left of the old one is not the client's concern
	}
	return src, dst, nil
}

// lstat is Lstat where the backend has it, else Stat.
func (f *Files) lstat(p string) (fs.FileInfo, error) {
	if l, ok := f.Fs.(afero.Lstater); ok {
		fi, _, err := l.LstatIfPossible(p)
		return fi, err
	}
	return f.Fs.Stat(p)
}

func entryType(fi fs.FileInfo) domain.FSEntryType {
	if fi.IsDir() {
		return domain.FSDirectory
	}
	return domain.FSFile
}

func modified(fi fs.FileInfo) string {
	if fi.ModTime().IsZero() {
		return ""
	}
	return domain.FormatFSTime(fi.ModTime())
}

// fsError maps a filesystem error on p to the kinds of docs/api.md section 6:
// missing → 404 not_found "path not found", outside a confined root → 400,
// not a regular file or a name too long → 400, a broken
// upload → 400, anything else → 502 stream_error whose message is only the
// innermost cause (e.g. "permission denied"), never a host path the client
// did not name. Domain errors pass through.
func fsError(p string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := domain.AsError(err); ok {
		return err
	}
	var re *readError
	switch {
	case errors.As(err, &re):
		if _, ok := domain.AsError(re.err); ok {
			return re.err
		}
		return domain.InvalidRequest("%s", re.Error()).Because(err)
	case errors.Is(err, domain.ErrOutsideRoot):
		return domain.InvalidRequest("path escapes the filesystem root: %s", p).Because(err)
	case errors.Is(err, fs.ErrNotExist):
		return domain.NotFound("path not found: " + p).Because(err)
	case errors.Is(err, domain.ErrNotRegular):
		return domain.InvalidRequest("path is not a file: %s", p).Because(err)
	case errors.Is(err, domain.ErrNameTooLong):
		return domain.InvalidRequest("name too long: %s", clip(p, 256)).Because(err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return domain.StreamError(innermost(err).Error()).Because(err)
}

// innermost unwraps err to its root cause (a syscall errno for host I/O).
func innermost(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// clip shortens s to n bytes for a message.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
