package wasmpolicy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fixtureWasm is testdata/fixture built once for the whole test binary;
// exampleWasm holds the example policies that declare their decisions
// cacheable, by name, for the decision cache's differential tests.
var (
	fixtureWasm string
	exampleWasm = map[string]string{}
)

// cacheableExamples are the examples that opt into the decision cache
// (hmactoken does not: its tokens expire).
var cacheableExamples = []string{"readonly", "agenttokens", "scopes", "denymethods"}

// testDir holds the built guests and the compilation cache.
var testDir string

// precompileEnv, set in a test binary's environment to a cache directory
// and modules (joined by os.PathListSeparator), makes it compile the
// modules into the cache and exit without running any test.
const precompileEnv = "WASMPOLICY_TEST_PRECOMPILE"

func TestMain(m *testing.M) {
	if job := os.Getenv(precompileEnv); job != "" {
		os.Exit(precompile(job))
	}
	dir, err := os.MkdirTemp("", "wasmpolicy-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testDir = dir
	if err := buildGuests(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	sharedDiff.close()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildGuests builds the fixture and the cacheable examples into dir, at
// once, and compiles them into the tests' compilation cache in a copy of
// this test binary built without the race detector: under -race, wazero's
// compiler spends some 17 s of CPU on each Go guest, in wazero's code, not
// ours (the daemon never runs it instrumented). The tests then load them
// from the cache through the same host code as always, instrumented; the
// hand-written modules of wasmbin_test.go are still compiled here. The
// compiler is a test binary of this package, like the one it serves, so
// both name wazero's version alike (a test binary carries no module
// versions, so wazero says "dev"), which is part of the cache's key.
func buildGuests(dir string) error {
	fixtureWasm = filepath.Join(dir, "fixture.wasm")
	pkgs := map[string]string{"./testdata/fixture": fixtureWasm}
	for _, name := range cacheableExamples {
		exampleWasm[name] = filepath.Join(dir, name+".wasm")
		pkgs["./examples/"+name] = exampleWasm[name]
	}
	errs := make(chan error, len(pkgs))
	for pkg, out := range pkgs {
		go func() { errs <- buildGuest(pkg, out) }()
	}
	var failed []error
	for range pkgs {
		if err := <-errs; err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		return errors.Join(failed...)
	}
	job := []string{filepath.Join(dir, "cache")}
	for _, out := range pkgs {
		job = append(job, out)
	}
	cmd := exec.Command("go", "test", "-race=false", "-count=1", "-run=^$", ".")
	cmd.Env = append(os.Environ(), precompileEnv+"="+strings.Join(job, string(os.PathListSeparator)))
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("precompile guests: %v\n%s", err, b)
	}
	return nil
}

// precompile runs a precompileEnv job; it returns the exit code.
func precompile(job string) int {
	parts := strings.Split(job, string(os.PathListSeparator))
	ctx := context.Background()
	h, err := NewHost(parts[0], nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer h.Close(ctx)
	// wazero compiles a module on one goroutine: the modules go in parallel.
	errs := make(chan error, len(parts)-1)
	for _, m := range parts[1:] {
		go func() { errs <- h.compile(ctx, m) }()
	}
	code := 0
	for range parts[1:] {
		if err := <-errs; err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	return code
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
