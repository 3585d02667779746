package guest

import (
	"errors"
	"reflect"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/extensions/wasmpolicy/abi"
)

var sample = domain.AuthRequest{
	Method: "POST", Route: "/v1/acp/{server_id}", OperationID: "post_v1_acp", Path: "/v1/acp/s",
	Query:      map[string][]string{"agent": {"mock", "other"}},
	Headers:    map[string][]string{"authorization": {"Bearer tok "}, "x-a": {"1", "2"}},
	RemoteAddr: "127.0.0.1:5", ServerID: "s", Agent: "mock",
	RPC: &domain.RPCInfo{Kind: "request", ID: "1", Method: "terminal/create"},
}

func TestRequestAccessors(t *testing.T) {
	r := NewRequest(sample)
	rpc, ok := r.RPC()
	got := []any{r.Method(), r.Route(), r.OperationID(), r.Path(), r.RemoteAddr(), r.ServerID(), r.Agent(),
		rpc, ok, r.RPCMethod(), r.Header("X-A"), r.HeaderValues("x-a"), r.Header("missing"),
		r.Query("agent"), r.Query("Agent"), r.Bearer()}
	want := []any{"POST", "/v1/acp/{server_id}", "post_v1_acp", "/v1/acp/s", "127.0.0.1:5", "s", "mock",
		*sample.RPC, true, "terminal/create", "1", []string{"1", "2"}, "",
		"mock", "", "tok"}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("accessor %d: got %#v, want %#v", i, got[i], want[i])
		}
	}
	if full := r.AuthRequest(); !reflect.DeepEqual(full, sample) {
		t.Errorf("AuthRequest: got %+v", full)
	}
	if _, ok := NewRequest(domain.AuthRequest{}).RPC(); ok {
		t.Error("RPC reported for a request without one")
	}
}

func TestActionAccessors(t *testing.T) {
	req := sample
	req.Action, req.Implies = domain.ActionACPStart, []domain.Action{domain.ActionAgentInstall}
	req.FSPath, req.FSDest, req.Principal = "/srv/a", "/srv/b", "alice"
	r := NewRequest(req)
	if got := r.Actions(); !reflect.DeepEqual(got, []domain.Action{"acp.start", "agent.install"}) {
		t.Errorf("Actions: %v", got)
	}
	if got := r.Resource(); got != (Resource{ServerID: "s", Agent: "mock", Path: "/srv/a", Dest: "/srv/b"}) {
		t.Errorf("Resource: %+v", got)
	}
	if r.Principal() != "alice" || r.Action() != domain.ActionACPStart {
		t.Errorf("Principal %q Action %q", r.Principal(), r.Action())
	}
	for _, tt := range []struct {
		patterns []string
		want     bool
	}{
		{[]string{"acp.start"}, false},
		{[]string{"acp.start", "agent.install"}, true},
		{[]string{"acp.*", "agent.*"}, true},
		{[]string{"*"}, true},
		{[]string{"*.read"}, false},
		{nil, false},
	} {
		if got := r.ActionsWithin(tt.patterns...); got != tt.want {
			t.Errorf("ActionsWithin(%v) = %v", tt.patterns, got)
		}
	}
}

func TestBearer(t *testing.T) {
	// As the daemon's token check reads it (domain.BearerToken): a form
	// it refuses holds no token for a policy either, so a policy cannot
	// grant or deny by a token the check would read differently.
	for h, want := range map[string]string{
		"Bearer abc": "abc", "Basic abc": "", "Bearer": "", "": "",
		"BEARER x": "", "bearer x": "", "Bearer  x": "", "Bearer a b": "", "Bearer x, Bearer y": "", "Bearer\tx": "",
	} {
		r := NewRequest(domain.AuthRequest{Headers: map[string][]string{"authorization": {h}}})
		if got := r.Bearer(); got != want {
			t.Errorf("%q: got %q, want %q", h, got, want)
		}
	}
}

type testPolicy struct {
	configured []byte
	err        error
	decide     func(*Request) domain.Decision
}

func (p *testPolicy) Configure(b []byte) error             { p.configured = b; return p.err }
func (p *testPolicy) Authorize(r *Request) domain.Decision { return p.decide(r) }

