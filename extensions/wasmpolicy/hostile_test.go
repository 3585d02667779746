package wasmpolicy

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Policies as an attacker (or a careless author) writes them, hand-written
// so each does exactly one hostile thing. For each: the daemon stays up,
// the request is denied (fail closed), the failure is named, and time and
// memory stay bounded.

// Opcodes the modules below use.
var (
	loopForever = []byte{0x03, 0x40, 0x0c, 0x00, 0x0b} // loop br 0 end
	growForever = []byte{0x03, 0x40, 0x41, 0x01, 0x40, 0x00, 0x1a, 0x0c, 0x00, 0x0b}
)

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// withFunc replaces the ABI function named name in fs.
func withFunc(fs []wasmFunc, f wasmFunc) []wasmFunc {
	out := append([]wasmFunc(nil), fs...)
	for i := range out {
		if out[i].name == f.name {
			out[i] = f
		}
	}
	return out
}

// allocBadOver4K is a policy_alloc body handing out address 1024 for up
// to 4 KiB, and doing bad (an i32 on the stack, or a trap) for more.
func allocBadOver4K(bad []byte) []byte {
	return cat([]byte{0x20, 0x00}, i32Const(4096), []byte{0x4b, 0x04, 0x7f}, bad, []byte{0x05}, i32Const(1024), []byte{0x0b})
}

func TestHostileModulesDeny(t *testing.T) {
	for _, tt := range []struct {
		name  string
		spec  wasmSpec
		spec2 Spec
		log   string
	}{
		{"authorize loops forever", wasmSpec{memMin: 1, funcs: abiFuncs(1, cat(loopForever, i64Const(0)))}, Spec{CallTimeout: 100 * time.Millisecond}, "time limit exceeded"},
		{"authorize grows memory forever", wasmSpec{memMin: 1, funcs: abiFuncs(1, cat(growForever, i64Const(0)))}, Spec{CallTimeout: 100 * time.Millisecond, MemoryMiB: 8}, "time limit exceeded"},
		// authorize (function 3) calls itself with its own arguments.
		{"authorize recurses without end", wasmSpec{memMin: 1, funcs: abiFuncs(1, []byte{0x20, 0x00, 0x20, 0x01, 0x10, 0x03})}, Spec{}, "stack"},
		// policy_alloc is asked again for a record over its first 4 KiB.
		{"alloc answers outside memory", wasmSpec{memMin: 1, funcs: withFunc(abiFuncs(1, i64Const(0)), wasmFunc{"policy_alloc", []byte{tI32}, []byte{tI32}, allocBadOver4K(i32Const(-16)), nil})}, Spec{}, "outside the module's memory"},
		{"alloc traps", wasmSpec{memMin: 1, funcs: withFunc(abiFuncs(1, i64Const(0)), wasmFunc{"policy_alloc", []byte{tI32}, []byte{tI32}, allocBadOver4K(unreachable), nil})}, Spec{}, "policy_alloc"},
		{"unknown verdict", wasmSpec{memMin: 1, funcs: abiFuncs(1, i64Const(16384<<32|8)), data: []wasmData{{16384, []byte{9, 0, 0, 0, 0, 0, 0, 0}}}}, Spec{}, "malformed answer"},
		{"grant from a v1 module", wasmSpec{memMin: 1, funcs: abiFuncs(1, i64Const(16384<<32|8)), data: []wasmData{{16384, []byte{3, 0, 0, 0, 0, 0, 0, 0}}}}, Spec{}, "malformed answer"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.spec2.Path, tt.spec2.Name = writeModule(t, "m", tt.spec.build()), "hostile"
			set, logs := load(t, tt.spec2)
			req := fixtureReq("")
			req.Headers = map[string][]string{"x-big": {strings.Repeat("x", 8192)}}
			for i := range 3 {
				start := time.Now()
				if got := decide(t, set, req); got != failedDecision {
					t.Fatalf("call %d: %+v, want the failed policy's deny", i, got)
				}
				if d := time.Since(start); d > 5*time.Second {
					t.Errorf("call %d took %v", i, d)
				}
			}
			if attrs, ok := logs.find("policy failed"); !ok || !strings.Contains(attrs["err"], tt.log) {
				t.Errorf("failure logged as %v, want it to name %q", attrs, tt.log)
			}
		})
	}
}

