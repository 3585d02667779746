package files

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// dirChain is how the extractor reaches the directory an entry goes in:
// the levels from the top of the extraction down to that directory, each a
// real directory already checked (in the stage, and in the target the
// stage will be merged into), with handles on them. An entry next to the
// previous one costs a lookup or two on its parent's handle, whatever its
// depth; moving elsewhere costs one step per level left and entered. (Each
// operation through the path from the top, as the extractor used to work,
// is a walk of the whole path by os.Root: a 500-deep archive took 88 s.)
//
// Where a view can hand out handles on its subdirectories (a
// ports.Confiner view: os.Root on the host), each level gets its own, so
// every lookup and write is one name in one directory. Elsewhere (memory,
// afero's own OsFs in tests) a level's handle is the view and the level's
// path in it, which those backends resolve in one call (a map lookup; the
// kernel's own walk), not one os.Root step an element.
//
// Handles are descriptors, so the chain keeps only those of the deepest
// chainWindow levels and of every chainEvery-th level (checkpoints); a
// level without one is reopened from the nearest level above that has
// one. Work stays proportional to the levels moved, and one extraction
// holds at most 2 × (chainWindow + depth/chainEvery) descriptors.
//
// A chain is owned by one extraction (or one merge); close releases its
// handles.
type dirChain struct {
	stage, target chainSide // target.root nil: nothing to merge into
	path          []byte    // the levels' names joined by "/"
	ends          []int     // path[:ends[i]] is level i's path
	levels        []chainLevel

	// guard, when set, judges every entry found in the target (rel is its
	// path there): an error refuses it as the lookup's answer. Every look
	// at the target goes through lookup, so this is the one place to keep
	// something there from being replaced, merged into or linked to.
	guard func(rel string, fi fs.FileInfo) error
}

const (
	chainWindow = 32
	chainEvery  = 32
)

// chainSide is one of the two trees a chain walks down.
type chainSide struct {
	root afero.Fs
	sub  bool // root (and every view it hands out) is a ports.Confiner
}

// chainLevel is one directory of the chain: whether the stage and the
// target hold a real directory of that path, and the handles held on it.
type chainLevel struct {
	inStage, inTarget bool
	stage, target     dirHandle
}

// dirHandle reaches names in one directory: fs is the directory's own view
// (prefix "") or a view holding it at prefix. A zero handle is not held.
type dirHandle struct {
	fs     afero.Fs
	prefix string
	close  func() error
}

func (h dirHandle) path(name string) string {
	if h.prefix == "" {
		return name
	}
	return h.prefix + "/" + name
}

// self names the directory itself.
func (h dirHandle) self() string {
	if h.prefix == "" {
		return "."
	}
	return h.prefix
}

func (h dirHandle) lstat(name string) (fs.FileInfo, error) { return lstatOn(h.fs, h.path(name)) }

func newChain(stage, target afero.Fs, guard func(rel string, fi fs.FileInfo) error) *dirChain {
	side := func(root afero.Fs) chainSide {
		_, sub := root.(ports.Confiner)
		return chainSide{root: root, sub: sub}
	}
	c := &dirChain{stage: side(stage), guard: guard}
	if target != nil {
		c.target = side(target)
	}
	return c
}

// sideOf names a chain side for the methods below.
type sideOf bool

const (
	onStage  sideOf = false
	onTarget sideOf = true
)

func (c *dirChain) side(s sideOf) chainSide {
	if s == onTarget {
		return c.target
	}
	return c.stage
}

func (c *dirChain) held(i int, s sideOf) *dirHandle {
	if s == onTarget {
		return &c.levels[i].target
	}
	return &c.levels[i].stage
}

func (c *dirChain) name(i int) string {
	start := 0
	if i > 0 {
		start = c.ends[i-1] + 1
	}
	return string(c.path[start:c.ends[i]])
}

// dir is the path of the chain's deepest level ("" at the top).
func (c *dirChain) dir() string { return string(c.path) }

// keep reports whether level i keeps its handle: a checkpoint, or one of
// the deepest chainWindow levels.
func (c *dirChain) keep(i int) bool {
	return (i+1)%chainEvery == 0 || i >= len(c.levels)-chainWindow
}

func (c *dirChain) release(i int, s sideOf) {
	h := c.held(i, s)
	if h.close != nil {
		_ = h.close()
	}
	*h = dirHandle{}
}

// handle returns the handle of level i (-1: the top) on side s, which must
// hold that level; a level whose handle was released is reopened from the
// nearest level above that still has one.
func (c *dirChain) handle(i int, s sideOf) (dirHandle, error) {
	sd := c.side(s)
	if i < 0 {
		return dirHandle{fs: sd.root}, nil
	}
	if !sd.sub {
		return dirHandle{fs: sd.root, prefix: string(c.path[:c.ends[i]])}, nil
	}
	if h := c.held(i, s); h.fs != nil {
		return *h, nil
	}
	j := i - 1
	for j >= 0 && c.held(j, s).fs == nil {
		j--
	}
	for k := j + 1; k <= i; k++ {
		parent := dirHandle{fs: sd.root}
		if k > 0 {
			parent = *c.held(k-1, s)
		}
		cf, ok := parent.fs.(ports.Confiner)
		if !ok {
			return dirHandle{}, fmt.Errorf("the view %T hands out no handles", parent.fs)
		}
		v, closeView, err := cf.Confine(c.name(k))
		if err != nil {
			return dirHandle{}, err
		}
		*c.held(k, s) = dirHandle{fs: v, close: closeView}
		if k > 0 && !c.keep(k-1) {
			c.release(k-1, s)
		}
	}
	return *c.held(i, s), nil
}

