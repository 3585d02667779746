package ports

import "io"

// Spill makes scratch files for bytes the daemon keeps but rarely reads
// again: the older part of each ACP instance's replay buffer, which
// app/acp writes once and reads only for a reader that fell behind or
// reconnects. Kept in a file, those bytes live in the kernel's page cache
// instead of the daemon's heap: they are not part of its resident set,
// the collector never scans or doubles them, and on a disk-backed
// filesystem the kernel may write them out and drop them under memory
// pressure instead of killing the daemon.
//
// Create never blocks beyond opening a file; safe for concurrent use.
type Spill interface {
	// Create returns a new, empty scratch file that no other process can
	// open by name (it has none, or it was removed at once). The caller
	// closes it; closing frees its space.
	Create() (SpillFile, error)
}

// SpillFile is one scratch file of a Spill. ReadAt and WriteAt are
// positional and may run concurrently with each other and with Discard on
// other ranges; Close may run concurrently with them, which then fail.
// Errors are what the disk said (no space, I/O error, closed).
type SpillFile interface {
	io.ReaderAt
	io.WriterAt
	// Discard gives back the storage of n bytes at off, which the caller
	// will not read again before writing them anew: the file keeps its
	// size, the range reads as zeros. A file that cannot (its filesystem
	// has no hole punching) returns an error and keeps the bytes.
	Discard(off, n int64) error
	io.Closer
}
