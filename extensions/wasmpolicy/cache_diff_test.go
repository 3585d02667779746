package wasmpolicy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// The decision cache, differentially: the same requests decided by a
// chain of policies with the cache and by the same chain with cache=off
// must get the same decisions (verdict, status, message, principal and
// who decided). The chain holds every example that declares its decisions
// cacheable, between two fixtures: the first can identify a principal
// (so later policies' records carry one), the second can deny naming it
// (so a cached decision that read the principal is put to the test).
//
// What the requests vary, from small pools so that they often agree in
// what a policy read and differ in the rest (which is when the cache
// answers): every string field a policy can read (method, route,
// operation, path, remote address, server id, agent, the RPC kind, id and
// method, action, implied actions, fs path and destination, incoming
// principal), header names in several cases, repeated headers, headers
// given under two spellings at once, and query parameters (whose names
// are case-sensitive).

// diffChain is the chain of the differential tests: name, module, config.
func diffChain() []Spec {
	return []Spec{
		{Name: "fixture", Path: fixtureWasm, Config: []byte(`{"cache": true}`)},
		{Name: "readonly", Path: exampleWasm["readonly"], Config: []byte(
			`{"tokens": {"tok-ro": "ro", "tok-empty": ""}, "readOnly": ["tok-view"]}`)},
		{Name: "agenttokens", Path: exampleWasm["agenttokens"], Config: []byte(
			`{"tokens": {"tok-ag": {"label": "ag", "agents": ["mock"]}, "tok-any": ["*"]}}`)},
		{Name: "scopes", Path: exampleWasm["scopes"], Config: []byte(`{"tokens": [
			{"token": "tok-ci", "label": "ci", "actions": ["acp.*", "fs.*", "agent.read"], "agents": ["mock"], "paths": ["/srv/work"]},
			{"token": "tok-ops", "label": "ops", "actions": ["*.read", "acp.stop"]}]}`)},
		{Name: "denymethods", Path: exampleWasm["denymethods"], Config: []byte(
			`{"deny": ["session/prompt", "fs/*"], "status": 451}`)},
		{Name: "fixture2", Path: fixtureWasm, Config: []byte(`{"cache": true, "header": "x-fixture2"}`)},
	}
}

// diffPair is diffChain loaded twice: with the decision cache, and with
// cache=off on every policy.
type diffPair struct{ cached, uncached *Set }

var (
	diffOnce   sync.Once
	sharedDiff diffPair
	diffErr    error
)

// loadDiffPair loads the pair once for the test binary (twelve Go guests
// take seconds to start under -race); TestMain closes it.
func loadDiffPair(t testing.TB) diffPair {
	t.Helper()
	diffOnce.Do(func() {
		on, off := diffChain(), diffChain()
		for i := range off {
			on[i].CallTimeout, off[i].CallTimeout, off[i].NoCache = relaxed, relaxed, true
		}
		// The two chains load at once: starting a Go guest is CPU work
		// of its own (its runtime initialises), and there are twelve.
		h := testHost(t)
		var wg sync.WaitGroup
		var errOff error
		wg.Go(func() { sharedDiff.uncached, errOff = h.Load(context.Background(), off) })
		sharedDiff.cached, diffErr = h.Load(context.Background(), on)
		wg.Wait()
		diffErr = errors.Join(diffErr, errOff)
	})
	if diffErr != nil {
		t.Fatalf("load: %v", diffErr)
	}
	return sharedDiff
}

// close closes what loadDiffPair loaded.
func (p diffPair) close() {
	for _, s := range []*Set{p.cached, p.uncached} {
		if s != nil {
			_ = s.Close(context.Background())
		}
	}
}

// check decides r with both chains and fails t when they differ. It also
// decides r without its body's fields (AuthorizeWithoutBody, which stands
// on the same promise as the cache) and, when the chain says it could,
// fails t unless that is the decision of the whole request. It returns
// whether the chain could.
func (p diffPair) check(t testing.TB, r domain.AuthRequest) (bodyless bool) {
	t.Helper()
	ctx := context.Background()
	want, werr := p.uncached.Authorize(ctx, r)
	got, gerr := p.cached.Authorize(ctx, r)
	if got != want || fmt.Sprint(gerr) != fmt.Sprint(werr) {
		t.Fatalf("the cache changed a decision\nrequest:  %+v (headers %q, query %q)\ncached:   %+v, %v\nuncached: %+v, %v",
			r, r.Headers, r.Query, got, gerr, want, werr)
	}
	d, ok, err := p.cached.AuthorizeWithoutBody(ctx, r)
	if err != nil {
		t.Fatalf("without body: %v", err)
	}
	if ok && d != want {
		t.Fatalf("decided without the body otherwise than whole\nrequest:      %+v (headers %q, query %q)\nwithout body: %+v\nwhole:        %+v",
			r, r.Headers, r.Query, d, want)
	}
	return ok
}

// moduleCalls is how many times a set's policies ran their modules.
func moduleCalls(s *Set) int64 {
	var n int64
	for _, p := range s.policies {
		n += p.calls.Load()
	}
	return n
}

