package process

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// A start that ran out of a system resource says which (503 overloaded,
// details.resource); any other failure is left to the caller's mapping.
func TestExhaustedSaysWhatRanOut(t *testing.T) {
	for _, c := range []struct {
		err      error
		resource string
		text     string
	}{
		{&os.SyscallError{Syscall: "pipe2", Err: syscall.EMFILE}, domain.ResourceFileDescriptors, "the daemon is out of file descriptors"},
		{fmt.Errorf("start x: %w", syscall.ENFILE), domain.ResourceFileDescriptors, "the system is out of file descriptors"},
		{&os.PathError{Op: "fork/exec", Path: "/bin/x", Err: syscall.EAGAIN}, domain.ResourceProcesses, "the limit on processes is reached"},
		{fmt.Errorf("fork: %w", syscall.ENOMEM), domain.ResourceMemory, "out of memory"},
		{&os.PathError{Op: "fork/exec", Path: "/bin/x", Err: syscall.ENOENT}, "", ""},
		{errors.New("other"), "", ""},
	} {
		e := exhausted("process", c.err)
		if c.resource == "" {
			if e != nil {
				t.Errorf("%v: %v, want nil", c.err, e)
			}
			continue
		}
		if e == nil || e.Kind != domain.KindOverloaded || e.Resource != c.resource || !strings.Contains(e.Msg, c.text) || !errors.Is(e, c.err) {
			t.Errorf("%v: %+v", c.err, e)
		}
	}
	// Through the starter's mapping too.
	err := startError(domain.ProcessSpec{Command: "x"}, &os.SyscallError{Syscall: "pipe2", Err: syscall.EMFILE})
	if !domain.IsKind(err, domain.KindOverloaded) {
		t.Errorf("startError: %v", err)
	}
}

// Starts leave an eighth of the open-file limit (8 to 256) free, and the
// count they judge by is this process's.
func TestFDHeadroom(t *testing.T) {
	for _, c := range []struct{ limit, want int }{{16, 8}, {64, 8}, {1024, 128}, {1 << 20, 256}} {
		if got := headroomOf(c.limit); got != c.want {
			t.Errorf("headroomOf(%d) = %d, want %d", c.limit, got, c.want)
		}
	}
	n, ok := countOpenFDs()
	if !ok {
		t.Skip("no /proc")
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if m, _ := countOpenFDs(); m != n+1 {
		t.Errorf("open descriptors %d, then %d after one more", n, m)
	}
	if e := exhausted("process", errFDHeadroom); e == nil || e.Resource != domain.ResourceFileDescriptors {
		t.Errorf("errFDHeadroom: %v", e)
	}
}
