package wasmpolicy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/tetratelabs/wazero"
)

// Host loads policy modules. It owns the compilation cache shared by every
// policy it loads, so a module is compiled once per daemon (and, with an
// on-disk cache, once per machine until the module or wazero changes); a
// reload of unchanged modules compiles nothing.
type Host struct {
	cache  wazero.CompilationCache
	logger *slog.Logger

	// Read, when set, reads a module (at most MaxModuleBytes) or a
	// configuration file (MaxConfigBytes) for Load. The daemon sets it to
	// its one reader of trusted files, which refuses anything but a
	// regular file, caps the size, bounds the time, and remembers what it
	// read so the API can never serve it. Nil reads with the same caps but
	// none of the rest: for tests and trusted paths only.
	Read func(ctx context.Context, name string, max int64) ([]byte, error)
}

// Size caps of what Load reads.
const (
	MaxModuleBytes = 64 << 20
	MaxConfigBytes = 4 << 20
)

// read reads name through Read, or plainly with the cap.
func (h *Host) read(ctx context.Context, name string, max int64) ([]byte, error) {
	if h.Read != nil {
		return h.Read(ctx, name, max)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		err = fmt.Errorf("%s is larger than %d bytes", name, max)
	}
	return b, err
}

// NewHost returns a Host caching compiled modules in cacheDir ("" keeps the
// cache in memory only). Logger receives guest log lines, tagged with the
// policy name, and policy failures.
func NewHost(cacheDir string, logger *slog.Logger) (*Host, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &Host{logger: logger}
	if cacheDir == "" {
		h.cache = wazero.NewCompilationCache()
		return h, nil
	}
	if err := ownCacheDir(cacheDir); err != nil {
		return nil, fmt.Errorf("policy compilation cache %s: %w", cacheDir, err)
	}
	cache, err := wazero.NewCompilationCacheWithDir(cacheDir)
	if err != nil {
		return nil, fmt.Errorf("policy compilation cache %s: %w", cacheDir, err)
	}
	h.cache = cache
	return h, nil
}

// Load compiles and starts every policy, in order, and returns them as a
// Set. It is all or nothing: when one policy fails to load, those already
// loaded are closed and the error names the failing policy.
func (h *Host) Load(ctx context.Context, specs []Spec) (*Set, error) {
	set := &Set{logger: h.logger}
	for _, spec := range specs {
		p, err := h.LoadPolicy(ctx, spec)
		if err != nil {
			_ = set.Close(ctx)
			return nil, err
		}
		set.policies = append(set.policies, p)
	}
	return set, nil
}

// runtime is a new wazero runtime on the Host's compilation cache, with
// the memory cap of one policy. Every runtime of the Host is configured
// alike but for the cap, which is not part of a compiled module's cache
// key, so Compile and LoadPolicy share cache entries.
func (h *Host) runtime(ctx context.Context, memoryMiB int) wazero.Runtime {
	return wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
		WithCompilationCache(h.cache).
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(uint32(memoryMiB)*16)) // 64 KiB pages
}

// compile compiles the module at path into the Host's compilation cache
// without starting it, so that a later load of the same module, by this
// Host or by another process on the same cache directory, compiles
// nothing. The package's tests warm their cache with it in a process
// built without the race detector, under which wazero's compiler runs
// some thirty times slower.
func (h *Host) compile(ctx context.Context, path string) error {
	wasm, err := h.read(ctx, path, MaxModuleBytes)
	if err != nil {
		return fmt.Errorf("read module: %w", err)
	}
	rt := h.runtime(ctx, DefaultMemoryMiB)
	defer rt.Close(ctx)
	if _, err := rt.CompileModule(ctx, wasm); err != nil {
		return fmt.Errorf("compile %s: %w", path, err)
	}
	return nil
}

// Close releases the compilation cache. Policies loaded from the Host must
// be closed first.
func (h *Host) Close(ctx context.Context) error { return h.cache.Close(ctx) }

// ownCacheDir makes the cache directory (owner only) or checks the one
// there is (a symlink is followed): it must be the daemon's user's and
// writable by nobody else. The cache holds machine code the daemon maps and
// runs, found by a key anyone who can read the module can compute and
// checked by nothing but a CRC, so whoever could write there could run
// their code in the daemon, past every policy.
func ownCacheDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if uid, ok := ownerOf(fi); ok && uid != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not by the daemon's uid %d", dir, uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by others (mode %v; chmod 700 it)", dir, fi.Mode().Perm())
	}
	return nil
}