// byteSource hands out choices from fuzz input; past its end every choice
// is the first.
type byteSource struct {
	b []byte
	i int
}

func (s *byteSource) more() bool { return s.i < len(s.b) }

func (s *byteSource) intn(n int) int {
	if s.i >= len(s.b) {
		return 0
	}
	s.i++
	return int(s.b[s.i-1]) % n
}

func pick[T any](s *byteSource, from []T) T { return from[s.intn(len(from))] }

var (
	diffMethods = []string{"GET", "POST", "PUT", "DELETE", "post"}
	diffRoutes  = [][2]string{
		{"/v1/acp/{server_id}", "post_v1_acp"}, {"/v1/fs/move", "post_v1_fs_move"},
		{"/v1/fs/file", "put_v1_fs_file"}, {"/v1/agents/{agent}", "get_v1_agents_agent"}, {"", ""},
	}
	diffPaths   = []string{"/v1/acp/s1", "/v1/fs/file", "/v1/x"}
	diffRemotes = []string{"127.0.0.1:1000", "127.0.0.1:2000"}
	diffServers = []string{"", "s1", "s2"}
	diffAgents  = []string{"", "mock", "claude", "*", "Mock"}
	diffActions = append([]domain.Action{"", "acp.*"}, domain.Actions...)
	diffImplies = [][]domain.Action{nil, {domain.ActionAgentInstall}, {domain.ActionAgentInstall, domain.ActionFSWrite}, {domain.ActionFSWrite}}
	diffFSPaths = []string{"", "/srv/work", "/srv/work/a", "/srv/workshop", "/etc/passwd", "/srv"}
	diffRPCs    = []*domain.RPCInfo{
		nil, {Kind: "request", ID: "1", Method: "session/prompt"}, {Kind: "request", ID: `"a"`, Method: "initialize"},
		{Kind: "notification", Method: "session/cancel"}, {Kind: "request", ID: "2", Method: "fs/write_text_file"},
		{Kind: "response", ID: "1"}, {Kind: "other"},
	}
	diffPrincipals = []string{"", "", "", "pre"}
	// Header names, in several cases, and the values each is drawn from.
	diffHeaders = []string{
		"authorization", "Authorization", "AUTHORIZATION", "x-fixture", "X-Fixture", "x-fixture2",
		"x-principal", "X-Principal", "x-other", "content-type",
	}
	diffTokens = []string{
		"Bearer tok-ro", "Bearer tok-view", "bearer tok-empty", "Bearer tok-ag", "BEARER tok-any", "Bearer tok-ci",
		"Bearer  tok-ops ", "Bearer nope", "Basic dG9rLWNp", "", "Bearer",
	}
	diffModes = []string{
		"", "allow", "pass", "deny", "grant", "grant-viewer", "identify", "principal", "status0", "echo", "config", "nonsense",
	}
	diffNames  = []string{"alice", "bob", "", "Alice"}
	diffOthers = []string{"1", "2", "application/json"}
	diffQuery  = []string{"agent", "Agent", "n", "access_token"}
	diffQVals  = []string{"mock", "1", "tok-ci", ""}
)

func headerValues(name string) []string {
	switch strings.ToLower(name) {
	case "authorization":
		return diffTokens
	case "x-fixture", "x-fixture2":
		return diffModes
	case "x-principal":
		return diffNames
	}
	return diffOthers
}

// requestsFrom decodes data into up to 64 requests.
func requestsFrom(data []byte) []domain.AuthRequest {
	s := &byteSource{b: data}
	var out []domain.AuthRequest
	for s.more() && len(out) < 64 {
		route := pick(s, diffRoutes)
		r := domain.AuthRequest{
			Method: pick(s, diffMethods), Route: route[0], OperationID: route[1], Path: pick(s, diffPaths),
			RemoteAddr: pick(s, diffRemotes), ServerID: pick(s, diffServers), Agent: pick(s, diffAgents),
			RPC: pick(s, diffRPCs), Action: pick(s, diffActions), Implies: pick(s, diffImplies),
			FSPath: pick(s, diffFSPaths), FSDest: pick(s, diffFSPaths), Principal: pick(s, diffPrincipals),
		}
		for range s.intn(6) {
			name := pick(s, diffHeaders)
			if r.Headers == nil {
				r.Headers = map[string][]string{}
			}
			r.Headers[name] = append(r.Headers[name], pick(s, headerValues(name)))
		}
		for range s.intn(3) {
			name := pick(s, diffQuery)
			if r.Query == nil {
				r.Query = map[string][]string{}
			}
			r.Query[name] = append(r.Query[name], pick(s, diffQVals))
		}
		out = append(out, r)
	}
	return out
}

