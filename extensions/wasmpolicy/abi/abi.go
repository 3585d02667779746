package abi

// Version is the policy ABI version this SDK builds and the daemon speaks.
// The daemon also loads modules built for MinVersion up to Version (a v1
// module's "allow" is read as pass); a module whose policy_abi_version
// export returns anything else is refused at load. It changes only when
// the exports, the imports or the record layouts change incompatibly, or
// when the meaning of an answer does (v2: deny, pass, grant); appending a
// string field to the request record does not (readers ignore fields they
// do not know).
const Version = 2

// MinVersion is the oldest ABI version the daemon still loads.
const MinVersion = 1

// Exports every policy module must provide (besides its memory).
const (
	ExportMemory     = "memory"
	ExportVersion    = "policy_abi_version" // () -> i32
	ExportAlloc      = "policy_alloc"       // (size i32) -> ptr i32
	ExportInit       = "policy_init"        // (ptr, len i32) -> packed i64
	ExportAuthorize  = "policy_authorize"   // (ptr, len i32) -> packed i64
	ExportInitialize = "_initialize"        // optional WASI reactor start (Go c-shared)
)

// Host functions a module may import, all from module ImportModule.
const (
	ImportModule = "sandbox_agent"
	ImportLog    = "log" // (level i32, ptr i32, len i32)
)

// Log levels for ImportLog; the same numbers as log/slog.
const (
	LevelDebug = -4
	LevelInfo  = 0
	LevelWarn  = 4
	LevelError = 8
)

// Pack joins a guest pointer and length into the i64 that policy_init and
// policy_authorize return: pointer in the high 32 bits, length in the low.
func Pack(ptr, length uint32) uint64 { return uint64(ptr)<<32 | uint64(length) }

// Unpack splits what Pack joined.
func Unpack(v uint64) (ptr, length uint32) { return uint32(v >> 32), uint32(v) }