// top returns the handle of the deepest level on side s, and whether that
// side holds it at all (the target may lack it).
func (c *dirChain) top(s sideOf) (dirHandle, bool, error) {
	i := len(c.levels) - 1
	if s == onTarget {
		if c.target.root == nil || i >= 0 && !c.levels[i].inTarget {
			return dirHandle{}, false, nil
		}
	} else if i >= 0 && !c.levels[i].inStage {
		return dirHandle{}, false, nil
	}
	h, err := c.handle(i, s)
	return h, err == nil, err
}

// lookup lstats name in the deepest level on side s; a side that lacks
// the level, or the name, answers fs.ErrNotExist.
func (c *dirChain) lookup(name string, s sideOf) (fs.FileInfo, error) {
	h, ok, err := c.top(s)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fs.ErrNotExist
	}
	fi, err := h.lstat(name)
	if err == nil && s == onTarget && c.guard != nil {
		rel := name
		if len(c.path) > 0 {
			rel = string(c.path) + "/" + name
		}
		if err := c.guard(rel, fi); err != nil {
			return nil, err
		}
	}
	return fi, err
}

// push adds name below the deepest level.
func (c *dirChain) push(name string, inStage, inTarget bool) {
	if len(c.path) > 0 {
		c.path = append(c.path, '/')
	}
	c.path = append(c.path, name...)
	c.ends = append(c.ends, len(c.path))
	c.levels = append(c.levels, chainLevel{inStage: inStage, inTarget: inTarget})
	if i := len(c.levels) - 1 - chainWindow; i >= 0 && !c.keep(i) {
		c.release(i, onStage)
		c.release(i, onTarget)
	}
}

// truncate keeps the first n levels.
func (c *dirChain) truncate(n int) {
	for i := n; i < len(c.levels); i++ {
		c.release(i, onStage)
		c.release(i, onTarget)
	}
	c.levels = c.levels[:n]
	c.ends = c.ends[:n]
	if n == 0 {
		c.path = c.path[:0]
	} else {
		c.path = c.path[:c.ends[n-1]]
	}
}

func (c *dirChain) close() { c.truncate(0) }

// errNotInStage is to's answer, when asked not to create directories, for
// a level the stage does not hold.
var errNotInStage = errors.New("not in the archive")

// parentRefusal is why an entry's way down is refused.
type parentRefusal string

const (
	throughLink parentRefusal = "path passes through a symbolic link"
	notADir     parentRefusal = "a parent is not a directory"
)

func (r parentRefusal) Error() string { return string(r) }

// to moves the chain to dir (a clean relative path, "" for the top),
// keeping the levels it shares with where it was. Each level entered must
// be a real directory on both sides or absent there: a symbolic link or a
// file on the way is a parentRefusal. A level the stage lacks is created
// when create is set, else the answer is errNotInStage. Other errors are
// the filesystem's.
func (c *dirChain) to(dir string, create bool) error {
	n := 0 // bytes shared with the current path
	for n < len(dir) && n < len(c.path) && dir[n] == c.path[n] {
		n++
	}
	k := 0 // levels shared
	for k < len(c.ends) && c.ends[k] <= n && (c.ends[k] == len(dir) || dir[c.ends[k]] == '/') {
		k++
	}
	c.truncate(k)
	start := 0
	if k > 0 {
		start = c.ends[k-1] + 1
	}
	for start < len(dir) {
		end := strings.IndexByte(dir[start:], '/')
		if end < 0 {
			end = len(dir)
		} else {
			end += start
		}
		if err := c.enter(dir[start:end], create); err != nil {
			return err
		}
		start = end + 1
	}
	return nil
}

// enter pushes name, checked on both sides (and created in the stage when
// create is set and it is missing there).
func (c *dirChain) enter(name string, create bool) error {
	inStage, err := c.checkLevel(name, onStage)
	if err != nil {
		return err
	}
	if !inStage {
		if !create {
			return errNotInStage
		}
		h, _, err := c.top(onStage)
		if err != nil {
			return err
		}
		if err := h.fs.Mkdir(h.path(name), 0o755); err != nil {
			return err
		}
	}
	inTarget, err := c.checkLevel(name, onTarget)
	if err != nil {
		return err
	}
	c.push(name, true, inTarget)
	return nil
}

// checkLevel reports whether side s holds name as a real directory below
// the deepest level; a link or a file there is a parentRefusal.
func (c *dirChain) checkLevel(name string, s sideOf) (bool, error) {
	fi, err := c.lookup(name, s)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case isLink(fi):
		return false, throughLink
	case !fi.IsDir():
		return false, notADir
	}
	return true, nil
}
