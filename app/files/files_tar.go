package files

import (
	"bufio"
	"context"
	"errors"
	"io"
	"io/fs"
	"path"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// stagePrefix names the directories upload-batch extracts into before the
// archive is known to be good.
const stagePrefix = ".sandbox-agent-stage-"

// Upload extracts a plain tar archive into the directory p (created if
// missing) and returns the paths written (at most domain.MaxUploadPaths;
// Truncated says more were).
//
// All or nothing: the archive is extracted as it arrives into a fresh
// stage directory (see makeStage), through the one confined extractor
// (extract.go); entries named like a stage are refused. Only when the whole archive was good is
// the stage moved into place, entry by entry (a rename each); on any error,
// limit or client disconnect the stage is removed and the target is as it
// was. Entries that would conflict with what the target holds (a file
// where a directory is, a link on the way) are refused while extracting,
// so the moves do not fail half-way for the archive's sake.
//
// Logical bytes (holes included) count against MaxExtract and, when set,
// MaxUpload: 413 with details.limitBytes past either. Free space is kept
// above MinFree (507).
func (f *Files) Upload(ctx context.Context, p string, body io.Reader) (domain.FSUpload, error) {
	if p == "" {
		p = "."
	}
	target, err := f.Resolve(p)
	if err != nil {
		return domain.FSUpload{}, err
	}
	fi, err := f.Fs.Stat(target)
	exists := err == nil
	switch {
	case exists && !fi.IsDir():
		return domain.FSUpload{}, domain.InvalidRequest("path is not a directory: %s", target)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return domain.FSUpload{}, fsError(target, err)
	}

	src := &trackedReader{r: body}
	br := bufio.NewReaderSize(src, 64<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		return domain.FSUpload{}, domain.InvalidRequest("gzip-compressed archives are not supported: send a plain tar")
	}

	stage, err := f.makeStage(target, exists)
	if err != nil {
		return domain.FSUpload{}, err
	}
	defer func() { _ = f.Fs.RemoveAll(stage) }()

	var result domain.FSUpload
	x := &extraction{
		limit:    f.extractLimit(),
		maxDepth: f.maxDepth(),
		ctx:      ctx,
		base:     target,
		reserved: stagePrefix,
		record: func(rel string) {
			if len(result.Paths) < domain.MaxUploadPaths {
				result.Paths = append(result.Paths, path.Join(target, rel))
			} else {
				result.Truncated = true
			}
		},
	}
	if x.guard, err = newSpaceGuard(f.Space, f.MinFree, stage); err != nil {
		return domain.FSUpload{}, err
	}
	view, closeView, err := confine(f.Fs, stage)
	if err != nil {
		return domain.FSUpload{}, fsError(target, err)
	}
	x.view = view
	closeTarget := func() error { return nil }
	if exists {
		if x.target, closeTarget, err = confine(f.Fs, target); err != nil {
			closeView()
			return domain.FSUpload{}, fsError(target, err)
		}
	}
	err = x.extract(tarEntries(br, src))
	closeView()
	closeTarget()
	if err != nil {
		if src.err != nil {
			return domain.FSUpload{}, fsError(target, &readError{src.err})
		}
		return domain.FSUpload{}, fsError(target, err)
	}
	if err := ctx.Err(); err != nil {
		return domain.FSUpload{}, err
	}

	if !exists {
		if err := f.ensureDir(path.Dir(target), target); err != nil {
			return domain.FSUpload{}, err
		}
		if err := f.Fs.Chmod(stage, 0o755); err != nil {
			return domain.FSUpload{}, fsError(target, err)
		}
		if err := f.Fs.Rename(stage, target); err != nil {
			// Another upload created the target meanwhile: merge into it.
			fi, serr := f.Fs.Stat(target)
			if serr != nil || !fi.IsDir() {
				return domain.FSUpload{}, fsError(target, err)
			}
			if err := f.merge(stage, target); err != nil {
				return domain.FSUpload{}, err
			}
		}
	} else if err := f.merge(stage, target); err != nil {
		return domain.FSUpload{}, err
	}
	if result.Paths == nil {
		result.Paths = []string{}
	}
	return result, nil
}

// extractLimit is the logical size one archive may expand to.
func (f *Files) extractLimit() int64 {
	limit := f.maxExtract()
	if f.MaxUpload > 0 && f.MaxUpload < limit {
		limit = f.MaxUpload
	}
	return limit
}

// makeStage creates the stage directory for an extraction into target, on
// the filesystem the entries will land on, so moving them into place is a
// rename: inside the target when it exists (a mount point's parent is
// another filesystem, where a rename would fail), else in the target's
// nearest existing parent, so a refused archive creates no parents either.
func (f *Files) makeStage(target string, exists bool) (string, error) {
	anchor := target
	if !exists {
		anchor = path.Dir(target)
		for anchor != "/" {
			if fi, err := f.Fs.Stat(anchor); err == nil && fi.IsDir() {
				break
			}
			anchor = path.Dir(anchor)
		}
	}
	stage, err := afero.TempDir(f.Fs, anchor, stagePrefix)
	if err != nil {
		return "", fsError(target, err)
	}
	return stage, nil
}

// merge moves the extracted tree src into the existing directory dst:
// what dst lacks is renamed in whole, directories both have are merged,
// files and links replace files and links (never written through). src
// may be inside dst (the stage of an existing target); it is not itself
// among what is moved.
func (f *Files) merge(src, dst string) error {
	d, err := f.Fs.Open(src)
	if err != nil {
		return fsError(dst, err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fsError(dst, err)
	}
	for _, name := range names {
		s, t := path.Join(src, name), path.Join(dst, name)
		si, err := f.lstat(s)
		if err != nil {
			return fsError(t, err)
		}
		ti, err := f.lstat(t)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return fsError(t, err)
		case si.IsDir() && ti.IsDir() && !isLink(ti):
			if err := f.merge(s, t); err != nil {
				return err
			}
			continue
		case ti.IsDir() && !isLink(ti):
			return domain.InvalidRequest("a directory of that name exists: %s", t)
		case si.IsDir() && !isLink(ti):
			return domain.InvalidRequest("a file of that name exists: %s", t)
		case si.IsDir():
			// The archive's directory replaces a link (links are never
			// written through).
			if err := f.Fs.Remove(t); err != nil {
				return fsError(t, err)
			}
		}
		if err := f.Fs.Rename(s, t); err != nil {
			return fsError(t, err)
		}
	}
	return nil
}
