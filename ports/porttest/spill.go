package porttest

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// MemSpill is a ports.Spill whose files are byte slices. Fail, when set,
// is asked before every write, read and create: a non-nil answer is that
// operation's error (a full disk, an I/O error), for the paths that must
// survive one. Files counts the files created; Open the ones not closed.
type MemSpill struct {
	Fail func(op string) error // op: "create", "write", "read", "discard"

	mu    sync.Mutex
	Files int
	Open  int
}

var _ ports.Spill = (*MemSpill)(nil)

// Create implements ports.Spill.
func (m *MemSpill) Create() (ports.SpillFile, error) {
	if err := m.fail("create"); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Files++
	m.Open++
	return &memSpillFile{m: m}, nil
}

// OpenFiles is how many files are created and not closed.
func (m *MemSpill) OpenFiles() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.Open
}

func (m *MemSpill) fail(op string) error {
	if m.Fail == nil {
		return nil
	}
	return m.Fail(op)
}

type memSpillFile struct {
	m      *MemSpill
	mu     sync.Mutex
	b      []byte
	closed bool
}

func (f *memSpillFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.m.fail("write"); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, errors.New("write: file closed")
	}
	if end := off + int64(len(p)); end > int64(len(f.b)) {
		f.b = append(f.b, make([]byte, end-int64(len(f.b)))...)
	}
	return copy(f.b[off:], p), nil
}

func (f *memSpillFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.m.fail("read"); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, errors.New("read: file closed")
	}
	if off >= int64(len(f.b)) {
		return 0, io.EOF
	}
	n := copy(p, f.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memSpillFile) Discard(off, n int64) error {
	if err := f.m.fail("discard"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errors.New("discard: file closed")
	}
	end := min(off+n, int64(len(f.b)))
	if off < end {
		clear(f.b[off:end])
	}
	return nil
}

func (f *memSpillFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errors.New("close: file closed")
	}
	f.closed = true
	f.b = nil
	f.m.mu.Lock()
	f.m.Open--
	f.m.mu.Unlock()
	return nil
}

// SpillContract checks a ports.Spill: files start empty and are separate,
// bytes read back as written at any offset (past the end of what was
// written a read is short with io.EOF), a discarded range reads as zeros
// or as it was (a file that cannot punch holes says so with an error) and
// the rest is untouched, and a closed file fails its reads and writes.
func SpillContract(t *testing.T, s ports.Spill) {
	t.Helper()
	a, err := s.Create()
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Create()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	buf := make([]byte, 8)
	if n, err := a.ReadAt(buf, 0); n != 0 || err != io.EOF {
		t.Fatalf("a new file read %d bytes, %v; want 0, io.EOF", n, err)
	}
	page := bytes.Repeat([]byte("0123456789abcdef"), 1024) // 16 KiB
	if _, err := a.WriteAt(page, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteAt([]byte("tail"), 1<<20); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(page))
	if _, err := a.ReadAt(got, 0); err != nil || !bytes.Equal(got, page) {
		t.Fatalf("read back: %v, equal %v", err, bytes.Equal(got, page))
	}
	if n, err := b.ReadAt(buf, 0); n != 0 || err != io.EOF {
		t.Fatalf("a second file sees the first's bytes: %d, %v", n, err)
	}
	tail := make([]byte, 8)
	if n, err := a.ReadAt(tail, 1<<20); n != 4 || err != io.EOF || string(tail[:4]) != "tail" {
		t.Fatalf("read past the end: %d %q %v", n, tail[:n], err)
	}
	if err := a.Discard(4096, 8192); err == nil {
		if _, err := a.ReadAt(got, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:4096], page[:4096]) || !bytes.Equal(got[12288:], page[12288:]) {
			t.Fatal("Discard touched bytes outside its range")
		}
		if mid := got[4096:12288]; !bytes.Equal(mid, make([]byte, len(mid))) && !bytes.Equal(mid, page[4096:12288]) {
			t.Fatal("a discarded range reads neither as zeros nor as it was")
		}
	}
	if _, err := a.WriteAt([]byte("again"), 4096); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ReadAt(buf[:5], 4096); err != nil || string(buf[:5]) != "again" {
		t.Fatalf("a rewritten range: %q %v", buf[:5], err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ReadAt(buf, 0); err == nil {
		t.Fatal("read after Close succeeded")
	}
	if _, err := a.WriteAt(buf, 0); err == nil {
		t.Fatal("write after Close succeeded")
	}
}
