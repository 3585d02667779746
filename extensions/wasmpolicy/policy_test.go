package wasmpolicy

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// fixtureReq is a request asking the fixture for mode.
func fixtureReq(mode string) domain.AuthRequest {
	r := domain.AuthRequest{Method: "GET", Route: "/v1/health", OperationID: "get_v1_health", Path: "/v1/health"}
	if mode != "" {
		r.Headers = map[string][]string{"x-fixture": {mode}}
	}
	return r
}

func decide(t *testing.T, a interface {
	Authorize(context.Context, domain.AuthRequest) (domain.Decision, error)
}, req domain.AuthRequest) domain.Decision {
	t.Helper()
	d, err := a.Authorize(context.Background(), req)
	if err != nil {
		t.Fatalf("Authorize: %v", err)
	}
	d.By = "" // tested on its own in TestChain
	return d
}

var allow = domain.Decision{Verdict: domain.Pass}

func TestDecisions(t *testing.T) {
	set, _ := load(t, Spec{Path: fixtureWasm})
	tests := []struct {
		mode string
		want domain.Decision
	}{
		{"", allow},
		{"allow", allow},
		{"deny", domain.Decision{Status: 451, Message: "fixture says no"}},
		{"status0", domain.Decision{Status: 403, Message: "no status"}},
		{"nonsense", domain.Decision{Status: 400, Message: "unknown fixture mode nonsense"}},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			if got := decide(t, set, fixtureReq(tt.mode)); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// The guest sees exactly the request the host was given.
func TestRequestReachesGuest(t *testing.T) {
	set, _ := load(t, Spec{Path: fixtureWasm})
	req := domain.AuthRequest{
		Method: "POST", Route: "/v1/acp/{server_id}", OperationID: "post_v1_acp",
		Path: "/v1/acp/s1", Query: map[string][]string{"agent": {"mock"}, "x": {"1", "2"}},
		Headers: map[string][]string{
			"x-fixture":     {"echo"},
			"authorization": {"Bearer tok"},
			"x-multi":       {"a", "b"},
			"x-unicode":     {"héllo \"quoted\" \u2028"},
		},
		RemoteAddr: "127.0.0.1:1234", ServerID: "s1", Agent: "mock",
		RPC: &domain.RPCInfo{Kind: "request", ID: `"7"`, Method: "terminal/create"},
	}
	d := decide(t, set, req)
	var got domain.AuthRequest
	if err := json.Unmarshal([]byte(d.Message), &got); err != nil {
		t.Fatalf("echo %q: %v", d.Message, err)
	}
	if !reflect.DeepEqual(got, req) {
		t.Errorf("guest saw %+v\nwant %+v", got, req)
	}
}

func TestConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "fixture.json")
	doc := `{"default": "config", "extra": [1, 2]}`
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	set, _ := load(t, Spec{Path: fixtureWasm, ConfigPath: cfg})
	if got := decide(t, set, fixtureReq("")); got.Message != doc {
		t.Errorf("policy got config %q, want %q", got.Message, doc)
	}

	t.Run("none is null", func(t *testing.T) {
		set, _ := load(t, Spec{Path: fixtureWasm})
		if got := decide(t, set, fixtureReq("config")); got.Message != "null" {
			t.Errorf("policy got config %q, want null", got.Message)
		}
	})
	t.Run("refused", func(t *testing.T) {
		_, err := testHost(t).Load(context.Background(), []Spec{{Path: fixtureWasm, Name: "picky", Config: []byte(`{"initError":"tokens missing"}`)}})
		if err == nil || !strings.Contains(err.Error(), "policy picky") || !strings.Contains(err.Error(), "tokens missing") {
			t.Errorf("got %v, want the policy's configure error", err)
		}
	})
	t.Run("unreadable", func(t *testing.T) {
		_, err := testHost(t).Load(context.Background(), []Spec{{Path: fixtureWasm, ConfigPath: filepath.Join(dir, "missing.json")}})
		if err == nil || !strings.Contains(err.Error(), "read config") {
			t.Errorf("got %v, want a read error", err)
		}
	})
}

