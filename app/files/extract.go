package files

import (
	"archive/tar"
	"archive/zip"
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// This file is the daemon's one archive extractor: upload-batch (plain tar)
// and agent installs (tar, tar.gz, zip) both go through extract. Its rules:
//
//   - it writes only through a confined view of its directory
//     (ports.Confiner: an os.Root on the host), so whatever its own checks
//     miss, the kernel-level walk of os.Root refuses to leave the directory;
//   - entry names are clean relative paths (no "..", no leading "/", no NUL,
//     no element over 255 bytes); an entry whose way passes through a
//     symbolic link is refused, so nothing is written through a link;
//   - symbolic links are relative and lexically inside; once the archive is
//     complete every link is walked again against the disk, so a chain of
//     individually harmless links (d1/d2/up -> .., l -> d1/d2/up/../..)
//     is refused too;
//   - bytes are counted by logical size, holes included, against a limit,
//     before they are written (413 with details.limitBytes); sparse entries
//     are refused, so a small archive never turns into a large file;
//   - hard links are made as hard links where the view can (os.Root),
//     else stored as copies and counted again, so they cannot amplify;
//   - free space is checked before each file and while writing (507).
//
// Work is proportional to the archive, whatever its depth: entries are
// reached through a chain of handles on the directories already checked
// (extract_chain.go), not by walking each path from the top; and the
// depth itself is capped (--max-extract-depth). extract checks its context
// between entries, inside long copies and between link checks, so a client
// that leaves stops it.
//
// extract never removes what it wrote: callers extract into a fresh
// directory (a stage) and remove it on any error.

// The most entries and links one archive may hold: each costs an inode and
// a little memory while extracting (links are checked again at the end),
// so a stream of empty headers cannot exhaust either. Variables so tests
// can lower them.
var (
	maxEntries = 1 << 20
	maxLinks   = 1 << 16
)

// extraction is the state of one extract call.
type extraction struct {
	view     afero.Fs // the confined directory; names are relative to it
	limit    int64    // logical bytes the archive may expand to
	maxDepth int      // path elements an entry may have; 0: DefaultMaxDepth
	used     int64
	guard    *spaceGuard // nil: no free-space check
	ctx      context.Context
	skipSym  bool   // backends without links get no links (installs), instead of an error
	format   string // "tar" (the default) or "zip", for messages

	// target, when set, is a confined view of where the extracted tree
	// will be merged: it is consulted so that an entry conflicting with
	// what is already there (a directory where a file goes, a link on the
	// way) is refused before anything is moved.
	target afero.Fs
	// guardTarget, when set, judges each entry found in the target
	// (dirChain.guard).
	guardTarget func(rel string, fi fs.FileInfo) error

	chain *dirChain // the way to the current entry's directory, on view and target

	// base, when set, is where the entries finally land; their full paths
	// there must be valid names too (checked up front, not at the move).
	base string
	// reserved, when set, is a name prefix no top-level entry may have
	// (the stage lives in the target under such a name).
	reserved string

	record  func(rel string)
	entries int
	links   []createdLink
	created map[string]bool // links made by this extraction, by rel
}

type createdLink struct {
	name, rel, target string
}

// entryKind is what an archive entry stores.
type entryKind int

const (
	entrySkip entryKind = iota // devices, FIFOs, global headers
	entryDir
	entryFile
	entrySymlink
	entryHardlink
)

// archiveEntry is one member of a tar or zip archive.
type archiveEntry struct {
	name   string
	kind   entryKind
	mode   fs.FileMode
	size   int64 // logical size: what the file takes once written
	link   string
	mtime  time.Time
	sparse bool
	body   io.Reader
}

// archiveReader yields entries; io.EOF ends the archive. An error that is
// not the archive's fault (the upload broke) comes back as a readError.
type archiveReader func() (archiveEntry, error)

// entryErr is a client error about one entry ("tar entry", "zip entry").
func (x *extraction) entryErr(name, format string, args ...any) error {
	return domain.InvalidRequest("%s entry %q: "+format, append([]any{x.formatName(), name}, args...)...)
}

func (x *extraction) formatName() string {
	if x.format == "" {
		return "tar"
	}
	return x.format
}

// extract reads every entry of next into x.view.
func (x *extraction) extract(next archiveReader) error {
	if x.created == nil {
		x.created = map[string]bool{}
	}
	x.maxDepth = cmp.Or(max(x.maxDepth, 0), DefaultMaxDepth)
	x.chain = newChain(x.view, x.target, x.guardTarget)
	defer x.chain.close()
	for {
		if err := x.ctx.Err(); err != nil {
			return err
		}
		e, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if x.entries++; x.entries > maxEntries {
			return domain.InvalidRequest("the archive has more than %d entries", maxEntries)
		}
		if err := x.entry(e); err != nil {
			return err
		}
	}
	return x.checkLinks()
}

func lstatOn(fsys afero.Fs, p string) (fs.FileInfo, error) {
	if l, ok := fsys.(afero.Lstater); ok {
		fi, _, err := l.LstatIfPossible(p)
		return fi, err
	}
	return fsys.Stat(p)
}

func isLink(fi fs.FileInfo) bool { return fi != nil && fi.Mode()&fs.ModeSymlink != 0 }

func (x *extraction) entry(e archiveEntry) error {
	rel, err := domain.TarEntryPath(e.name)
	if err != nil {
		return x.entryErr(e.name, "%v", err)
	}
	if rel == "" || e.kind == entrySkip {
		return nil // "./" is the directory itself; specials are not stored
	}
	if first, _, _ := strings.Cut(rel, "/"); x.reserved != "" && strings.HasPrefix(first, x.reserved) {
		return x.entryErr(e.name, "names starting with %q are reserved", x.reserved)
	}
	if depth := strings.Count(rel, "/") + 1; depth > x.maxDepth {
		return x.entryErr(e.name, "%d path elements deep, past the limit of %d", depth, x.maxDepth)
	}
	if x.base != "" {
		if err := domain.CheckPathLength(path.Join(x.base, rel)); err != nil {
			return x.entryErr(e.name, "%v", err)
		}
	}
	if e.kind == entrySymlink && x.skipSym {
		if _, ok := x.view.(afero.Linker); !ok {
			return nil
		}
	}

	// A hard link's source is checked first: the chain then moves on to
	// the entry's own directory.
	var src fs.FileInfo
	var srcRel string
	if e.kind == entryHardlink {
		if srcRel, err = domain.TarEntryPath(e.link); err != nil || srcRel == "" {
			return x.entryErr(e.name, "invalid hard link target %q", e.link)
		}
		srcDir, srcBase := splitRel(srcRel)
		err := x.chain.to(srcDir, false)
		if err == nil {
			src, err = x.chain.lookup(srcBase, onStage)
		}
		if r, ok := errors.AsType[parentRefusal](err); ok {
			return x.entryErr(e.name, "%v", r)
		}
		if err != nil || !src.Mode().IsRegular() {
			return x.entryErr(e.name, "hard link target %q is not a regular file of the archive", e.link)
		}
	}

	dir, base := splitRel(rel)
	if err := x.chain.to(dir, true); err != nil {
		if r, ok := errors.AsType[parentRefusal](err); ok {
			return x.entryErr(e.name, "%v", r)
		}
		return fsError(e.name, err)
	}
	h, _, err := x.chain.top(onStage)
	if err != nil {
		return fsError(e.name, err)
	}
	existing, err := h.lstat(base)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fsError(e.name, err)
	}
	if err := x.checkTarget(e, base); err != nil {
		return err
	}

	switch e.kind {
	case entryDir:
		if exists && !isLink(existing) && !existing.IsDir() {
			return x.entryErr(e.name, "a file of that name exists")
		}
		if isLink(existing) {
			if err := h.fs.Remove(h.path(base)); err != nil {
				return fsError(e.name, err)
			}
			delete(x.created, rel)
			exists = false
		}
		if !exists {
			if err := h.fs.Mkdir(h.path(base), e.mode.Perm()|0o700); err != nil {
				return fsError(e.name, err)
			}
		}

	case entryFile:
		if e.size < 0 {
			return x.entryErr(e.name, "negative size")
		}
		if err := x.charge(e.name, e.size); err != nil {
			return err
		}
		if e.sparse {
			return x.entryErr(e.name, "sparse files are not supported (create the archive without --sparse)")
		}
		if err := x.replaceable(e.name, rel, h, base, existing, exists); err != nil {
			return err
		}
		if err := x.writeFile(e.name, h, base, io.LimitReader(e.body, e.size), e.size, filePerm(e.mode)); err != nil {
			return err
		}
		if !e.mtime.IsZero() {
			_ = h.fs.Chtimes(h.path(base), e.mtime, e.mtime)
		}

	case entrySymlink:
		if err := domain.TarSymlinkTarget(rel, e.link); err != nil {
			return x.entryErr(e.name, "%v", err)
		}
		linker, ok := h.fs.(afero.Linker)
		if !ok {
			if x.skipSym {
				return nil
			}
			return x.entryErr(e.name, "symbolic links are not supported by this filesystem")
		}
		if len(x.links) >= maxLinks {
			return x.entryErr(e.name, "the archive has more than %d symbolic links", maxLinks)
		}
		if err := x.replaceable(e.name, rel, h, base, existing, exists); err != nil {
			return err
		}
		if err := linker.SymlinkIfPossible(e.link, h.path(base)); err != nil {
			if errors.Is(err, afero.ErrNoSymlink) {
				if x.skipSym {
					return nil
				}
				return x.entryErr(e.name, "symbolic links are not supported by this filesystem")
			}
			return fsError(e.name, err)
		}
		x.created[rel] = true
		x.links = append(x.links, createdLink{name: e.name, rel: rel, target: e.link})

	case entryHardlink:
		if err := x.replaceable(e.name, rel, h, base, existing, exists); err != nil {
			return err
		}
		// Both names from the top of the view: a walk of each path, once
		// per hard link (the kernel, or os.Root, keeps both inside).
		if hl, ok := x.view.(ports.HardLinker); ok {
			if err := hl.LinkIfPossible(srcRel, rel); err == nil {
				break // the same file: no space taken again
			}
		}
		// A copy (memory, or a filesystem without hard links): it takes
		// the space again, so it is counted again.
		if err := x.charge(e.name, src.Size()); err != nil {
			return err
		}
		in, err := openRegular(x.view, srcRel)
		if err != nil {
			return fsError(e.name, err)
		}
		err = x.writeFile(e.name, h, base, io.LimitReader(in, src.Size()), src.Size(), src.Mode().Perm())
		in.Close()
		if err != nil {
			return err
		}
	}
	if x.record != nil {
		x.record(rel)
	}
	return nil
}

