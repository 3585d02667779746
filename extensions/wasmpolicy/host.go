package wasmpolicy

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/tetratelabs/wazero"
)

// Host loads policy modules. It owns the compilation cache shared by every
// policy it loads, so a module is compiled once per daemon (and, with an
// on-disk cache, once per machine until the module or wazero changes); a
// reload of unchanged modules compiles nothing.
type Host struct {
	cache  wazero.CompilationCache
	logger *slog.Logger
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

// Close releases the compilation cache. Policies loaded from the Host must
// be closed first.
func (h *Host) Close(ctx context.Context) error { return h.cache.Close(ctx) }
