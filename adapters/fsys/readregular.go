package fsys

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// ReadTimeout bounds ReadRegular: opening, checking and reading one file.
const ReadTimeout = 5 * time.Second

// ErrTooLarge is the cause ReadRegular gives for a file past its limit.
var ErrTooLarge = errors.New("file too large")

// ReadRegular reads the whole of name, which must be a regular file of at
// most max bytes, within ReadTimeout (or ctx, if sooner). It is how the
// daemon reads what it trusts: token files, policy modules and their
// configuration, the agents file, at start and on every SIGHUP. A FIFO
// (even one without a writer), a device (/dev/zero), a socket or a
// directory, named directly or through a link, fails at once with
// domain.ErrNotRegular: the open does not block (O_NONBLOCK) and the
// opened file is checked before a byte is read. A file larger than max
// fails with ErrTooLarge without being read past max+1 bytes, even if it
// grows while it is read.
//
// It returns the file as it was opened (fstat), so the caller can protect
// the very file it read (Secrets.SetFiles).
//
// A regular file on a filesystem that hangs (a dead network mount) blocks
// in the kernel where nothing can interrupt it: past the timeout the call
// returns an error and the read is left to finish on its own goroutine,
// which then closes the file. It holds at most max+1 bytes meanwhile.
func ReadRegular(ctx context.Context, name string, max int64) ([]byte, fs.FileInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, ReadTimeout)
	defer cancel()
	type result struct {
		b   []byte
		fi  fs.FileInfo
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, fi, err := readRegular(ctx, name, max)
		done <- result{b, fi, err}
	}()
	select {
	case r := <-done:
		return r.b, r.fi, r.err
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("read %s: gave up: %w", name, ctx.Err())
	}
}

func readRegular(ctx context.Context, name string, max int64) ([]byte, fs.FileInfo, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w (%s)", domain.ErrNotRegular, kind(fi.Mode()))}
	}
	if fi.Size() > max {
		return nil, nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, fi.Size(), max)}
	}
	b := make([]byte, 0, fi.Size()+1)
	buf := make([]byte, 64<<10)
	r := io.LimitReader(f, max+1)
	for {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		n, err := r.Read(buf)
		b = append(b, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if int64(len(b)) > max {
		return nil, nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)}
	}
	return b, fi, nil
}

// kind names a file type for a message.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "not a plain file"
}