// splitRel splits a clean relative path into its directory ("" at the
// top) and last element.
func splitRel(rel string) (dir, base string) {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return "", rel
	}
	return rel[:i], rel[i+1:]
}

// charge counts n logical bytes against the limit, before they are written.
func (x *extraction) charge(name string, n int64) error {
	if n > x.limit-x.used {
		return domain.TooLarge(x.limit, "tar entry %q: the archive expands to more than %d bytes", name, x.limit)
	}
	x.used += n
	return nil
}

// writeFile writes exactly size bytes from r to base in the directory h.
func (x *extraction) writeFile(name string, h dirHandle, base string, r io.Reader, size int64, perm fs.FileMode) error {
	if err := x.guard.reserve(size); err != nil {
		return err
	}
	f, err := h.fs.Create(h.path(base))
	if err != nil {
		return fsError(name, err)
	}
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	var w io.Writer = ctxWriter{x.ctx, f}
	if x.guard != nil {
		w = x.guard.writer(w)
	}
	src := &trackedReader{r: r}
	n, err := io.CopyBuffer(w, src, *bp)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if src.err != nil {
		// The archive (or the upload under it) broke; Upload tells an
		// upload's failure apart by its own tracked reader.
		return domain.InvalidRequest("invalid %s archive: %v", x.formatName(), src.err)
	}
	if err == nil && n != size {
		err = x.entryErr(name, "archive ends inside the entry (%d of %d bytes)", n, size)
	}
	if err != nil {
		if _, ok := domain.AsError(err); ok {
			return err
		}
		return fsError(name, err) // a context's error passes as it is
	}
	return h.fs.Chmod(h.path(base), perm)
}

