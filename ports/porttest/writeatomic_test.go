package porttest

import (
	"errors"
	"io"
	"testing"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// ports.WriteAtomic is tested here because ports itself imports no testing.
func TestWriteAtomic(t *testing.T) {
	fsys := afero.NewMemMapFs()
	if err := afero.WriteFile(fsys, "/d/f", []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	boom := errors.New("boom")
	tests := []struct {
		name  string
		write func(io.Writer) error
		check func(string) error
		want  string
		err   error
	}{
		{"write fails", func(w io.Writer) error { _, _ = io.WriteString(w, "part"); return boom }, nil, "old", boom},
		{"check refuses", write("new"), func(tmp string) error {
			if b, _ := afero.ReadFile(fsys, tmp); string(b) != "new" {
				t.Errorf("check saw %q", b)
			}
			return boom
		}, "old", boom},
		{"replaces", write("new"), nil, "new", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ports.WriteAtomic(fsys, "/d/f", ".f-*.tmp", 0o644, tt.write, tt.check)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if b, _ := afero.ReadFile(fsys, "/d/f"); string(b) != tt.want {
				t.Errorf("dst holds %q, want %q", b, tt.want)
			}
			if ents, _ := afero.ReadDir(fsys, "/d"); len(ents) != 1 {
				t.Errorf("%d entries in the directory, want only dst", len(ents))
			}
		})
	}
	if fi, _ := fsys.Stat("/d/f"); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", fi.Mode())
	}
}

// A write that panics (a handler whose panic the server recovers) leaves
// no temporary file: one did, with a descriptor open, when a size limit
// of MaxInt64 made the upload's reader panic.
func TestWriteAtomicPanic(t *testing.T) {
	fsys := afero.NewMemMapFs()
	if err := afero.WriteFile(fsys, "/d/f", []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not reach the caller")
			}
		}()
		_ = ports.WriteAtomic(fsys, "/d/f", ".f-*.tmp", 0o644, func(w io.Writer) error {
			_, _ = io.WriteString(w, "part")
			panic("boom")
		}, nil)
	}()
	if ents, _ := afero.ReadDir(fsys, "/d"); len(ents) != 1 {
		t.Errorf("%d entries in the directory after a panic, want only dst", len(ents))
	}
	if b, _ := afero.ReadFile(fsys, "/d/f"); string(b) != "old" {
		t.Errorf("dst holds %q", b)
	}
}
