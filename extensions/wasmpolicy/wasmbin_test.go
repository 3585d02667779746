package wasmpolicy

// A tiny WebAssembly binary writer, for modules the Go toolchain cannot
// produce: ones missing an export, built for another ABI version, or
// trapping with a real wasm trap (unreachable) rather than a Go panic.

const (
	tI32 = 0x7f
	tI64 = 0x7e
)

// wasmFunc is one exported function; body is its code without the final
// end, locals its local variables' types (after the parameters).
type wasmFunc struct {
	name            string
	params, results []byte
	body            []byte
	locals          []byte
}

// wasmImport is one imported function; imports take the first function
// indices, before the module's own.
type wasmImport struct {
	module, name    string
	params, results []byte
}

// wasmSpec is a module: imported and exported functions, one memory of
// memMin pages (at most memMax when set) exported as "memory" unless
// noMemory, mutable i32 globals initialised to 0, and data segments
// (offset, bytes).
type wasmSpec struct {
	imports        []wasmImport
	funcs          []wasmFunc
	memMin, memMax uint32
	hasMax         bool
	noMemory       bool
	globals        int
	data           []wasmData
}

type wasmData struct {
	offset uint32
	bytes  []byte
}

func uleb(v uint64) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			out = append(out, b|0x80)
			continue
		}
		return append(out, b)
	}
}

func sleb(v int64) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && b&0x40 == 0) || (v == -1 && b&0x40 != 0) {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}

func vec(items ...[]byte) []byte {
	out := uleb(uint64(len(items)))
	for _, it := range items {
		out = append(out, it...)
	}
	return out
}

func section(id byte, body []byte) []byte {
	return append(append([]byte{id}, uleb(uint64(len(body)))...), body...)
}

func name(s string) []byte { return append(uleb(uint64(len(s))), s...) }

func funcType(params, results []byte) []byte {
	return append(append([]byte{0x60}, vec(bytesOf(params)...)...), vec(bytesOf(results)...)...)
}

// wasmModule builds a module with one memory page exported as "memory"
// and the given exported functions.
func wasmModule(funcs ...wasmFunc) []byte { return wasmSpec{funcs: funcs, memMin: 1}.build() }

func (m wasmSpec) build() []byte {
	var types, imports, fidx, exports, codes [][]byte
	for i, im := range m.imports {
		types = append(types, funcType(im.params, im.results))
		imports = append(imports, append(append(name(im.module), name(im.name)...), append([]byte{0x00}, uleb(uint64(i))...)...))
	}
	for i, f := range m.funcs {
		ti := len(m.imports) + i
		types = append(types, funcType(f.params, f.results))
		fidx = append(fidx, uleb(uint64(ti)))
		if f.name != "" {
			exports = append(exports, append(name(f.name), append([]byte{0x00}, uleb(uint64(ti))...)...))
		}
		var locals [][]byte
		for _, l := range f.locals {
			locals = append(locals, []byte{0x01, l})
		}
		body := append(vec(locals...), f.body...)
		body = append(body, 0x0b)
		codes = append(codes, append(uleb(uint64(len(body))), body...))
	}
	if !m.noMemory {
		exports = append(exports, append(name("memory"), 0x02, 0x00))
	}
	out := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	if len(types) > 0 {
		out = append(out, section(1, vec(types...))...)
	}
	if len(imports) > 0 {
		out = append(out, section(2, vec(imports...))...)
	}
	if len(fidx) > 0 {
		out = append(out, section(3, vec(fidx...))...)
	}
	if !m.noMemory {
		limits := append([]byte{0x00}, uleb(uint64(m.memMin))...)
		if m.hasMax {
			limits = append(append([]byte{0x01}, uleb(uint64(m.memMin))...), uleb(uint64(m.memMax))...)
		}
		out = append(out, section(5, vec(limits))...)
	}
	if m.globals > 0 {
		var gs [][]byte
		for range m.globals {
			gs = append(gs, append([]byte{tI32, 0x01}, append(i32Const(0), 0x0b)...))
		}
		out = append(out, section(6, vec(gs...))...)
	}
	if len(exports) > 0 {
		out = append(out, section(7, vec(exports...))...)
	}
	if len(codes) > 0 {
		out = append(out, section(10, vec(codes...))...)
	}
	if len(m.data) > 0 {
		var ds [][]byte
		for _, d := range m.data {
			seg := append([]byte{0x00}, append(i32Const(int32(d.offset)), 0x0b)...)
			seg = append(seg, uleb(uint64(len(d.bytes)))...)
			ds = append(ds, append(seg, d.bytes...))
		}
		out = append(out, section(11, vec(ds...))...)
	}
	return out
}

func bytesOf(b []byte) [][]byte {
	out := make([][]byte, len(b))
	for i := range b {
		out[i] = b[i : i+1]
	}
	return out
}

func i32Const(v int32) []byte { return append([]byte{0x41}, sleb(int64(v))...) }
func i64Const(v int64) []byte { return append([]byte{0x42}, sleb(v)...) }

var unreachable = []byte{0x00}

// abiFuncs is a complete, hand-written v1 policy whose version export
// returns version and whose authorize export runs authorize. Init succeeds
// (answers length 0); alloc hands out address 1024.
func abiFuncs(version int32, authorize []byte) []wasmFunc {
	return []wasmFunc{
		{"policy_abi_version", nil, []byte{tI32}, i32Const(version), nil},
		{"policy_alloc", []byte{tI32}, []byte{tI32}, i32Const(1024), nil},
		{"policy_init", []byte{tI32, tI32}, []byte{tI64}, i64Const(0), nil},
		{"policy_authorize", []byte{tI32, tI32}, []byte{tI64}, authorize, nil},
	}
}