// ctxWriter stops a copy once its context is done: a large entry is
// abandoned within one buffer of the client leaving. It hides
// io.ReaderFrom, so io.CopyBuffer uses the pooled buffer.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// replaceable clears the way for a file or link at base in h: an old link
// or file is removed (links are never written through); a directory stays
// and is an error.
func (x *extraction) replaceable(name, rel string, h dirHandle, base string, existing fs.FileInfo, exists bool) error {
	if !exists {
		return nil
	}
	if !isLink(existing) && existing.IsDir() {
		return x.entryErr(name, "a directory of that name exists")
	}
	if err := h.fs.Remove(h.path(base)); err != nil {
		return fsError(name, err)
	}
	delete(x.created, rel)
	return nil
}

// checkTarget refuses an entry that could not be merged into the target:
// a file or link where a directory is, a directory where a file is,
// anything where a FIFO, socket or device is. The
// chain is at the entry's directory.
func (x *extraction) checkTarget(e archiveEntry, base string) error {
	fi, err := x.chain.lookup(base, onTarget)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fsError(e.name, err)
	}
	switch {
	case e.kind == entryDir && !fi.IsDir() && !isLink(fi):
		return x.entryErr(e.name, "a file of that name exists")
	case e.kind != entryDir && fi.IsDir() && !isLink(fi):
		return x.entryErr(e.name, "a directory of that name exists")
	case fi.Mode().Type()&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice|fs.ModeIrregular) != 0:
		// Never put a file where a FIFO or a device (/dev/null) was,
		// as a PUT does not.
		return x.entryErr(e.name, "a FIFO, socket or device of that name exists")
	}
	return nil
}

