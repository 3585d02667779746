package wasmpolicy

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// fixtureWasm is testdata/fixture built once for the whole test binary.
var fixtureWasm string

// testDir holds the built fixture and the compilation cache.
var testDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wasmpolicy-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testDir = dir
	fixtureWasm = filepath.Join(dir, "fixture.wasm")
	if err := buildGuest("./testdata/fixture", fixtureWasm); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildGuest builds a Go policy the way operators do.
func buildGuest(pkg, out string) error {
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

var (
	hostOnce   sync.Once
	sharedHost *Host
)

// testHost is one Host (and on-disk compilation cache) for the binary, as
// in the daemon; policies get their own runtimes.
func testHost(t testing.TB) *Host {
	hostOnce.Do(func() {
		h, err := NewHost(filepath.Join(testDir, "cache"), nil)
		if err != nil {
			panic(err)
		}
		sharedHost = h
	})
	return sharedHost
}

// relaxed is the call time limit of tests that are not about the limit:
// on a loaded two-core machine a call can wait on the CPU for longer than
// the 25 ms default, which would turn a correct decision into a failure.
const relaxed = 10 * time.Second

// load loads one policy with logs captured, closing it at cleanup. The
// call time limit is relaxed unless spec sets one.
func load(t testing.TB, spec Spec) (*Set, *logSink) {
	t.Helper()
	spec.CallTimeout = cmp.Or(spec.CallTimeout, relaxed)
	sink := &logSink{}
	h := &Host{cache: testHost(t).cache, logger: slog.New(sink)}
	set, err := h.Load(context.Background(), []Spec{spec})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() { _ = set.Close(context.Background()) })
	return set, sink
}

// logSink records log records for assertions.
type logSink struct {
	mu      sync.Mutex
	records []slog.Record
	attrs   []slog.Attr
}

func (s *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (s *logSink) Handle(_ context.Context, r slog.Record) error {
	r = r.Clone()
	for _, a := range s.attrs {
		r.AddAttrs(a)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = append(s.records, r)
	return nil
}
func (s *logSink) WithAttrs(as []slog.Attr) slog.Handler {
	return &logSinkView{sink: s, attrs: as}
}
func (s *logSink) WithGroup(string) slog.Handler { return s }

type logSinkView struct {
	sink  *logSink
	attrs []slog.Attr
}

func (v *logSinkView) Enabled(context.Context, slog.Level) bool { return true }
func (v *logSinkView) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(v.attrs...)
	return v.sink.Handle(ctx, r)
}
func (v *logSinkView) WithAttrs(as []slog.Attr) slog.Handler {
	return &logSinkView{sink: v.sink, attrs: append(append([]slog.Attr(nil), v.attrs...), as...)}
}
func (v *logSinkView) WithGroup(string) slog.Handler { return v }

// find returns the first record whose message is msg, with its attributes.
func (s *logSink) find(msg string) (map[string]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.records {
		if r.Message != msg {
			continue
		}
		attrs := map[string]string{"level": r.Level.String()}
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		return attrs, true
	}
	return nil, false
}
