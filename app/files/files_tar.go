package files

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"io"
	"io/fs"
	"path"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
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
	p = cmp.Or(p, ".")
	target, err := f.Resolve(p)
	if err != nil {
		return domain.FSUpload{}, err
	}
	if err := guardPath(f.Secrets, target, target, true); err != nil {
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
	// What the archive would replace in the target is never a secret (the
	// target itself was judged above; links on the way are refused by the
	// extractor, so identity is enough here). The final merge asks the same.
	guard := func(rel string, fi fs.FileInfo) error { return guardInfo(f.Secrets, path.Join(target, rel), fi) }
	x.guardTarget = guard
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
			if err := f.merge(stage, target, guard); err != nil {
				return domain.FSUpload{}, err
			}
		}
	} else if err := f.merge(stage, target, guard); err != nil {
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
//
// Both trees are walked through one chain of directory handles
// (extract_chain.go), and each entry is moved by one rename between the
// two directories where the backend can (ports.DirRenamer): a deep tree
// costs a step a directory, not a walk from the top for each entry.
// guard, when set, judges each entry of dst met on the way
// (dirChain.guard).
func (f *Files) merge(src, dst string, guard func(rel string, fi fs.FileInfo) error) error {
	sv, closeSrc, err := confine(f.Fs, src)
	if err != nil {
		return fsError(dst, err)
	}
	defer closeSrc()
	dv, closeDst, err := confine(f.Fs, dst)
	if err != nil {
		return fsError(dst, err)
	}
	defer closeDst()
	c := newChain(sv, dv, guard)
	defer c.close()
	return f.mergeDir(c, src, dst)
}

// mergeDir merges the chain's directory (a real directory on both sides)
// and what is below it.
func (f *Files) mergeDir(c *dirChain, src, dst string) error {
	dir := c.dir()
	h, _, err := c.top(onStage)
	if err != nil {
		return fsError(path.Join(dst, dir), err)
	}
	d, err := h.fs.Open(h.self())
	if err != nil {
		return fsError(path.Join(dst, dir), err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fsError(path.Join(dst, dir), err)
	}
	for _, name := range names {
		rel := name
		if dir != "" {
			rel = dir + "/" + name
		}
		t := path.Join(dst, rel)
		if err := c.to(dir, false); err != nil { // back from a subdirectory
			return fsError(t, err)
		}
		si, err := c.lookup(name, onStage)
		if err != nil {
			return fsError(t, err)
		}
		ti, err := c.lookup(name, onTarget)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return fsError(t, err)
		case si.IsDir() && ti.IsDir() && !isLink(ti):
			c.push(name, true, true)
			if err := f.mergeDir(c, src, dst); err != nil {
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
			th, _, err := c.top(onTarget)
			if err == nil {
				err = th.fs.Remove(th.path(name))
			}
			if err != nil {
				return fsError(t, err)
			}
		}
		if err := f.move(c, name, path.Join(src, rel), t); err != nil {
			return fsError(t, err)
		}
	}
	return nil
}

// move renames name from the chain's directory in the stage to the same
// in the target: between the two directory handles when the backend can,
// else by the full paths (backends that resolve them without walking the
// disk).
func (f *Files) move(c *dirChain, name, from, to string) error {
	sh, _, err := c.top(onStage)
	if err != nil {
		return err
	}
	th, _, err := c.top(onTarget)
	if err != nil {
		return err
	}
	if r, ok := th.fs.(ports.DirRenamer); ok && th.prefix == "" && sh.prefix == "" {
		return r.RenameFrom(sh.fs, name, name)
	}
	return f.Fs.Rename(from, to)
}