// checkLinks verifies every link made, against the disk as extracted: a
// lexical check cannot see that ".." after a link goes to the parent of the
// link's target, nor where a link already in the target points. Each
// link's target is walked from the link's directory (linkStaysInside);
// the context is checked between links, as there may be many.
func (x *extraction) checkLinks() error {
	for _, l := range x.links {
		if err := x.ctx.Err(); err != nil {
			return err
		}
		if !x.created[l.rel] {
			continue // replaced by a later entry
		}
		ok, err := x.linkStaysInside(l)
		if err != nil {
			return fsError(l.name, err)
		}
		if !ok {
			return x.entryErr(l.name, "link target leaves the destination")
		}
	}
	return nil
}

// linkStaysInside walks l's target from the link's directory, on the
// stage and, where the stage has nothing, on the target. While every
// element so far is a real directory, ".." goes up one and a name is
// looked up: a real directory goes on the walk, a link met there must be
// one this extraction made (links that were there before could point
// anywhere), and it, a file or a missing name ends what is looked at.
// After such an element the rest is names only: a ".." there is refused,
// since it would climb from wherever that element leads. So the walk
// leaves only real directories it has seen, never goes above the top,
// and each link it passes through is checked on its own: every link's
// target stays inside, and none is followed here. One lookup per element
// of the target, through the chain (at most 4095 bytes a target: the
// host's symlink(2) refuses longer ones).
func (x *extraction) linkStaysInside(l createdLink) (bool, error) {
	dir, _ := splitRel(l.rel)
	if err := x.chain.to(dir, false); err != nil {
		// The link's own directory was checked when the entry was made;
		// refused now, something changed it since.
		if _, ok := errors.AsType[parentRefusal](err); ok {
			return false, nil
		}
		return false, err
	}
	through := false // past an element that is not a real directory
	for part := range strings.SplitSeq(l.target, "/") {
		switch {
		case part == "" || part == ".":
			continue
		case part == "..":
			if through || len(x.chain.levels) == 0 {
				return false, nil
			}
			x.chain.truncate(len(x.chain.levels) - 1)
			continue
		case through:
			continue
		}
		fi, err := x.chain.lookup(part, onStage)
		inStage := err == nil
		if errors.Is(err, fs.ErrNotExist) {
			fi, err = x.chain.lookup(part, onTarget)
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			through = true
		case err != nil:
			return false, err
		case isLink(fi):
			p := part
			if d := x.chain.dir(); d != "" {
				p = d + "/" + part
			}
			if !inStage || !x.created[p] {
				return false, nil
			}
			through = true
		case !fi.IsDir():
			through = true
		case !inStage:
			x.chain.push(part, false, true)
		default:
			// A real directory of the stage; the target's, beneath it,
			// only where the target has a real directory of that name.
			tfi, err := x.chain.lookup(part, onTarget)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return false, err
			}
			x.chain.push(part, true, err == nil && tfi.IsDir() && !isLink(tfi))
		}
	}
	return true, nil
}

