package seqring

import (
	"bytes"
	"errors"
	"slices"

	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

const (
	// minSegment and maxSegment bound a spool's memory segments: a log
	// starts small and doubles its segment each time one fills, so a quiet
	// log holds a few KiB and a busy one writes its file 64 KiB at a time.
	minSegment = 1 << 10
	maxSegment = 64 << 10
	// discardBatch is how much file storage, no longer needed, is given
	// back at once (a hole punched), so that a steady stream costs one
	// call per this many bytes.
	discardBatch = 256 << 10
	pageSize     = 4 << 10
)

// Spool holds a log's payload bytes, addressed by position: Append puts
// each payload at the next positions, Drop says which positions are no
// longer needed (always the oldest), and a payload still needed reads
// back unchanged. A log keeps, per item, where its payload is.
//
// The newest bytes are in memory, in a segment being filled. Given a
// ports.Spill, each segment that fills is written to a file of the log's
// own (made at the first), at position modulo the file's size, and its
// memory let go: the older part of the log lives in the page cache,
// outside the heap, and a reader that falls behind reads it back
// (ReadSpilled). The file never needs to be larger than the log's budget:
// a log keeps at most its budget of payload bytes, so a position the file
// wraps onto was dropped first. Without a Spill, full segments stay in
// memory, which is still more compact than one allocation per payload.
// Payloads larger than a segment stay in memory either way, so that a
// reader never needs a copy of one.
//
// A file that fails is given up: a write error leaves the segment in
// memory and the spool in memory from then on (what the file already
// holds stays readable); a read error loses what the file held (Lose).
// The owner is told through OnError.
//
// Not safe for concurrent use: the owning log guards it with its mutex.
// Only the file I/O runs outside that mutex, through a FlushJob (writes)
// and SpillReader (reads), so that neither the appender nor other readers
// wait for the disk.
type Spool struct {
	spill   ports.Spill
	size    int64 // the file's size: position p is at offset p % size
	onError func(error)

	file      ports.SpillFile // made at the first write; nil before, and after Reset or a failure is done with
	head      int64           // the next position
	tail      []byte          // the segment being filled: positions [head-len(tail), head)
	mem       []segment       // full segments in memory, oldest first: all of them without a file, else those not written yet
	big       []segment       // with a file: payloads larger than a segment, oldest first
	flushed   int64           // with a file: positions below it are in the file, or in big, or dropped
	flushing  bool            // mem[0] is being written
	discarded int64           // with a file: storage below this position was given back
	low       int64           // positions below this are no longer needed
	segSize   int             // size of the next segment
	segMax    int             // the largest segment: maxSegment, or the log's size if smaller
	failed    bool            // the file failed: memory only from now on
	noDiscard bool            // the file cannot punch holes
}

type segment struct {
	pos int64
	b   []byte
}

func (s segment) end() int64 { return s.pos + int64(len(s.b)) }

// NewSpool returns a spool that writes full segments to a file from spill
// (nil: memory only) of size bytes, the most payload bytes its log keeps.
// onError, if set, is told when the file fails (the spool goes on in
// memory).
func NewSpool(spill ports.Spill, size int64, onError func(error)) Spool {
	segMax := int(min(max(size, minSegment), maxSegment)) // a small log needs no large segment
	return Spool{spill: spill, size: size, onError: onError, segSize: minSegment, segMax: segMax}
}

// Head is the position the next Append takes.
func (s *Spool) Head() int64 { return s.head }

// Append copies p to the next positions and returns where, and the stored
// bytes, which never change and stay valid as long as the caller keeps
// them (memory is never reused). owned says p is the caller's to give: a
// payload larger than a segment is then kept as it is, without a copy.
// With a file, a segment that filled waits for a FlushJob.
func (s *Spool) Append(p []byte, owned bool) (pos int64, stored []byte) {
	pos = s.head
	if len(p) > maxSegment {
		if !owned {
			p = bytes.Clone(p)
		}
		s.seal()
		if s.spilling() {
			s.big = append(s.big, segment{pos, p})
		} else {
			s.mem = append(s.mem, segment{pos, p})
		}
		s.head += int64(len(p))
		return pos, p
	}
	if len(p) > cap(s.tail)-len(s.tail) {
		s.seal()
		s.tail = make([]byte, 0, max(s.segSize, len(p)))
		s.segSize = min(2*s.segSize, s.segMax)
	}
	s.tail = append(s.tail, p...)
	s.head += int64(len(p))
	return pos, s.tail[len(s.tail)-len(p) : len(s.tail) : len(s.tail)]
}

// spilling reports whether full segments go to a file.
func (s *Spool) spilling() bool { return s.spill != nil && !s.failed }

// seal moves the segment being filled to mem.
func (s *Spool) seal() {
	if len(s.tail) > 0 {
		s.mem = append(s.mem, segment{s.head - int64(len(s.tail)), s.tail})
	}
	s.tail = nil
}

// Slice returns the n bytes at pos when they are in memory; false means
// they are in the file (read them with ReadSpilled).
func (s *Spool) Slice(pos int64, n int) ([]byte, bool) {
	if start := s.head - int64(len(s.tail)); pos >= start {
		off := pos - start
		return s.tail[off : off+int64(n) : off+int64(n)], true
	}
	for _, segs := range [][]segment{s.mem, s.big} {
		i, found := slices.BinarySearchFunc(segs, pos, func(g segment, p int64) int {
			switch {
			case g.end() <= p:
				return -1
			case g.pos > p:
				return 1
			}
			return 0
		})
		if found {
			g := segs[i]
			off := pos - g.pos
			return g.b[off : off+int64(n) : off+int64(n)], true
		}
	}
	return nil, false
}

// SpillReader reads positions out of a spool's file without its owner's
// lock. Take it under the lock; what it read is good only if the items
// read are still kept once the lock is taken again (a dropped position
// may be rewritten or given back meanwhile).
type SpillReader struct {
	file ports.SpillFile
	size int64
}

// errNoFile is the read of a spool without a file.
var errNoFile = errors.New("spool: no file")

// Reader returns the reader of the spool's file.
func (s *Spool) Reader() SpillReader { return SpillReader{s.file, s.size} }

// ReadSpilled fills p with the bytes from position pos on.
func (r SpillReader) ReadSpilled(p []byte, pos int64) error {
	if len(p) == 0 {
		return nil
	}
	if r.file == nil {
		return errNoFile
	}
	for len(p) > 0 {
		off := pos % r.size
		n := min(int64(len(p)), r.size-off)
		if got, err := r.file.ReadAt(p[:n], off); int64(got) < n {
			if err == nil {
				err = errors.New("spool: short read")
			}
			return err
		}
		p, pos = p[n:], pos+n
	}
	return nil
}

// FlushJob is one full segment to write to the spool's file, outside the
// owner's lock.
type FlushJob struct {
	file ports.SpillFile
	size int64
	seg  segment
}

// TakeFlush returns the oldest segment waiting for the file, unless a
// write is already under way or there is none. The file is made here at
// the first. Call under the owner's lock; then Write without it, then
// Flushed under it again.
func (s *Spool) TakeFlush() (FlushJob, bool) {
	if !s.spilling() || s.flushing || len(s.mem) == 0 {
		return FlushJob{}, false
	}
	if s.file == nil {
		f, err := s.spill.Create()
		if err != nil {
			s.fail(err)
			return FlushJob{}, false
		}
		s.file = f
		s.discarded = s.head
	}
	s.flushing = true
	return FlushJob{s.file, s.size, s.mem[0]}, true
}

// Write writes the segment at its position modulo the file's size.
func (j FlushJob) Write() error {
	p, pos := j.seg.b, j.seg.pos
	for len(p) > 0 {
		off := pos % j.size
		n := min(int64(len(p)), j.size-off)
		if _, err := j.file.WriteAt(p[:n], off); err != nil {
			return err
		}
		p, pos = p[n:], pos+n
	}
	return nil
}

// Flushed records the end of a FlushJob: the segment is in the file and
// its memory goes, or the write failed and the spool stays in memory from
// now on, that segment included.
func (s *Spool) Flushed(j FlushJob, err error) {
	if j.file != s.file {
		return // reset meanwhile
	}
	s.flushing = false
	if err != nil || s.failed {
		if err != nil {
			s.fail(err)
		}
		return // the segment stays in memory
	}
	if len(s.mem) > 0 && s.mem[0].pos == j.seg.pos {
		s.mem[0] = segment{}
		s.mem = s.mem[1:]
	}
	s.flushed = max(s.flushed, j.seg.end())
	s.Drop(s.low) // what was dropped while it was written
}

// Lose gives up a file that failed a read: the positions it held are lost
// (the owner drops the items below the position returned), and the spool
// goes on in memory.
func (s *Spool) Lose(err error) int64 {
	s.fail(err)
	return s.flushed
}

func (s *Spool) fail(err error) {
	if !s.failed && s.onError != nil {
		s.onError(err)
	}
	s.failed = true
}

// Drop says positions below low are no longer needed: memory segments
// wholly below it go, and file storage below it is given back in batches.
func (s *Spool) Drop(low int64) {
	s.low = max(s.low, low)
	low = s.low
	n := 0
	for ; n < len(s.mem) && s.mem[n].end() <= low && !(n == 0 && s.flushing); n++ {
		if s.file != nil && !s.failed {
			s.flushed = max(s.flushed, s.mem[n].end()) // never needs writing now
		}
		s.mem[n] = segment{}
	}
	s.mem = s.mem[n:]
	n = 0
	for ; n < len(s.big) && s.big[n].end() <= low; n++ {
		s.big[n] = segment{}
	}
	s.big = s.big[n:]
	if low >= s.head && s.tail != nil {
		s.tail, s.segSize = nil, minSegment // a quiet log goes back to a small segment
	}
	if s.file == nil {
		return
	}
	if s.failed {
		if low >= s.flushed && !s.flushing {
			s.file.Close()
			s.file = nil
		}
		return
	}
	if s.noDiscard {
		return
	}
	// Never a position the file will hold again before the next write is
	// done: a write in progress covers positions at or past flushed, whose
	// offsets are those of positions a whole file size earlier.
	from := max(s.discarded, s.head-s.size)
	from = (from + pageSize - 1) &^ (pageSize - 1)
	to := min(low, s.flushed) &^ (pageSize - 1)
	if to-from < discardBatch {
		return
	}
	for pos := from; pos < to; {
		off := pos % s.size
		n := min(to-pos, s.size-off)
		if err := s.file.Discard(off, n); err != nil {
			s.noDiscard = true // the file keeps its size: at most the log's budget
			return
		}
		pos += n
	}
	s.discarded = to
}

// Reset drops every byte and closes the file; positions go on.
func (s *Spool) Reset() {
	if s.file != nil {
		s.file.Close()
	}
	clear(s.mem)
	clear(s.big)
	*s = Spool{spill: s.spill, size: s.size, onError: s.onError, segSize: minSegment, segMax: s.segMax, head: s.head, low: s.head, flushed: s.head}
}

// Memory is what the spool holds in memory, in bytes (segments at their
// full size).
func (s *Spool) Memory() int64 {
	n := int64(cap(s.tail))
	for _, g := range s.mem {
		n += int64(cap(g.b))
	}
	for _, g := range s.big {
		n += int64(cap(g.b))
	}
	return n
}

// Spilled reports whether the spool writes to a file now.
func (s *Spool) Spilled() bool { return s.file != nil && !s.failed }
