package fsys

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// TestReadRegular: what the daemon reads its tokens and policies with
// takes a regular file within its cap, and refuses at once, without
// blocking or reading on, a FIFO without a writer, a device (through a
// link too), a socket, a directory, or a file past the cap.
func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	fifo := filepath.Join(dir, "fifo")
	must(t, syscall.Mkfifo(fifo, 0o600))
	zero := filepath.Join(dir, "zero")
	must(t, os.Symlink("/dev/zero", zero))
	sock := filepath.Join(dir, "sock")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	must(t, err)
	defer syscall.Close(fd)
	must(t, syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}))

	const max = 16
	for _, c := range []struct {
		name, path string
		want       string // the content, or
		err        error  // the cause
	}{
		{"regular", file("ok", "tok\n"), "tok\n", nil},
		{"exactly the cap", file("cap", strings.Repeat("x", max)), strings.Repeat("x", max), nil},
		{"empty", file("empty", ""), "", nil},
		{"one past the cap", file("big", strings.Repeat("x", max+1)), "", ErrTooLarge},
		{"FIFO without a writer", fifo, "", domain.ErrNotRegular},
		{"link to /dev/zero", zero, "", domain.ErrNotRegular},
		{"directory", dir, "", domain.ErrNotRegular},
		{"socket", sock, "", syscall.ENXIO},
		{"missing", filepath.Join(dir, "nope"), "", fs.ErrNotExist},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			b, fi, err := ReadRegular(context.Background(), c.path, max)
			if took := time.Since(start); took > time.Second {
				t.Errorf("took %v", took)
			}
			if c.err != nil {
				if !errors.Is(err, c.err) || b != nil || fi != nil {
					t.Fatalf("got %q %v %v, want %v", b, fi, err, c.err)
				}
				return
			}
			if err != nil || string(b) != c.want || fi == nil || !fi.Mode().IsRegular() {
				t.Fatalf("got %q %v %v", b, fi, err)
			}
		})
	}
}

// TestReadRegularCancelled: an ended context ends the read.
func TestReadRegularCancelled(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	must(t, os.WriteFile(p, []byte("x"), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := ReadRegular(ctx, p, 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}