func filePerm(mode fs.FileMode) fs.FileMode {
	perm := mode.Perm()
	if perm == 0 {
		return 0o644
	}
	return perm | 0o600
}

// trailingDrain is how much of what follows a tar archive's end is read.
// tar pads its output to 10 KiB records; reading an upload's body to its
// end is also what lets the HTTP server watch the connection, and so
// cancel the request's context if the client leaves while the links are
// checked (until then, a body that is not read to its end hides that).
const trailingDrain = 1 << 20

// tarEntries reads a tar stream. A failure of the underlying reader
// (tracked by src) is the upload's, reported as a readError; anything else
// is a malformed archive.
func tarEntries(r io.Reader, src *trackedReader) archiveReader {
	tr := tar.NewReader(r)
	return func() (archiveEntry, error) {
		hdr, err := tr.Next()
		if err == io.EOF {
			_, _ = io.CopyN(io.Discard, r, trailingDrain)
			return archiveEntry{}, io.EOF
		}
		if err != nil {
			if src != nil && src.err != nil {
				return archiveEntry{}, &readError{src.err}
			}
			return archiveEntry{}, domain.InvalidRequest("invalid tar archive: %v", err)
		}
		e := archiveEntry{name: hdr.Name, mode: fs.FileMode(hdr.Mode).Perm(), size: hdr.Size, link: hdr.Linkname, mtime: hdr.ModTime, body: tr}
		switch hdr.Typeflag {
		case tar.TypeDir:
			e.kind = entryDir
		case tar.TypeReg, tar.TypeGNUSparse, '\x00': // '\x00': pre-POSIX regular file
			e.kind = entryFile
		case tar.TypeSymlink:
			e.kind = entrySymlink
		case tar.TypeLink:
			e.kind = entryHardlink
		}
		e.sparse = isSparse(hdr)
		return e, nil
	}
}

// isSparse reports a GNU sparse entry in any of its encodings (the old
// 'S' type, or PAX GNU.sparse.* records). archive/tar reads its holes back
// as zeros, so writing it would allocate its whole logical size.
func isSparse(hdr *tar.Header) bool {
	if hdr.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// zipEntries reads a zip archive. Its sizes come from the central
// directory; archive/zip fails a member whose data disagrees.
func zipEntries(r io.ReaderAt, size int64) (archiveReader, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("zip: %w", err)
	}
	i := 0
	var open io.Closer
	return func() (archiveEntry, error) {
		if open != nil {
			open.Close()
			open = nil
		}
		if i == len(zr.File) {
			return archiveEntry{}, io.EOF
		}
		zf := zr.File[i]
		i++
		mode := zf.Mode()
		e := archiveEntry{name: zf.Name, mode: mode.Perm(), size: int64(zf.UncompressedSize64), mtime: zf.Modified}
		if zf.UncompressedSize64 > 1<<62 {
			e.size = 1 << 62
		}
		switch {
		case mode.IsDir():
			e.kind = entryDir
		case mode&fs.ModeSymlink != 0:
			rc, err := zf.Open()
			if err != nil {
				return archiveEntry{}, fmt.Errorf("zip %s: %w", zf.Name, err)
			}
			b, err := io.ReadAll(io.LimitReader(rc, 4096))
			rc.Close()
			if err != nil {
				return archiveEntry{}, fmt.Errorf("zip %s: %w", zf.Name, err)
			}
			e.kind, e.link = entrySymlink, string(b)
		case mode.IsRegular():
			rc, err := zf.Open()
			if err != nil {
				return archiveEntry{}, fmt.Errorf("zip %s: %w", zf.Name, err)
			}
			open = rc
			e.kind, e.body = entryFile, rc
		}
		return e, nil
	}, nil
}