func TestHandlers(t *testing.T) {
	defer Register(nil)
	Register(nil)
	if got := string(handleInit(nil)); got == "" {
		t.Error("init without a registered policy succeeded")
	}

	p := &testPolicy{decide: func(r *Request) domain.Decision {
		if r.Agent() == "mock" {
			return Allow()
		}
		return Deny(403, "agent "+r.Agent())
	}}
	Register(p)
	if got := handleInit(nil); got != nil || string(p.configured) != "null" {
		t.Errorf("init: %q, configured %q", got, p.configured)
	}
	p.err = errors.New("bad config")
	if got := string(handleInit([]byte(`{}`))); got != "bad config" {
		t.Errorf("init error: %q", got)
	}

	record := abi.AppendRequest(nil, &sample)
	if d, failure, err := abi.ParseAnswer(handleAuthorize(record, nil), abi.Version); err != nil || failure != "" || d.Verdict != domain.Pass {
		t.Errorf("allow: %+v %q %v", d, failure, err)
	}
	other := sample
	other.Agent = "claude"
	d, _, _ := abi.ParseAnswer(handleAuthorize(abi.AppendRequest(nil, &other), nil), abi.Version)
	if d != (domain.Decision{Status: 403, Message: "agent claude"}) {
		t.Errorf("deny: %+v", d)
	}
	other.Agent = "grant-me"
	p.decide = func(r *Request) domain.Decision { return Grant("label-" + r.Agent()) }
	d, _, _ = abi.ParseAnswer(handleAuthorize(abi.AppendRequest(nil, &other), nil), abi.Version)
	if d != (domain.Decision{Verdict: domain.Grant, Principal: "label-grant-me"}) {
		t.Errorf("grant: %+v", d)
	}
	if _, failure, _ := abi.ParseAnswer(handleAuthorize([]byte{1}, nil), abi.Version); failure == "" {
		t.Error("a malformed record was decided")
	}
}

// BenchmarkAllow is the SDK's own share of a decision, natively.
func BenchmarkAllow(b *testing.B) {
	defer Register(nil)
	Register(&testPolicy{decide: func(r *Request) domain.Decision {
		if r.Bearer() == "" {
			return Deny(401, "no token")
		}
		return Allow()
	}})
	record := abi.AppendRequest(nil, &sample)
	out := make([]byte, 0, 64)
	for b.Loop() {
		out = handleAuthorize(record, out[:0])
	}
}

type cachedPolicy struct {
	testPolicy
	cache bool
}

func (p *cachedPolicy) CacheDecisions() bool { return p.cache }

// A Cacheable policy's answer names what it read, and only that; the
// Request forgets it between calls; AuthRequest makes a decision opaque.
func TestVaryOfWhatWasRead(t *testing.T) {
	defer Register(nil)
	p := &cachedPolicy{cache: true}
	Register(p)
	record := abi.AppendRequest(nil, &sample)
	vary := func(decide func(*Request) domain.Decision) (*abi.Vary, bool) {
		p.decide = decide
		return abi.ParseVary(handleAuthorize(record, nil))
	}
	v, ok := vary(func(r *Request) domain.Decision {
		r.Bearer()
		r.Header("Authorization")
		r.Query("agent")
		if !r.ActionsWithin("*.read") {
			return Deny(403, "no "+r.RPCMethod())
		}
		return Pass()
	})
	want := &abi.Vary{Fields: 1<<abi.FieldAction | 1<<abi.FieldImplies | 1<<abi.FieldRPCMethod,
		Headers: []string{"authorization"}, Query: []string{"agent"}}
	if !ok || !reflect.DeepEqual(v, want) {
		t.Errorf("got %+v, want %+v", v, want)
	}
	v, ok = vary(func(r *Request) domain.Decision { return Pass() })
	if !ok || !reflect.DeepEqual(v, &abi.Vary{}) {
		t.Errorf("a decision reading nothing: %+v %v", v, ok)
	}
	if _, ok := vary(func(r *Request) domain.Decision { r.AuthRequest(); return Pass() }); ok {
		t.Error("a decision after AuthRequest is cacheable")
	}
	p.cache = false
	if _, ok := vary(func(r *Request) domain.Decision { return Pass() }); ok {
		t.Error("CacheDecisions false, yet a vary was sent")
	}
}
