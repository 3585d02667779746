package wasmpolicy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/abi"
)

// Policy is one loaded module with its pool of ready instances. Each policy
// has its own wazero runtime, so its memory limit and its log tag are its
// own; compiled code comes from the Host's shared cache.
type Policy struct {
	spec   Spec
	config []byte
	logger *slog.Logger
	rt     wazero.Runtime
	code   wazero.CompiledModule
	modCfg wazero.ModuleConfig
	pool   *pool
	cache  decisionCache
	// calls counts module calls to policy_authorize (tests use it to tell
	// a cached decision from a computed one).
	calls atomic.Int64
}

// Name is the policy's name, as used in logs.
func (p *Policy) Name() string { return p.spec.Name }

// LoadPolicy compiles one module, checks its exports and ABI version, and
// starts a first instance, which also configures the policy: a module that
// cannot serve is refused here rather than on the first request.
func (h *Host) LoadPolicy(ctx context.Context, spec Spec) (*Policy, error) {
	spec.fill()
	fail := func(err error) (*Policy, error) { return nil, fmt.Errorf("policy %s: %w", spec.Name, err) }
	wasm, err := h.read(ctx, spec.Path, MaxModuleBytes)
	if err != nil {
		return fail(fmt.Errorf("read module: %w", err))
	}
	config, err := spec.config(ctx, h)
	if err != nil {
		return fail(err)
	}
	if config == nil {
		config = []byte("null")
	}
	p := &Policy{spec: spec, config: config, logger: h.logger.With("policy", spec.Name)}
	p.rt = h.runtime(ctx, spec.MemoryMiB)
	if err := p.start(ctx, wasm); err != nil {
		_ = p.rt.Close(ctx)
		return fail(err)
	}
	return p, nil
}

func (p *Policy) start(ctx context.Context, wasm []byte) error {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, p.rt); err != nil {
		return fmt.Errorf("wasi: %w", err)
	}
	if _, err := p.rt.NewHostModuleBuilder(abi.ImportModule).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(p.hostLog),
		[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, nil).
		Export(abi.ImportLog).
		Instantiate(ctx); err != nil {
		return fmt.Errorf("host module: %w", err)
	}
	switch {
	case len(wasm) == 0:
		return errors.New("the module file is empty")
	case !bytes.HasPrefix(wasm, []byte("\x00asm")):
		return fmt.Errorf("not a WebAssembly module (one starts with \"\\x00asm\"; this starts with %q)", wasm[:min(len(wasm), 8)])
	}
	code, err := p.rt.CompileModule(ctx, wasm)
	if err != nil {
		return fmt.Errorf("compile: %w", err)
	}
	p.code = code
	if err := checkExports(code); err != nil {
		return err
	}
	if err := p.checkImports(code); err != nil {
		return err
	}
	// Clocks and random source are set per instance (newInstance), which
	// notes their use for the decision cache.
	p.modCfg = wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(abi.ExportInitialize)
	p.pool = newPool(p.spec.Instances, p.newInstance)
	// The first instance proves the module can serve and stays in the pool.
	in, err := p.newInstance(ctx)
	if err != nil {
		return err
	}
	p.pool.seed(in)
	return nil
}

// checkExports refuses a module that lacks part of the ABI, before running
// any of its code.
func checkExports(code wazero.CompiledModule) error {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	want := []struct {
		name            string
		params, results []api.ValueType
	}{
		{abi.ExportVersion, nil, []api.ValueType{i32}},
		{abi.ExportAlloc, []api.ValueType{i32}, []api.ValueType{i32}},
		{abi.ExportInit, []api.ValueType{i32, i32}, []api.ValueType{i64}},
		{abi.ExportAuthorize, []api.ValueType{i32, i32}, []api.ValueType{i64}},
	}
	fns := code.ExportedFunctions()
	for _, w := range want {
		fn, ok := fns[w.name]
		if !ok {
			return fmt.Errorf("module does not export %s (not built with the policy SDK for ABI v%d?)", w.name, abi.Version)
		}
		if !sameTypes(fn.ParamTypes(), w.params) || !sameTypes(fn.ResultTypes(), w.results) {
			return fmt.Errorf("export %s has the wrong signature", w.name)
		}
	}
	if _, ok := code.ExportedMemories()[abi.ExportMemory]; !ok {
		return fmt.Errorf("module does not export its memory as %q", abi.ExportMemory)
	}
	return nil
}