// A failing policy denies (fail closed), its instance is thrown away, and
// the next request is decided normally.
func TestFailuresDenyAndRecover(t *testing.T) {
	for _, tt := range []struct {
		mode    string
		spec    Spec
		logHint string
	}{
		{"panic", Spec{}, "trap"},
		// Short enough to keep the test fast, long enough that the next,
		// normal call cannot miss it on a loaded machine.
		{"loop", Spec{CallTimeout: 250 * time.Millisecond}, "time limit exceeded"},
		// The relaxed time limit: the memory limit is what stops it.
		{"hog", Spec{MemoryMiB: 32}, "trap"},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			tt.spec.Path, tt.spec.Name = fixtureWasm, "fx"
			set, logs := load(t, tt.spec)
			for i := range 2 {
				if got := decide(t, set, fixtureReq(tt.mode)); got != failedDecision {
					t.Fatalf("call %d: got %+v, want %+v", i, got, failedDecision)
				}
				if got := decide(t, set, fixtureReq("deny")); got.Status != 451 {
					t.Fatalf("after failure %d: got %+v, want the fixture's deny", i, got)
				}
			}
			attrs, ok := logs.find("policy failed")
			if !ok || attrs["policy"] != "fx" || !strings.Contains(attrs["err"], tt.logHint) {
				t.Errorf("failure log %v, want policy=fx and err containing %q", attrs, tt.logHint)
			}
		})
	}
}

func TestPanicStderrIsLogged(t *testing.T) {
	set, logs := load(t, Spec{Path: fixtureWasm, Name: "fx"})
	decide(t, set, fixtureReq("panic"))
	attrs, ok := logs.find("panic: fixture panic")
	if !ok || attrs["policy"] != "fx" || attrs["stream"] != "stderr" || attrs["level"] != "WARN" {
		t.Errorf("panic line: %v, %v", attrs, ok)
	}
}

func TestFailOpen(t *testing.T) {
	set, logs := load(t, Spec{Path: fixtureWasm, FailOpen: true})
	if got := decide(t, set, fixtureReq("panic")); got != allow {
		t.Errorf("fail=open policy that panicked: got %+v, want allow", got)
	}
	if attrs, ok := logs.find("policy failed"); !ok || attrs["fail_open"] != "true" {
		t.Errorf("failure not logged: %v", attrs)
	}
	if got := decide(t, set, fixtureReq("deny")); got.Allowed() {
		t.Error("fail=open policy's own deny was ignored")
	}
}

func TestGuestLogs(t *testing.T) {
	set, logs := load(t, Spec{Path: fixtureWasm, Name: "chatty"})
	req := fixtureReq("log")
	req.Path = "/v1/hello"
	decide(t, set, req)
	if attrs, ok := logs.find("hello from /v1/hello"); !ok || attrs["policy"] != "chatty" || attrs["level"] != "INFO" {
		t.Errorf("host-function log line: %v, %v", attrs, ok)
	}
	if attrs, ok := logs.find("stderr line"); !ok || attrs["policy"] != "chatty" || attrs["stream"] != "stderr" {
		t.Errorf("stderr line: %v, %v", attrs, ok)
	}
}

