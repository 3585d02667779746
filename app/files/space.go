package files

import (
	"io"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// Limits bound what writes may take from the disk. Files embeds them; the
// agents use case gets them (as agents.Disk) for installs, so uploads and
// installs share one extractor and one free-space floor.
type Limits struct {
	// MaxExtract bounds the logical size (holes included) one archive may
	// expand to; 0 means DefaultMaxExtract.
	MaxExtract int64
	// MaxDepth bounds the path elements of one archive entry; 0 means
	// DefaultMaxDepth.
	MaxDepth int
	// Space, when set, is asked for the free space before and while
	// writing; a write that would leave less than MinFree bytes stops with
	// insufficient_storage (507). MinFree is bytes, AutoMinFree for the
	// default, 0 for no check.
	Space   ports.DiskSpace
	MinFree int64
}

// GuardWriter wraps w, a writer to a new file at path (an agent install's
// download), so that it stops with insufficient_storage when the free
// space falls below the floor, and with payload_too_large past
// MaxExtract: a download is an archive or a bare executable, and an
// endless one would otherwise fill the disk down to the floor.
func (l Limits) GuardWriter(path string, w io.Writer) (io.Writer, error) {
	g, err := newSpaceGuard(l.Space, l.MinFree, path)
	if err != nil {
		return nil, err
	}
	return &cappedWriter{w: g.writer(w), left: l.maxExtract(), limit: l.maxExtract()}, nil
}

// cappedWriter refuses a write that would take it past limit bytes.
type cappedWriter struct {
	w           io.Writer
	left, limit int64
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		return 0, domain.TooLarge(c.limit, "the download is larger than %d bytes (--max-extract)", c.limit)
	}
	n, err := c.w.Write(p)
	c.left -= int64(n)
	return n, err
}

func (l Limits) maxExtract() int64 {
	if l.MaxExtract <= 0 {
		return DefaultMaxExtract
	}
	return l.MaxExtract
}

func (l Limits) maxDepth() int {
	if l.MaxDepth <= 0 {
		return DefaultMaxDepth
	}
	return l.MaxDepth
}

// DefaultMaxDepth bounds how many path elements one archive entry may
// have when no limit is given: 1024. No project tree comes near it (the
// deepest seen in practice, nested node_modules, stay under a hundred);
// a 4095-byte path could hold 2048. The extractor's work per entry is
// flat in the depth, but a hostile archive may jump between deep branches
// or name long link targets, which costs up to one step per level: the
// cap bounds that.
const DefaultMaxDepth = 1024

// AutoMinFree asks for the default free-space floor: 1 GiB or 5 % of the
// filesystem, whichever is smaller (so a small disk is not "full" from the
// start).
const AutoMinFree = -1

// DefaultMaxExtract bounds what one archive may expand to when no limit is
// given: 8 GiB.
const DefaultMaxExtract = 8 << 30

// spaceCheckEvery is how many bytes a guarded writer lets through between
// two looks at the free space: often enough that a fast writer overshoots
// the floor by at most this much, rarely enough to cost nothing.
const spaceCheckEvery = 16 << 20

// minFreeFor resolves a --min-free setting against a filesystem's size.
func minFreeFor(setting, total int64) int64 {
	if setting >= 0 {
		return setting
	}
	floor := int64(1 << 30)
	if pct := total / 20; pct < floor {
		floor = pct
	}
	return floor
}

// spaceGuard stops a write that would leave less than minFree bytes free on
// the filesystem holding path. A nil guard checks nothing (no DiskSpace, as
// for the memory backend, or --min-free 0).
type spaceGuard struct {
	space   ports.DiskSpace
	path    string
	minFree int64
}

// newSpaceGuard checks at once that the floor is not already crossed.
func newSpaceGuard(space ports.DiskSpace, setting int64, path string) (*spaceGuard, error) {
	if space == nil || setting == 0 {
		return nil, nil
	}
	free, total, err := space.Space(path)
	if err != nil || total <= 0 {
		// No answer, or a filesystem that keeps no count of blocks
		// (procfs, sysfs: 0 of 0 free): the write itself will fail if
		// the disk is full.
		return nil, nil
	}
	g := &spaceGuard{space: space, path: path, minFree: minFreeFor(setting, total)}
	if free < g.minFree {
		return nil, g.refuse(0)
	}
	return g, nil
}

func (g *spaceGuard) refuse(n int64) error {
	if n > 0 {
		return domain.InsufficientStorage(g.minFree, "writing %d more bytes would leave less than %d bytes free", n, g.minFree)
	}
	return domain.InsufficientStorage(g.minFree, "less than %d bytes free", g.minFree)
}

// reserve refuses when writing n more bytes would cross the floor.
func (g *spaceGuard) reserve(n int64) error {
	if g == nil {
		return nil
	}
	free, _, err := g.space.Space(g.path)
	if err != nil {
		return nil
	}
	if free-n < g.minFree {
		return g.refuse(n)
	}
	return nil
}

// writer wraps w so that the floor is checked every spaceCheckEvery bytes.
func (g *spaceGuard) writer(w io.Writer) io.Writer {
	if g == nil {
		return w
	}
	return &guardedWriter{g: g, w: w}
}

type guardedWriter struct {
	g     *spaceGuard
	w     io.Writer
	since int64
}

func (gw *guardedWriter) Write(p []byte) (int, error) {
	if gw.since+int64(len(p)) > spaceCheckEvery {
		if err := gw.g.reserve(int64(len(p))); err != nil {
			return 0, err
		}
		gw.since = 0
	}
	n, err := gw.w.Write(p)
	gw.since += int64(n)
	return n, err
}