// FuzzDecisionCache decides the requests its input encodes (requestsFrom)
// with and without the decision cache. Both chains live for the whole
// run, so the cache fills from earlier inputs too. go test runs the seeds
// below and testdata/fuzz/FuzzDecisionCache; go test -fuzz=FuzzDecisionCache
// searches further.
func FuzzDecisionCache(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(randomBytes(seed, 512))
	}
	// Alike in what each policy reads, different in the rest.
	f.Add([]byte{
		1, 0, 0, 0, 1, 1, 0, 3, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0,
		1, 1, 1, 1, 0, 1, 1, 3, 0, 0, 1, 1, 0, 2, 0, 0, 0, 0,
	})
	pair := loadDiffPair(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, r := range requestsFrom(data) {
			pair.check(t, r)
		}
	})
}

// TestDecisionCacheDifferential is the differential on a seeded table of
// random requests, with proof that the cache answered a good share of
// them (else the comparison would say nothing).
func TestDecisionCacheDifferential(t *testing.T) {
	pair := loadDiffPair(t)
	cached0, uncached0 := moduleCalls(pair.cached), moduleCalls(pair.uncached)
	n, bodyless := 0, 0
	for seed := range uint64(16) {
		for _, r := range requestsFrom(randomBytes(seed, 1536)) {
			if pair.check(t, r) {
				bodyless++
			}
			n++
		}
	}
	// Both outcomes of AuthorizeWithoutBody must be common for its check
	// to mean something.
	t.Logf("%d of %d decided without the body", bodyless, n)
	if bodyless < n/10 || n-bodyless < n/10 {
		t.Errorf("%d of %d requests decided without the body: too few of one kind to test it", bodyless, n)
	}
	cached, uncached := moduleCalls(pair.cached)-cached0, moduleCalls(pair.uncached)-uncached0
	t.Logf("%d requests: %d module calls with the cache, %d without", n, cached, uncached)
	if cached*10 > uncached*7 {
		t.Errorf("the cache saved less than 30%% of the module calls (%d with, %d without): the differential hardly tested it", cached, uncached)
	}
}

// randomBytes is n bytes from a generator seeded with seed.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 21))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// AuthorizeWithoutBody decides only what the policies can show does not
// depend on the body's fields: a cacheable decision that did not read
// them. Not a decision that read them, nor one of a policy that does not
// declare its decisions cacheable, or whose promise the operator refused
// (cache=off), nor one made after copying the whole request. The policies
// are those of the differential's chains, asked alone (a Set of one,
// never closed: the chains own them), but for the one not declaring its
// decisions cacheable.
func TestAuthorizeWithoutBody(t *testing.T) {
	ctx := context.Background()
	pair := loadDiffPair(t)
	undeclared, _ := load(t, Spec{Path: fixtureWasm})
	alone := func(p *Policy) *Set { return &Set{logger: p.logger, policies: []*Policy{p}} }
	fixture, readonly, denymethods := alone(pair.cached.policies[0]), alone(pair.cached.policies[1]), alone(pair.cached.policies[4])
	cacheOff := alone(pair.uncached.policies[0])
	ask := func(set *Set, r domain.AuthRequest) (domain.Decision, bool) {
		t.Helper()
		d, ok, err := set.AuthorizeWithoutBody(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return d, ok
	}
	withMode := func(mode string) domain.AuthRequest {
		return domain.AuthRequest{Method: "POST", Headers: map[string][]string{"x-fixture": {mode}, "x-principal": {"alice"}},
			FSDest: "/from/the/body", RPC: &domain.RPCInfo{Kind: "request", Method: "session/prompt"}}
	}
	if d, ok := ask(fixture, withMode("grant")); !ok || d.Verdict != domain.Grant || d.Principal != "alice" {
		t.Errorf("a cacheable grant reading headers only: %+v, %v", d, ok)
	}
	if d, ok := ask(fixture, withMode("pass")); !ok || d.Verdict != domain.Pass {
		t.Errorf("a cacheable pass: %+v, %v", d, ok)
	}
	if _, ok := ask(fixture, withMode("echo")); ok {
		t.Error("decided after copying the whole request")
	}
	if _, ok := ask(undeclared, withMode("grant")); ok {
		t.Error("decided by a policy that does not declare its decisions cacheable")
	}
	if _, ok := ask(cacheOff, withMode("grant")); ok {
		t.Error("decided by a cache=off policy")
	}
	prompt := domain.AuthRequest{Action: domain.ActionACPSend, RPC: &domain.RPCInfo{Kind: "request", ID: "1", Method: "session/prompt"}}
	if _, ok := ask(denymethods, prompt); ok {
		t.Error("denymethods decided without the RPC method it reads")
	}
	prompt.Headers = map[string][]string{"authorization": {"Bearer tok-ro"}}
	if d, ok := ask(readonly, prompt); !ok || d.Verdict != domain.Grant {
		t.Errorf("readonly (reads the token and the actions): %+v, %v", d, ok)
	}
	prompt.Headers = map[string][]string{"authorization": {"Bearer stranger"}}
	if d, ok := ask(readonly, prompt); !ok || d.Verdict != domain.Pass {
		t.Errorf("readonly, another token: %+v, %v", d, ok)
	}
}
