package wasmpolicy

// A tiny WebAssembly binary writer, for modules the Go toolchain cannot
// produce: ones missing an export, built for another ABI version, or
// trapping with a real wasm trap (unreachable) rather than a Go panic.

const (
	tI32 = 0x7f
	tI64 = 0x7e
)

// wasmFunc is one exported function; body is its code without locals and
// without the final end.
type wasmFunc struct {
	name            string
	params, results []byte
	body            []byte
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

// wasmModule builds a module with one memory page exported as "memory"
// and the given exported functions.
func wasmModule(funcs ...wasmFunc) []byte {
	var types, fidx, exports, codes [][]byte
	for i, f := range funcs {
		types = append(types, append(append([]byte{0x60}, vec(bytesOf(f.params)...)...), vec(bytesOf(f.results)...)...))
		fidx = append(fidx, uleb(uint64(i)))
		exports = append(exports, append(name(f.name), append([]byte{0x00}, uleb(uint64(i))...)...))
		body := append([]byte{0x00}, f.body...) // no locals
		body = append(body, 0x0b)
		codes = append(codes, append(uleb(uint64(len(body))), body...))
	}
	exports = append(exports, append(name("memory"), 0x02, 0x00))
	out := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	out = append(out, section(1, vec(types...))...)
	out = append(out, section(3, vec(fidx...))...)
	out = append(out, section(5, vec([]byte{0x00, 0x01}))...) // min 1 page, no max
	out = append(out, section(7, vec(exports...))...)
	out = append(out, section(10, vec(codes...))...)
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
		{"policy_abi_version", nil, []byte{tI32}, i32Const(version)},
		{"policy_alloc", []byte{tI32}, []byte{tI32}, i32Const(1024)},
		{"policy_init", []byte{tI32, tI32}, []byte{tI64}, i64Const(0)},
		{"policy_authorize", []byte{tI32, tI32}, []byte{tI64}, authorize},
	}
}