// Unpack extracts the archive file src of kind ("zip", "tar.gz", "tar")
// into the directory dst of fsys (created if missing), for agent installs:
// confined to dst, links checked against the disk (skipped where fsys has
// none: the command is then looked up by name), bytes counted against
// MaxExtract and the free space kept above MinFree. What it wrote stays
// on error; the installer removes its whole install directory then.
func (l Limits) Unpack(ctx context.Context, fsys afero.Fs, src, kind, dst string) error {
	if err := fsys.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	f, err := openRegular(fsys, src)
	if err != nil {
		return err
	}
	defer f.Close()
	x := &extraction{limit: l.maxExtract(), maxDepth: l.maxDepth(), ctx: ctx, skipSym: true}
	var next archiveReader
	switch kind {
	case "zip":
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if next, err = zipEntries(f, fi.Size()); err != nil {
			return err
		}
		x.format = "zip"
	case "tar.gz":
		gz, err := gzip.NewReader(f)
		if err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		defer gz.Close()
		next = tarEntries(gz, nil)
	case "tar":
		next = tarEntries(f, nil)
	default:
		return fmt.Errorf("unsupported archive kind %q", kind)
	}
	if x.guard, err = newSpaceGuard(l.Space, l.MinFree, dst); err != nil {
		return err
	}
	view, closeView, err := confine(fsys, dst)
	if err != nil {
		return err
	}
	defer closeView()
	x.view = view
	return x.extract(next)
}

// confine returns the confined view of dir on fsys: the backend's own
// (ports.Confiner) when it has one, else a base path, which is a complete
// confinement only for a backend without links; other backends are
// refused rather than trusted.
func confine(fsys afero.Fs, dir string) (afero.Fs, func() error, error) {
	if c, ok := fsys.(ports.Confiner); ok {
		return c.Confine(dir)
	}
	if _, links := fsys.(afero.Linker); links {
		if _, osfs := fsys.(*afero.OsFs); !osfs {
			return nil, nil, fmt.Errorf("filesystem %s cannot confine an extraction", fsys.Name())
		}
		// afero's own OsFs (tests): the extractor's checks alone.
	}
	return baseView{afero.NewBasePathFs(fsys, dir).(*afero.BasePathFs), fsys, dir}, func() error { return nil }, nil
}

// baseView is a base path view whose links keep the text they are given
// (afero's BasePathFs would prefix a link's target with the base).
type baseView struct {
	*afero.BasePathFs
	fs   afero.Fs
	base string
}

// SymlinkIfPossible implements afero.Linker.
func (v baseView) SymlinkIfPossible(oldname, newname string) error {
	real, err := v.RealPath(newname)
	if err != nil {
		return err
	}
	if l, ok := v.fs.(afero.Linker); ok {
		return l.SymlinkIfPossible(oldname, real)
	}
	return &fs.PathError{Op: "symlink", Path: newname, Err: afero.ErrNoSymlink}
}

// openRegular opens a regular file for reading without blocking on a FIFO
// or device (ports.RegularOpener when the backend has it; otherwise a
// stat, the open, and a stat of what was opened).
func openRegular(fsys afero.Fs, name string) (afero.File, error) {
	if o, ok := fsys.(ports.RegularOpener); ok {
		return o.OpenRegular(name)
	}
	if fi, err := fsys.Stat(name); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: domain.ErrNotRegular}
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = &fs.PathError{Op: "open", Path: name, Err: domain.ErrNotRegular}
		}
		return nil, err
	}
	return f, nil
}