// The guest's clock is the real one (an HMAC expiry check depends on it).
func TestGuestClock(t *testing.T) {
	set, _ := load(t, Spec{Path: fixtureWasm})
	got, err := strconv.ParseInt(decide(t, set, fixtureReq("clock")).Message, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if now := time.Now().Unix(); got < now-60 || got > now+60 {
		t.Errorf("guest time %d, host time %d", got, now)
	}
}

func TestFirstDenyWins(t *testing.T) {
	h := testHost(t)
	set, err := h.Load(context.Background(), []Spec{
		{Path: fixtureWasm, Name: "allows", CallTimeout: relaxed},
		{Path: fixtureWasm, Name: "denies", Config: []byte(`{"default":"deny"}`), CallTimeout: relaxed},
		// Never reached for a request the second one denies; it would
		// fail closed with a different decision if it were.
		{Path: fixtureWasm, Name: "loops", Config: []byte(`{"default":"loop"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close(context.Background())
	if got := decide(t, set, fixtureReq("")); got.Status != 451 {
		t.Errorf("got %+v, want the second policy's deny", got)
	}

	// Later policies do run when earlier ones allow.
	set2, err := h.Load(context.Background(), []Spec{
		{Path: fixtureWasm, Name: "allows", CallTimeout: relaxed},
		{Path: fixtureWasm, Name: "denies", Config: []byte(`{"default":"status0"}`), CallTimeout: relaxed},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer set2.Close(context.Background())
	if got := decide(t, set2, fixtureReq("")); got.Message != "no status" {
		t.Errorf("got %+v, want the second policy's deny", got)
	}
}

func writeModule(t *testing.T, name string, wasm []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name+".wasm")
	if err := os.WriteFile(p, wasm, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadRefuses(t *testing.T) {
	full := abiFuncs(1, i64Const(0))
	tests := []struct {
		name string
		wasm []byte
		want []string
	}{
		{"missing export", wasmModule(full[:3]...), []string{"does not export policy_authorize"}},
		{"wrong signature", wasmModule(append(full[:3:3], wasmFunc{"policy_authorize", []byte{tI32}, []byte{tI64}, i64Const(0), nil})...), []string{"policy_authorize has the wrong signature"}},
		{"unknown ABI version", wasmModule(abiFuncs(3, i64Const(0))...), []string{"ABI v3", "ABI v1 to v2"}},
		{"ABI version 0", wasmModule(abiFuncs(0, i64Const(0))...), []string{"ABI v0", "ABI v1 to v2"}},
		{"not wasm", []byte("hello"), []string{"not a WebAssembly module"}},
		{"version traps", wasmModule(append([]wasmFunc{{"policy_abi_version", nil, []byte{tI32}, unreachable, nil}}, full[1:]...)...), []string{"policy_abi_version", "unreachable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := testHost(t).Load(context.Background(), []Spec{{Path: writeModule(t, "m", tt.wasm), Name: "bad"}})
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range append(tt.want, "policy bad") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		if _, err := testHost(t).Load(context.Background(), []Spec{{Path: "/nonexistent.wasm"}}); err == nil {
			t.Error("loaded")
		}
	})
	t.Run("one bad spec fails the set", func(t *testing.T) {
		_, err := testHost(t).Load(context.Background(), []Spec{{Path: fixtureWasm}, {Path: writeModule(t, "v3", wasmModule(abiFuncs(3, i64Const(0))...))}})
		if err == nil || !strings.Contains(err.Error(), "policy v3") {
			t.Errorf("got %v", err)
		}
	})
}

// A hand-written module's real wasm trap (unreachable) and an answer
// pointing outside memory are failures; a zeroed answer is a plain deny.
func TestHandWrittenModules(t *testing.T) {
	tests := []struct {
		name      string
		authorize []byte
		want      domain.Decision
	}{
		{"unreachable", unreachable, failedDecision},
		{"answer out of bounds", i64Const(0x7FFF0000<<32 | 8), failedDecision},
		{"short answer", i64Const(2048<<32 | 3), failedDecision},
		{"zeroed answer", i64Const(2048<<32 | 8), domain.Decision{Status: 403, Message: "denied by policy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, _ := load(t, Spec{Path: writeModule(t, "m", wasmModule(abiFuncs(1, tt.authorize)...))})
			for range 2 {
				if got := decide(t, set, fixtureReq("")); got != tt.want {
					t.Errorf("got %+v, want %+v", got, tt.want)
				}
			}
		})
	}
}

// A policy that traps on 1% of requests under concurrent load: every other
// decision is still right, and the trapped ones fail closed.
func TestFlakyUnderLoad(t *testing.T) {
	set, _ := load(t, Spec{Path: fixtureWasm, Config: []byte(`{"default":"flaky"}`), Instances: 4})
	const workers, perWorker = 8, 50
	var wg sync.WaitGroup
	errs := make(chan string, workers*perWorker)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				n := w*perWorker + i
				req := fixtureReq("")
				req.Query = map[string][]string{"n": {strconv.Itoa(n)}}
				d, err := set.Authorize(context.Background(), req)
				d.By = ""
				var want domain.Decision
				switch {
				case n%100 == 0:
					want = failedDecision
				case n%2 == 0:
					want = allow
				default:
					want = domain.Decision{Status: 403, Message: "odd " + strconv.Itoa(n)}
				}
				if err != nil || d != want {
					errs <- "n=" + strconv.Itoa(n) + ": got " + strconv.Quote(d.Message) + " " + d.Verdict.String()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// The request ending while it waits for an instance is the caller's error,
// not a policy failure.
func TestWaitEndsWithRequest(t *testing.T) {
	set, _ := load(t, Spec{Path: fixtureWasm, Instances: 1})
	in, err := set.policies[0].pool.get(context.Background()) // hold the only instance
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := set.Authorize(ctx, fixtureReq("")); err != context.Canceled {
		t.Errorf("got %v, want context.Canceled", err)
	}
	set.policies[0].pool.put(in)
	if got := decide(t, set, fixtureReq("")); got != allow {
		t.Errorf("after: %+v", got)
	}
}

func TestCompilationCacheOnDisk(t *testing.T) {
	dir := t.TempDir()
	h, err := NewHost(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	// A small hand-written module: compiling the Go fixture again would
	// take seconds under the race detector.
	set, err := h.Load(context.Background(), []Spec{{Path: writeModule(t, "m", wasmModule(abiFuncs(1, i64Const(0))...))}})
	if err != nil {
		t.Fatal(err)
	}
	set.Close(context.Background())
	entries, _ := os.ReadDir(dir)
	if len(entries) == 0 {
		t.Error("nothing cached on disk")
	}
}

// The cache holds machine code the daemon runs, keyed by what anyone who
// can read the module can compute and checked by a CRC: a directory that
// another user could write (or owns) is refused, so the daemon compiles
// in memory instead of running what was planted there. One made by the
// daemon is the owner's only.
func TestCompilationCacheRefusesADirectoryOthersCanWrite(t *testing.T) {
	fresh := filepath.Join(t.TempDir(), "a", "cache")
	h, err := NewHost(fresh, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.Close(context.Background())
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("a new cache directory: %v, %v", fi.Mode(), err)
	}
	for _, mode := range []os.FileMode{0o777, os.ModeSticky | 0o777, 0o770, 0o757} {
		dir := t.TempDir()
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		if h, err := NewHost(dir, nil); err == nil || !strings.Contains(err.Error(), "writable by others") {
			if h != nil {
				h.Close(context.Background())
			}
			t.Errorf("mode %v: %v, want refused", mode, err)
		}
	}
	if os.Geteuid() == 0 {
		dir := t.TempDir()
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := NewHost(dir, nil); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
			t.Errorf("a directory of another user's: %v, want refused", err)
		}
	}
}

// The chain inside a Set: the first deny or grant decides, a pass asks the
// next policy, and a principal named by an authenticating pass reaches the
// policies after it (and the result, when nobody decides).
func TestChain(t *testing.T) {
	h := &Host{cache: testHost(t).cache, logger: slog.New(slog.DiscardHandler)}
	set, err := h.Load(context.Background(), []Spec{
		{Path: fixtureWasm, Name: "first", CallTimeout: relaxed, Config: []byte(`{"default":"identify","header":"x-first"}`)},
		{Path: fixtureWasm, Name: "second", CallTimeout: relaxed},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close(context.Background())
	req := func(principal, mode string) domain.AuthRequest {
		r := fixtureReq(mode)
		r.Headers["x-principal"] = []string{principal}
		return r
	}
	// "first" identifies as x-principal, then "second" decides by x-fixture
	// (its default mode, empty, passes via the v1-style Allow).
	tests := []struct {
		name string
		req  domain.AuthRequest
		want domain.Decision
	}{
		{"identified then pass", req("alice", "pass"), domain.Decision{Verdict: domain.Pass, Principal: "alice", By: "first"}},
		{"identified then v1 allow", req("alice", "allow"), domain.Decision{Verdict: domain.Pass, Principal: "alice", By: "first"}},
		{"second sees the principal", req("alice", "principal"), domain.Decision{Status: 403, Message: "principal=alice", Principal: "alice", By: "second"}},
		{"second grants", req("bob", "grant"), domain.Decision{Verdict: domain.Grant, Principal: "bob", By: "second"}},
		{"second denies", req("bob", "deny"), domain.Decision{Status: 451, Message: "fixture says no", Principal: "bob", By: "second"}},
		{"nobody identified", req("", "pass"), domain.Decision{Verdict: domain.Pass}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := set.Authorize(context.Background(), tt.req)
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}

	// A grant stops the chain: the second policy is not asked.
	grantFirst, err := h.Load(context.Background(), []Spec{
		{Path: fixtureWasm, Name: "granter", CallTimeout: relaxed, Config: []byte(`{"default":"grant","header":"x-first"}`)},
		{Path: fixtureWasm, Name: "denier", CallTimeout: relaxed, Config: []byte(`{"default":"deny"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer grantFirst.Close(context.Background())
	r := fixtureReq("")
	r.Headers = map[string][]string{"x-principal": {""}}
	got, _ := grantFirst.Authorize(context.Background(), r)
	if got != (domain.Decision{Verdict: domain.Grant, Principal: "granter", By: "granter"}) {
		t.Errorf("grant with an empty principal: %+v (want the policy's name as principal)", got)
	}
}
