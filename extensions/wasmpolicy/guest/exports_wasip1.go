//go:build wasip1

package guest

import (
	"unsafe"

	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/abi"
)

// in is the buffer the host writes requests into (see policy_alloc); out
// holds the last answer until the host has read it, and is reused. Go's
// collector does not move objects, so their addresses stay valid while
// referenced.
var in, out []byte

//go:wasmexport policy_abi_version
func exportVersion() uint32 { return abi.Version }

//go:wasmexport policy_alloc
func exportAlloc(size uint32) uint32 {
	if int(size) > cap(in) {
		in = make([]byte, size)
	}
	in = in[:cap(in)]
	if len(in) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(&in[0])))
}

//go:wasmexport policy_init
func exportInit(ptr, size uint32) uint64 { return answer(handleInit(input(ptr, size))) }

//go:wasmexport policy_authorize
func exportAuthorize(ptr, size uint32) uint64 {
	return answer(handleAuthorize(input(ptr, size), out[:0]))
}

// input returns the bytes the host wrote at ptr, which must lie in the
// buffer policy_alloc handed out; anything else reads as empty.
func input(ptr, size uint32) []byte {
	if size == 0 || len(in) == 0 {
		return nil
	}
	off := uint64(ptr) - uint64(uintptr(unsafe.Pointer(&in[0])))
	if uint64(ptr) < uint64(uintptr(unsafe.Pointer(&in[0]))) || off+uint64(size) > uint64(len(in)) {
		return nil
	}
	return in[off : off+uint64(size)]
}

func answer(b []byte) uint64 {
	out = b
	if len(b) == 0 {
		return 0
	}
	return abi.Pack(uint32(uintptr(unsafe.Pointer(&b[0]))), uint32(len(b)))
}

//go:wasmimport sandbox_agent log
func hostLog(level int32, ptr, size uint32)

func writeLog(level int, msg string) {
	if msg == "" {
		return
	}
	b := unsafe.Slice(unsafe.StringData(msg), len(msg))
	hostLog(int32(level), uint32(uintptr(unsafe.Pointer(&b[0]))), uint32(len(b)))
}
