package files

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Upload extracts a plain tar archive into the directory p (created if
// missing) as it arrives, and returns the paths written (at most
// domain.MaxUploadPaths; Truncated says more were).
//
// Nothing is ever written outside the directory: entry names with ".." or a
// leading "/" are refused, as are entries whose way passes through a
// symbolic link (one in the archive or one already on disk), and symbolic
// links whose target is absolute or leads out. Links are checked once more
// against the disk when the archive is complete, and removed again if they
// would lead out. Hard links are stored as copies.
// Device, FIFO and other special entries are skipped.
func (f *Files) Upload(ctx context.Context, p string, body io.Reader) (domain.FSUpload, error) {
	if p == "" {
		p = "."
	}
	base, err := f.Resolve(p)
	if err != nil {
		return domain.FSUpload{}, err
	}
	if fi, err := f.Fs.Stat(base); err == nil && !fi.IsDir() {
		return domain.FSUpload{}, domain.InvalidRequest("path is not a directory: %s", base)
	}
	if err := f.ensureDir(base, base); err != nil {
		return domain.FSUpload{}, err
	}

	src := &trackedReader{r: body}
	br := bufio.NewReaderSize(src, 64<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		return domain.FSUpload{}, domain.InvalidRequest("gzip-compressed archives are not supported: send a plain tar")
	}
	x := &extraction{files: f, base: base, created: map[string]bool{}}
	tr := tar.NewReader(br)
	for {
		if err := ctx.Err(); err != nil {
			return domain.FSUpload{}, err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if src.err != nil {
				return domain.FSUpload{}, fsError(base, &readError{src.err})
			}
			return domain.FSUpload{}, domain.InvalidRequest("invalid tar archive: %v", err)
		}
		if err := x.entry(ctx, hdr, tr); err != nil {
			if src.err != nil {
				return domain.FSUpload{}, fsError(base, &readError{src.err})
			}
			return domain.FSUpload{}, err
		}
	}
	if err := x.checkLinks(); err != nil {
		return domain.FSUpload{}, err
	}
	if x.result.Paths == nil {
		x.result.Paths = []string{}
	}
	return x.result, nil
}

// extraction is the state of one Upload.
type extraction struct {
	files   *Files
	base    string
	result  domain.FSUpload
	links   []createdLink
	created map[string]bool // symbolic links made by this extraction
}

type createdLink struct {
	name, rel, target string
}

func (x *extraction) record(p string) {
	if len(x.result.Paths) < domain.MaxUploadPaths {
		x.result.Paths = append(x.result.Paths, p)
	} else {
		x.result.Truncated = true
	}
}

func entryErr(name, format string, args ...any) error {
	return domain.InvalidRequest("tar entry %q: "+format, append([]any{name}, args...)...)
}

func (x *extraction) entry(ctx context.Context, hdr *tar.Header, r io.Reader) error {
	fsys := x.files.Fs
	rel, err := domain.TarEntryPath(hdr.Name)
	if err != nil {
		return entryErr(hdr.Name, "%v", err)
	}
	if rel == "" {
		return nil // "./": the directory itself
	}
	switch hdr.Typeflag {
	case tar.TypeDir, tar.TypeReg, tar.TypeGNUSparse, tar.TypeSymlink, tar.TypeLink:
	default:
		return nil // devices, FIFOs, global headers: nothing to store
	}
	dest := path.Join(x.base, rel)
	if err := x.checkParents(hdr.Name, rel); err != nil {
		return err
	}
	existing, statErr := x.files.lstat(dest)
	exists := statErr == nil
	if statErr != nil && !errors.Is(statErr, fs.ErrNotExist) {
		return fsError(dest, statErr)
	}
	isLink := exists && existing.Mode()&fs.ModeSymlink != 0

	switch hdr.Typeflag {
	case tar.TypeDir:
		if exists && !isLink && !existing.IsDir() {
			return entryErr(hdr.Name, "a file of that name exists")
		}
		if isLink {
			if err := fsys.Remove(dest); err != nil {
				return fsError(dest, err)
			}
		}
		if err := fsys.MkdirAll(dest, dirPerm(hdr)); err != nil {
			return fsError(dest, err)
		}

	case tar.TypeReg, tar.TypeGNUSparse:
		if err := x.replaceable(hdr.Name, dest, existing, exists, isLink); err != nil {
			return err
		}
		if err := fsys.MkdirAll(path.Dir(dest), 0o755); err != nil {
			return fsError(dest, err)
		}
		if _, err := x.files.writeAtomic(ctx, dest, r, filePerm(hdr)); err != nil {
			var re *readError
			if errors.As(err, &re) {
				// The upload's own failures are told apart by Upload.
				return domain.InvalidRequest("invalid tar archive: %v", re.err)
			}
			return fsError(dest, err)
		}
		if !hdr.ModTime.IsZero() {
			_ = fsys.Chtimes(dest, hdr.ModTime, hdr.ModTime)
		}

	case tar.TypeSymlink:
		if err := domain.TarSymlinkTarget(rel, hdr.Linkname); err != nil {
			return entryErr(hdr.Name, "%v", err)
		}
		linker, ok := fsys.(afero.Linker)
		if !ok {
			return entryErr(hdr.Name, "symbolic links are not supported by this filesystem")
		}
		if err := x.replaceable(hdr.Name, dest, existing, exists, isLink); err != nil {
			return err
		}
		if err := fsys.MkdirAll(path.Dir(dest), 0o755); err != nil {
			return fsError(dest, err)
		}
		if err := linker.SymlinkIfPossible(hdr.Linkname, dest); err != nil {
			if errors.Is(err, afero.ErrNoSymlink) {
				return entryErr(hdr.Name, "symbolic links are not supported by this filesystem")
			}
			return fsError(dest, err)
		}
		x.created[dest] = true
		x.links = append(x.links, createdLink{name: hdr.Name, rel: rel, target: hdr.Linkname})

	case tar.TypeLink:
		srcRel, err := domain.TarEntryPath(hdr.Linkname)
		if err != nil || srcRel == "" {
			return entryErr(hdr.Name, "invalid hard link target %q", hdr.Linkname)
		}
		if err := x.checkParents(hdr.Name, srcRel); err != nil {
			return err
		}
		srcPath := path.Join(x.base, srcRel)
		fi, err := x.files.lstat(srcPath)
		if err != nil || !fi.Mode().IsRegular() {
			return entryErr(hdr.Name, "hard link target %q is not a regular file of the archive", hdr.Linkname)
		}
		if err := x.replaceable(hdr.Name, dest, existing, exists, isLink); err != nil {
			return err
		}
		in, err := fsys.Open(srcPath)
		if err != nil {
			return fsError(srcPath, err)
		}
		_, err = x.files.writeAtomic(ctx, dest, in, fi.Mode().Perm())
		in.Close()
		if err != nil {
			return fsError(dest, err)
		}
	}
	x.record(dest)
	return nil
}

// replaceable clears the way for a file or link at dest: an old link or
// file is removed (links are never written through); a directory stays and
// is an error.
func (x *extraction) replaceable(name, dest string, existing fs.FileInfo, exists, isLink bool) error {
	if !exists {
		return nil
	}
	if !isLink && existing.IsDir() {
		return entryErr(name, "a directory of that name exists")
	}
	if isLink {
		if err := x.files.Fs.Remove(dest); err != nil {
			return fsError(dest, err)
		}
		delete(x.created, dest)
	}
	return nil
}

// checkParents refuses an entry whose existing parent directories include
// a symbolic link or a non-directory: writing through them could land
// outside the extraction directory.
func (x *extraction) checkParents(name, rel string) error {
	parts := strings.Split(rel, "/")
	cur := x.base
	for _, part := range parts[:len(parts)-1] {
		cur = path.Join(cur, part)
		fi, err := x.files.lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // the rest is created fresh
		}
		if err != nil {
			return fsError(cur, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return entryErr(name, "path passes through a symbolic link")
		}
		if !fi.IsDir() {
			return entryErr(name, "a parent is not a directory")
		}
	}
	return nil
}

// checkLinks verifies every link made, against the disk as extracted: a
// lexical check cannot see that ".." after a link goes to the parent of the
// link's target, nor where a link that was already on disk points. Links
// found leading out are removed and reported.
func (x *extraction) checkLinks() error {
	for _, l := range x.links {
		if x.linkStaysInside(l) {
			continue
		}
		for _, other := range x.links {
			if !x.linkStaysInside(other) {
				_ = x.files.Fs.Remove(path.Join(x.base, other.rel))
			}
		}
		return entryErr(l.name, "link target leaves the destination")
	}
	return nil
}

// linkStaysInside walks l's target from the link's directory. Elements are
// "solid" when they are real directories; ".." may only leave a solid one.
// A link met on the way must be one this extraction made (checked on its
// own); links that were on disk before could point anywhere.
func (x *extraction) linkStaysInside(l createdLink) bool {
	type elem struct {
		name  string
		solid bool
	}
	var stack []elem
	if dir := path.Dir(l.rel); dir != "." {
		for _, part := range strings.Split(dir, "/") {
			stack = append(stack, elem{part, true})
		}
	}
	for _, part := range strings.Split(l.target, "/") {
		switch part {
		case "", ".":
			continue
		case "..":
			if len(stack) == 0 || !stack[len(stack)-1].solid {
				return false
			}
			stack = stack[:len(stack)-1]
			continue
		}
		names := make([]string, 0, len(stack)+2)
		names = append(names, x.base)
		for _, e := range stack {
			names = append(names, e.name)
		}
		p := path.Join(append(names, part)...)
		fi, err := x.files.lstat(p)
		solid := err == nil && fi.IsDir()
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 && !x.created[p] {
			return false
		}
		stack = append(stack, elem{part, solid})
	}
	return true
}

func dirPerm(hdr *tar.Header) fs.FileMode {
	return fs.FileMode(hdr.Mode).Perm() | 0o700
}

func filePerm(hdr *tar.Header) fs.FileMode {
	perm := fs.FileMode(hdr.Mode).Perm()
	if perm == 0 {
		return 0o644
	}
	return perm | 0o600
}
