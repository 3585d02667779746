package wasmpolicy

import (
	"context"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Swapping policies under load drops no request: each is decided by the
// old set or the new one, never failed because the old one closed.
func TestReloadUnderLoad(t *testing.T) {
	sink := &logSink{}
	h := &Host{cache: testHost(t).cache, logger: slog.New(sink)}
	defer func() {
		if t.Failed() {
			if attrs, ok := sink.find("policy failed"); ok {
				t.Logf("policy failed: %v", attrs)
			}
		}
	}()
	allowSet, err := h.Load(context.Background(), []Spec{{Path: fixtureWasm, CallTimeout: relaxed}})
	if err != nil {
		t.Fatal(err)
	}
	r := NewReloadable(allowSet)
	defer r.Close(context.Background())

	var stop atomic.Bool
	var wg sync.WaitGroup
	var allowed, denied atomic.Int64
	errs := make(chan string, 16)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				d, err := r.Authorize(context.Background(), fixtureReq(""))
				switch {
				case err != nil:
					errs <- err.Error()
					return
				case d.Allowed():
					allowed.Add(1)
				case d.Status == 451:
					denied.Add(1)
				default:
					errs <- "unexpected decision " + d.Message
					return
				}
			}
		}()
	}
	waitFor := func(n *atomic.Int64) {
		for n.Load() < 20 && len(errs) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	waitFor(&allowed)
	denySet, err := h.Load(context.Background(), []Spec{{Path: fixtureWasm, Config: []byte(`{"default":"deny"}`), CallTimeout: relaxed}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Swap(context.Background(), denySet); err != nil {
		t.Fatal(err)
	}
	waitFor(&denied)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if d := decide(t, r, fixtureReq("")); d.Status != 451 {
		t.Errorf("after swap: %+v", d)
	}
	if d, err := allowSet.Authorize(context.Background(), fixtureReq("")); err == nil {
		t.Errorf("the old set still answers after the swap: %+v", d)
	}
}

// After Close, Authorize fails instead of looping.
func TestReloadableClosed(t *testing.T) {
	set, err := testHost(t).Load(context.Background(), []Spec{{Path: fixtureWasm}})
	if err != nil {
		t.Fatal(err)
	}
	r := NewReloadable(set)
	r.Close(context.Background())
	if _, err := r.Authorize(context.Background(), domain.AuthRequest{}); err == nil {
		t.Error("closed authorizer answered")
	}
}

func TestParseSpec(t *testing.T) {
	tests := []struct {
		in   string
		want Spec
		err  bool
	}{
		{in: "p.wasm", want: Spec{Path: "p.wasm"}},
		{in: "/x/p.wasm,config=/x/c.json,fail=open", want: Spec{Path: "/x/p.wasm", ConfigPath: "/x/c.json", FailOpen: true}},
		{in: "p.wasm,fail=closed,name=tokens,timeout=50ms,memory=32MiB,instances=3",
			want: Spec{Path: "p.wasm", Name: "tokens", CallTimeout: 50 * time.Millisecond, MemoryMiB: 32, Instances: 3}},
		{in: "p.wasm,cache=off", want: Spec{Path: "p.wasm", NoCache: true}},
		{in: "p.wasm,cache=on", want: Spec{Path: "p.wasm"}},
		{in: "p.wasm,cache=no", err: true},
		{in: "", err: true},
		{in: "p.wasm,fail=maybe", err: true},
		{in: "p.wasm,config", err: true},
		{in: "p.wasm,colour=red", err: true},
		{in: "p.wasm,timeout=-1s", err: true},
		{in: "p.wasm,memory=0", err: true},
	}
	for _, tt := range tests {
		got, err := ParseSpec(tt.in)
		if (err != nil) != tt.err {
			t.Errorf("%q: err %v", tt.in, err)
			continue
		}
		if !tt.err && !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: got %+v, want %+v", tt.in, got, tt.want)
		}
	}
	s := Spec{Path: "/etc/policies/read-only.wasm"}
	s.fill()
	if s.Name != "read-only" || s.CallTimeout != DefaultCallTimeout || s.MemoryMiB != DefaultMemoryMiB || s.Instances < 2 {
		t.Errorf("defaults: %+v", s)
	}
}
