package wasmpolicy

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// calls is how many times the set's only policy ran its module.
func calls(s *Set) int64 { return s.policies[0].calls.Load() }

func TestDecisionCache(t *testing.T) {
	set, _ := load(t, Spec{Path: fixtureWasm, Config: []byte(`{"cache": true}`)})
	ctx := context.Background()
	ask := func(r domain.AuthRequest) domain.Decision {
		t.Helper()
		d, err := set.Authorize(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	req := func(mode, principal, other string) domain.AuthRequest {
		return domain.AuthRequest{Method: "POST", Path: "/v1/acp/" + other, Headers: map[string][]string{
			"x-fixture": {mode}, "x-principal": {principal}, "x-other": {other}}}
	}
	if d := ask(req("grant", "alice", "1")); d.Verdict != domain.Grant || d.Principal != "alice" {
		t.Fatalf("first: %+v", d)
	}
	if n := calls(set); n != 1 {
		t.Fatalf("%d calls", n)
	}
	// Alike in what the policy read (x-fixture, x-principal): cached,
	// whatever else differs.
	if d := ask(req("grant", "alice", "2")); d.Verdict != domain.Grant || d.Principal != "alice" || calls(set) != 1 {
		t.Errorf("alike: %+v after %d calls", d, calls(set))
	}
	// A different value of something it read: computed again.
	if d := ask(req("grant", "bob", "1")); d.Principal != "bob" || calls(set) != 2 {
		t.Errorf("other principal: %+v after %d calls", d, calls(set))
	}
	// Another decision path, reading less: its own entry.
	if d := ask(req("deny", "x", "1")); d.Status != 451 || calls(set) != 3 {
		t.Errorf("deny: %+v after %d calls", d, calls(set))
	}
	if d := ask(req("deny", "y", "3")); d.Status != 451 || calls(set) != 3 {
		t.Errorf("deny again: %+v after %d calls", d, calls(set))
	}
	// A header given twice is not the same as once.
	twice := req("grant", "alice", "1")
	twice.Headers["x-principal"] = []string{"alice", "mallory"}
	if ask(twice); calls(set) != 4 {
		t.Errorf("a second value was not told apart: %d calls", calls(set))
	}
}

// Header names in capitals, as a policy test case may give them, are read
// by the policy and keyed alike (the record lowers them): a decision that
// read X-Principal is not reused for another X-Principal.
func TestDecisionCacheHeaderCase(t *testing.T) {
	set, _ := load(t, Spec{Path: fixtureWasm, Config: []byte(`{"cache": true}`)})
	for _, c := range []struct {
		headers map[string][]string
		want    string
	}{
		{map[string][]string{"X-Fixture": {"grant"}, "X-Principal": {"alice"}}, "alice"},
		{map[string][]string{"X-Fixture": {"grant"}, "X-Principal": {"bob"}}, "bob"},
		{map[string][]string{"x-fixture": {"grant"}, "X-PRINCIPAL": {"carol"}}, "carol"},
		{map[string][]string{"X-Fixture": {"grant"}, "x-principal": {"dave"}, "X-Principal": {"erin"}}, "erin"},
		{map[string][]string{"X-Fixture": {"grant"}, "X-Principal": {"bob"}}, "bob"},
	} {
		d, err := set.Authorize(context.Background(), domain.AuthRequest{Headers: c.headers})
		if err != nil || d.Principal != c.want {
			t.Errorf("%v: got %+v, %v; want principal %s", c.headers, d, err, c.want)
		}
	}
	if n := calls(set); n != 4 {
		t.Errorf("%d module calls, want 4 (the last request is the second's again)", n)
	}
}

// Decisions made while reading the clock, or after copying the whole
// request, are never reused, whatever the policy declared; nor are those
// of a policy that did not declare them cacheable.
func TestDecisionCacheRefuses(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, config, mode string
	}{
		{"clock", `{"cache": true}`, "clock"},
		{"whole request", `{"cache": true}`, "echo"},
		{"not declared", `{}`, "grant"},
		{"cache=off", `{"cache": true}`, "grant"},
	} {
		t.Run(c.name, func(t *testing.T) {
			set, _ := load(t, Spec{Path: fixtureWasm, Config: []byte(c.config), NoCache: c.name == "cache=off"})
			r := domain.AuthRequest{Method: "GET", Headers: map[string][]string{"x-fixture": {c.mode}, "x-principal": {"p"}}}
			for range 3 {
				if _, err := set.Authorize(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			if n := calls(set); n != 3 {
				t.Errorf("%d module calls for 3 requests, want 3", n)
			}
		})
	}
}

// Many callers at once, with more distinct requests than the cache holds:
// every answer is the one the policy would give, and the cache stays
// within its bound.
func TestDecisionCacheConcurrent(t *testing.T) {
	set, _ := load(t, Spec{Path: fixtureWasm, Config: []byte(`{"cache": true}`)})
	const limit = 64
	set.policies[0].cache.limit = limit
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				who := strconv.Itoa(g*1000 + i%40) // 320 distinct, each asked two or three times
				d, err := set.Authorize(ctx, domain.AuthRequest{Headers: map[string][]string{"x-fixture": {"grant"}, "x-principal": {who}}})
				if err != nil || d.Verdict != domain.Grant || d.Principal != who {
					errs <- fmt.Sprintf("%s: got %+v, %v", who, d, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	c := &set.policies[0].cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) > limit || len(c.shapes) != 1 {
		t.Errorf("%d entries, %d shapes", len(c.entries), len(c.shapes))
	}
}