func TestHostileModulesRefusedAtLoad(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.wasm")
	if err := os.WriteFile(big, []byte("\x00asm\x01\x00\x00\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 1<<30); err != nil { // 1 GiB, sparse
		t.Fatal(err)
	}
	full := abiFuncs(1, i64Const(0))
	for _, tt := range []struct {
		name string
		path string
		spec Spec
		want []string
	}{
		{"empty file", writeModule(t, "m", nil), Spec{}, []string{"the module file is empty"}},
		{"1 GiB", big, Spec{}, []string{"larger than"}},
		{"not wasm", writeModule(t, "m", []byte("#!/bin/sh\nrm -rf /\n")), Spec{}, []string{"not a WebAssembly module", `"#!/bin/s"`}},
		{"wasm magic, garbage after", writeModule(t, "m", []byte("\x00asm\x01\x00\x00\x00\xff\xff")), Spec{}, []string{"compile"}},
		{"no exports", writeModule(t, "m", wasmSpec{memMin: 1, noMemory: true}.build()), Spec{}, []string{"does not export policy_abi_version"}},
		{"no memory", writeModule(t, "m", wasmSpec{funcs: full, noMemory: true}.build()), Spec{}, []string{"memory"}},
		{"imports a host function that does not exist", writeModule(t, "m", wasmSpec{memMin: 1, funcs: full,
			imports: []wasmImport{{module: "sandbox_agent", name: "exec"}}}.build()), Spec{}, []string{"imports sandbox_agent.exec, which the daemon does not provide"}},
		{"imports another module", writeModule(t, "m", wasmSpec{memMin: 1, funcs: full,
			imports: []wasmImport{{module: "env", name: "system", params: []byte{tI32}, results: []byte{tI32}}}}.build()), Spec{}, []string{"imports env.system, which the daemon does not provide"}},
		{"imports a WASI function that does not exist", writeModule(t, "m", wasmSpec{memMin: 1, funcs: full,
			imports: []wasmImport{{module: "wasi_snapshot_preview1", name: "sock_open"}}}.build()), Spec{}, []string{"imports wasi_snapshot_preview1.sock_open, which"}},
		{"imports the log function with another signature", writeModule(t, "m", wasmSpec{memMin: 1, funcs: full,
			imports: []wasmImport{{module: "sandbox_agent", name: "log", params: []byte{tI64}}}}.build()), Spec{}, []string{"imports sandbox_agent.log with the wrong signature"}},
		{"4 GiB of memory", writeModule(t, "m", wasmSpec{memMin: 65536, funcs: full}.build()), Spec{}, []string{"memory"}},
		{"more memory than its limit", writeModule(t, "m", wasmSpec{memMin: 17, funcs: full}.build()), Spec{MemoryMiB: 1}, []string{"memory"}},
		{"init loops forever", writeModule(t, "m", wasmSpec{memMin: 1, funcs: withFunc(full, wasmFunc{"policy_init", []byte{tI32, tI32}, []byte{tI64}, cat(loopForever, i64Const(0)), nil})}.build()),
			Spec{InitTimeout: 200 * time.Millisecond}, []string{"policy_init", "time limit exceeded"}},
		{"init recurses", writeModule(t, "m", wasmSpec{memMin: 1, funcs: withFunc(full, wasmFunc{"policy_init", []byte{tI32, tI32}, []byte{tI64}, []byte{0x20, 0x00, 0x20, 0x01, 0x10, 0x02}, nil})}.build()),
			Spec{}, []string{"policy_init", "stack"}},
		{"version loops forever", writeModule(t, "m", wasmSpec{memMin: 1, funcs: withFunc(full, wasmFunc{"policy_abi_version", nil, []byte{tI32}, cat(loopForever, i32Const(1)), nil})}.build()),
			Spec{InitTimeout: 200 * time.Millisecond}, []string{"policy_abi_version", "time limit exceeded"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.spec.Path, tt.spec.Name = tt.path, "hostile"
			start := time.Now()
			_, err := testHost(t).Load(context.Background(), []Spec{tt.spec})
			if err == nil {
				t.Fatal("loaded")
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("refused after %v", d)
			}
			for _, w := range append(tt.want, "policy hostile") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// An instance whose answer could not be read is thrown away like one that
// trapped: its state is unknown. This module answers garbage once, then
// passes everything from the same instance; a fresh instance answers
// garbage again, so every call must fail closed.
func TestUnreadableAnswerDiscardsInstance(t *testing.T) {
	for _, tt := range []struct {
		name    string
		garbage []byte // an answer record at 20480
		version int32
	}{
		{"unknown verdict", []byte{9, 0, 0, 0, 0, 0, 0, 0}, 2},
		{"short record", []byte{1, 0, 0}, 2},
		{"vary block past the end", []byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255}, 2},
		{"grant from a v1 module", []byte{3, 0, 0, 0, 0, 0, 0, 0}, 1},
		// Not garbage: the guest says it could not decide. ABI.md: the
		// instance is closed and never reused all the same.
		{"error verdict", []byte{2, 0, 0, 0, 0, 0, 0, 0}, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// global 0 == 0: set it, answer the garbage; else pass.
			authorize := cat(
				[]byte{0x23, 0x00, 0x04, tI64},  // global.get 0; if (result i64)
				i64Const(16384<<32|8),           // the pass at 16384
				[]byte{0x05},                    // else
				i32Const(1), []byte{0x24, 0x00}, // global.set 0 = 1
				i64Const(20480<<32|int64(len(tt.garbage))),
				[]byte{0x0b},
			)
			m := wasmSpec{memMin: 1, globals: 1, funcs: abiFuncs(tt.version, authorize), data: []wasmData{
				{16384, []byte{1, 0, 0, 0, 0, 0, 0, 0}}, {20480, tt.garbage},
			}}
			set, _ := load(t, Spec{Path: writeModule(t, "m", m.build()), Instances: 1})
			for i := range 3 {
				if got := decide(t, set, fixtureReq("")); got != failedDecision {
					t.Fatalf("call %d: %+v: an instance that answered garbage was used again", i, got)
				}
			}
			// The same with calls in parallel on a pool of several.
			set, _ = load(t, Spec{Path: writeModule(t, "m", m.build()), Instances: 3})
			var wg sync.WaitGroup
			for range 6 {
				wg.Go(func() {
					for range 10 {
						if got, err := set.Authorize(context.Background(), fixtureReq("")); err != nil || got.Verdict != domain.Deny {
							t.Errorf("in parallel: %+v, %v", got, err)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// allocated is how many bytes the heap allocated while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// An answer as large as the guest's memory costs the host what it keeps
// of it (a message or principal of 1 KiB, a bounded vary block), not a
// copy of it per request: a policy answering 24 MiB made every request
// allocate 24 MiB, and one answering a vary block of 6 million empty
// header names made the host build (and keep, for the cache) a slice of
// them, 100 MiB per request.
func TestHugeAnswersCostTheHostLittle(t *testing.T) {
	const size = 24 << 20
	vary := []byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} // pass, vary; fields 0
	vary = append(vary, le32((size-len(vary)-8)/4)...) // H names, each (len 0)
	vary = append(vary, 0, 0, 0, 0)                    // Q 0
	for _, tt := range []struct {
		name   string
		answer []byte
		want   domain.Decision
	}{
		{"deny with a 24 MiB message", []byte{0, 0, 0, 0, 0, 0, 0, 0}, domain.Decision{Status: 403}},
		{"grant with a 24 MiB principal", []byte{3, 0, 0, 0, 0, 0, 0, 0}, domain.Decision{Verdict: domain.Grant}},
		{"pass with a 24 MiB vary block", vary, domain.Decision{Verdict: domain.Pass}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := wasmSpec{memMin: 2 * size >> 16, funcs: abiFuncs(2, i64Const(16384<<32|size)), data: []wasmData{{16384, tt.answer}}}
			set, _ := load(t, Spec{Path: writeModule(t, "m", m.build()), Instances: 1, MemoryMiB: 64})
			var got domain.Decision
			decide(t, set, fixtureReq("")) // the instance's first call
			n := allocated(func() {
				for range 4 {
					got = decide(t, set, fixtureReq(""))
				}
			})
			if got.Verdict != tt.want.Verdict || (tt.want.Status != 0 && got.Status != tt.want.Status) ||
				len(got.Message) > maxMessage || len(got.Principal) > maxMessage {
				t.Errorf("decision %v %d, message %d bytes, principal %d bytes", got.Verdict, got.Status, len(got.Message), len(got.Principal))
			}
			if n > 4<<20 {
				t.Errorf("4 decisions allocated %d MiB", n>>20)
			}
		})
	}
}

func le32(v int) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }

// A policy logging without end costs a bounded number of records per
// call, and one more saying how many it dropped; the decision is made.
func TestLogFloodIsBounded(t *testing.T) {
	set, logs := load(t, Spec{Path: fixtureWasm, Name: "fx"})
	for i := range 2 {
		logs.mu.Lock()
		logs.records = nil
		logs.mu.Unlock()
		if got := decide(t, set, fixtureReq("flood")); got != allow {
			t.Fatalf("call %d: %+v", i, got)
		}
		logs.mu.Lock()
		n := len(logs.records)
		logs.mu.Unlock()
		if n > maxLogLines+1 {
			t.Errorf("call %d logged %d records", i, n)
		}
		attrs, ok := logs.find("policy log lines dropped")
		if want := 1<<20 + 1<<16 - maxLogLines; !ok || attrs["policy"] != "fx" || attrs["dropped"] != strconv.Itoa(want) {
			t.Errorf("call %d: dropped lines %v, want %d", i, attrs, want)
		}
	}
}

// A policy's log line cannot forge the daemon's own records: control
// characters are escaped.
func TestGuestLogsEscapeControlCharacters(t *testing.T) {
	set, logs := load(t, Spec{Path: fixtureWasm, Name: "fx"})
	decide(t, set, fixtureReq("forge"))
	for _, want := range []string{`ok\n12:00:00 INF auth principal=admin`, `a\rb\x1b[2Jc\x00d`} {
		if _, ok := logs.find(want); !ok {
			logs.mu.Lock()
			var got []string
			for _, r := range logs.records {
				got = append(got, strconv.Quote(r.Message))
			}
			logs.mu.Unlock()
			t.Errorf("no record %q among %v", want, got)
		}
	}
}