// checkImports refuses a module importing a function the host does not
// provide, or with another signature, or a memory, before running any of
// its code and with a message naming it (instantiating it said "trap:
// module[env] not instantiated").
func (p *Policy) checkImports(code wazero.CompiledModule) error {
	for _, fn := range code.ImportedFunctions() {
		mod, name, _ := fn.Import()
		var def api.FunctionDefinition
		if host := p.rt.Module(mod); host != nil {
			def = host.ExportedFunctionDefinitions()[name]
		}
		if def == nil {
			return fmt.Errorf("module imports %s.%s, which the daemon does not provide (a policy may import %s.%s and WASI preview 1)", mod, name, abi.ImportModule, abi.ImportLog)
		}
		if !sameTypes(def.ParamTypes(), fn.ParamTypes()) || !sameTypes(def.ResultTypes(), fn.ResultTypes()) {
			return fmt.Errorf("module imports %s.%s with the wrong signature", mod, name)
		}
	}
	for _, m := range code.ImportedMemories() {
		mod, name, _ := m.Import()
		return fmt.Errorf("module imports a memory (%s.%s); a policy defines and exports its own", mod, name)
	}
	return nil
}

func sameTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// errPolicyClosed is returned by calls that reach a policy being closed.
var errPolicyClosed = errors.New("policy closed")

// decide runs the policy on one encoded request. An error means the policy
// failed (its fail mode decides what that means), not that it denied.
//
// A decision the policy declared cacheable is remembered (decisionCache)
// and reused for later requests alike in what it read.
//
// unknown names fields of the record (a bit per abi.Field*) whose values
// are not known yet, left empty: ok is then true only when the decision
// is known not to depend on them, because the policy declared it
// cacheable and did not read them (the promise the decision cache rests
// on). A failure is not an answer in that case: ok is false and err nil,
// and the caller asks again with the whole request. With unknown 0, ok is
// true whenever err is nil.
func (p *Policy) decide(ctx context.Context, req []byte, unknown uint32) (d domain.Decision, ok bool, err error) {
	rec, err := abi.ParseRequest(req)
	if err != nil {
		return domain.Decision{}, false, err // not a record AppendRequest made
	}
	if d, ok := p.cache.lookup(rec, unknown); ok {
		return d, true, nil
	}
	if unknown != 0 && p.spec.NoCache {
		return domain.Decision{}, false, nil // its word on what it read is not taken
	}
	in, err := p.pool.get(ctx)
	if err != nil {
		return domain.Decision{}, false, err
	}
	p.calls.Add(1)
	d, cacheable, err := in.authorize(ctx, req, p.spec.CallTimeout)
	ok = err == nil
	if ok && cacheable != nil && !p.spec.NoCache {
		p.cache.store(rec, cacheable, d) // before the instance is handed on
	}
	if unknown != 0 {
		vary, declared := abi.ParseVary(cacheable) // read before the instance is handed on
		ok = ok && declared && vary.Fields&unknown == 0
		err = nil // a failure: the whole request will be asked, and fail there
	}
	if in.broken {
		p.pool.discard(in)
	} else {
		p.pool.put(in)
	}
	return d, ok, err
}

// Close stops every instance and the policy's runtime. Calls still running
// fail; the Set waits for them before closing its policies.
func (p *Policy) Close(ctx context.Context) error {
	if p.pool != nil {
		p.pool.close()
	}
	return p.rt.Close(ctx)
}
