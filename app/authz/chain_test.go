package authz

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports"
)

// policies is a fake ports.Authorizer answering d (or err).
type policies struct {
	d   domain.Decision
	err error
	got []domain.AuthRequest
}

func (p *policies) Authorize(_ context.Context, r domain.AuthRequest) (domain.Decision, error) {
	p.got = append(p.got, r)
	return p.d, p.err
}

// The table of issue 12: what the policies answer × how the token check is
// configured and what the request presents → outcome.
func TestChainTable(t *testing.T) {
	answers := []struct {
		name string
		pol  *policies // nil: no policies at all
	}{
		{"no policies", nil},
		{"pass", &policies{d: domain.Decision{Verdict: domain.Pass}}},
		{"identify", &policies{d: domain.Decision{Verdict: domain.Pass, Principal: "alice", By: "hmac"}}},
		{"grant", &policies{d: domain.Decision{Verdict: domain.Grant, Principal: "viewer", By: "readonly"}}},
		{"deny 403", &policies{d: domain.Decision{Status: 403, Message: "no", By: "readonly"}}},
		{"deny 401", &policies{d: domain.Decision{Status: 401, Message: "unknown token", By: "agenttokens"}}},
		{"deny bad status", &policies{d: domain.Decision{Status: 200, By: "x"}}},
		{"error", &policies{err: context.Canceled}},
	}
	tokens := []struct {
		name       string
		configured bool
		header     string
	}{
		{"no token configured, none sent", false, ""},
		{"no token configured, one sent", false, "Bearer admin"},
		{"token configured, right one sent", true, "Bearer admin"},
		{"token configured, wrong one sent", true, "Bearer nope"},
		{"token configured, none sent", true, ""},
	}
	// want[answer][token] = decision, or "401"/"403"/"status"/"err" for refusals.
	want := map[string][5]string{
		"no policies":     {"open", "open", "token", "401", "401"},
		"pass":            {"open", "open", "token", "401", "401"},
		"identify":        {"identified", "identified", "identified", "identified", "identified"},
		"grant":           {"grant", "grant", "grant", "grant", "grant"},
		"deny 403":        {"403", "403", "403", "403", "403"},
		"deny 401":        {"401p", "401p", "401p", "401p", "401p"},
		"deny bad status": {"403", "403", "403", "403", "403"},
		"error":           {"err", "err", "err", "err", "err"},
	}
	for _, a := range answers {
		for i, tk := range tokens {
			t.Run(a.name+"/"+tk.name, func(t *testing.T) {
				c := &Chain{}
				if a.pol != nil {
					c.Policies = a.pol
				}
				if tk.configured {
					c.Tokens = NewTokens("admin")
				}
				req := domain.AuthRequest{Action: domain.ActionFSWrite}
				if tk.header != "" {
					req.Headers = map[string][]string{"authorization": {tk.header}}
				}
				out, err := c.Authorize(context.Background(), req)
				got := out.Decision
				var e *domain.Error
				switch {
				case errors.As(err, &e) && e.Kind == domain.KindTokenInvalid && out.By == "token":
					got = "401"
				case errors.As(err, &e) && e.Kind == domain.KindTokenInvalid:
					got = "401p"
				case errors.As(err, &e) && e.Kind == domain.KindPermissionDenied && (e.PolicyStatus == 403 || e.PolicyStatus == 0):
					got = "403"
				case err != nil && out.Decision == "error":
					got = "err"
				case err != nil:
					got = "unexpected " + err.Error()
				}
				if got != want[a.name][i] {
					t.Errorf("got %s (%+v, %v), want %s", got, out, err, want[a.name][i])
				}
				switch got {
				case "grant":
					if out.Principal != "viewer" || out.By != "readonly" {
						t.Errorf("grant outcome %+v", out)
					}
				case "identified":
					if out.Principal != "alice" {
						t.Errorf("identified outcome %+v", out)
					}
				case "token":
					if out.Principal != TokenPrincipal {
						t.Errorf("token outcome %+v", out)
					}
				}
			})
		}
	}
}

func TestChainRefusesRouteWithoutAction(t *testing.T) {
	c := &Chain{}
	if _, err := c.Authorize(context.Background(), domain.AuthRequest{}); err == nil {
		t.Error("a request without an action went through")
	}
}

type fakeInstances map[string]string

func (f fakeInstances) Instance(id string) (string, uint64) {
	if f[id] == "" {
		return "", 0
	}
	return f[id], uint64(len(id)) // a generation of its own per id
}

type fakeAgents map[string]bool

func (f fakeAgents) Installed(a string) bool { return f[a] }

func TestDescribe(t *testing.T) {
	c := &Chain{
		Instances: fakeInstances{"live": "mock"},
		Agents:    fakeAgents{"mock": true},
		FSHome:    "/home/u", ConfigBase: "/work",
	}
	var r domain.AuthRequest
	c.ACPPost(&r, "live", "claude")
	if r.Action != domain.ActionACPSend || r.Agent != "mock" || r.Implies != nil {
		t.Errorf("post to a live id: %+v", r)
	}
	r = domain.AuthRequest{}
	c.ACPPost(&r, "new", "mock")
	if r.Action != domain.ActionACPStart || r.Agent != "mock" || r.Implies != nil {
		t.Errorf("start of an installed agent: %+v", r)
	}
	r = domain.AuthRequest{}
	c.ACPPost(&r, "new", "opencode")
	if r.Action != domain.ActionACPStart || len(r.Implies) != 1 || r.Implies[0] != domain.ActionAgentInstall {
		t.Errorf("start of an agent to install: %+v", r)
	}
	r = domain.AuthRequest{}
	c.FS(&r, domain.ActionFSWrite, "a/b/../c", "/tmp//x")
	if r.FSPath != "" || r.FSDest != "/tmp/x" {
		t.Errorf("fs: %+v (a relative path with .. is not resolved)", r)
	}
	r = domain.AuthRequest{}
	c.FS(&r, domain.ActionFSRead, "", "")
	if r.FSPath != "/home/u" {
		t.Errorf("default fs path: %+v", r)
	}
	r = domain.AuthRequest{}
	c.Config(&r, domain.ActionConfigWrite, "proj/../other")
	if r.FSPath != "/work/other" {
		t.Errorf("config dir: %+v", r)
	}
	r = domain.AuthRequest{}
	c.Server(&r, domain.ActionACPStop, "live")
	if r.Agent != "mock" || r.ServerID != "live" {
		t.Errorf("server: %+v", r)
	}
}

func TestTokens(t *testing.T) {
	tk := NewTokens("a", "", "b")
	for h, want := range map[string]bool{
		"Bearer a": true, "Bearer b": true, "Bearer c": false, "bearer a": false, "a": false, "": false,
		// domain.BearerToken's reading: whitespace around the value is not
		// part of it (HTTP strips it), inside it is no token's.
		"Bearer a ": true, "Bearer  a": false, "Bearer\ta": false, "Bearer a, Bearer b": false, "Bearer ab": false,
	} {
		if got := tk.Check(h); got != want {
			t.Errorf("%q: %v", h, got)
		}
	}
	tk.Set(nil)
	if tk.Configured() || tk.Check("Bearer a") {
		t.Error("an emptied set still accepts")
	}
	var none *Tokens
	if none.Configured() || none.Check("Bearer ") {
		t.Error("a nil set accepts")
	}
}

// TestTokensInValue: what the process starters ask of each variable, with
// the tokens current at that moment.
func TestTokensInValue(t *testing.T) {
	tk := NewTokens("tok-a", "tok-b")
	for v, want := range map[string]bool{
		"tok-a": true, "Bearer tok-b": true, "https://h/?token=tok-a&x=1": true, "xtok-ay": true,
		"tok-": false, "TOK-A": false, "": false, "tok-c": false,
	} {
		if got := tk.InValue(v); got != want {
			t.Errorf("InValue(%q) = %v", v, got)
		}
	}
	tk.Set([]string{"tok-c"})
	if tk.InValue("tok-a") || !tk.InValue("Bearer tok-c") {
		t.Error("InValue does not follow Set")
	}
	var none *Tokens
	if none.InValue("x") || NewTokens().InValue("") {
		t.Error("no tokens hold a value")
	}
}

func TestParseTokenFile(t *testing.T) {
	got, err := ParseTokenFile([]byte("# admins\n  tok-1 \r\n\n\ttok-2\n"))
	if err != nil || len(got) != 2 || got[0] != "tok-1" || got[1] != "tok-2" {
		t.Errorf("got %q, %v", got, err)
	}
	for _, bad := range []string{"", "\n\n", "# only a comment\n", "two words\n", "ctl\x01\n"} {
		if _, err := ParseTokenFile([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// BenchmarkTokenCheck is the built-in check with a few tokens configured.
// BenchmarkTokenCheck: the check's time by what is presented. The right
// token, a wrong one of its length differing in its first or last byte,
// and wrong ones shorter and longer: the first four take alike (both sides
// are hashed, every configured token compared); only the presented value's
// own length shows (hashing 64 KiB), which the caller knows.
//
//	go test ./app/authz -run '^$' -bench BenchmarkTokenCheck
func BenchmarkTokenCheck(b *testing.B) {
	const tok = "4f9c2d7a1b8e6f305c9d2e7a1b4f8c6d3e9a2b7c5d1f8e4a"
	tk := NewTokens("t1", "t2", tok)
	for _, c := range []struct{ name, presented string }{
		{"right", tok},
		{"wrong-first-byte", "x" + tok[1:]},
		{"wrong-last-byte", tok[:len(tok)-1] + "x"},
		{"wrong-1-byte", "x"},
		{"wrong-64KiB", strings.Repeat("x", 64<<10)},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := "Bearer " + c.presented
			want := c.presented == tok
			for b.Loop() {
				if tk.Check(h) != want {
					b.Fatal("wrong answer")
				}
			}
		})
	}
}

// bodyless is a fake ports.BodylessAuthorizer: it answers d, or cannot
// decide without the body when !ok.
type bodyless struct {
	policies
	ok bool
}

func (b *bodyless) AuthorizeWithoutBody(ctx context.Context, r domain.AuthRequest) (domain.Decision, bool, error) {
	if !b.ok {
		return domain.Decision{}, false, nil
	}
	d, err := b.Authorize(ctx, r)
	return d, true, err
}

// The chain without a request's body fields: the token check alone is
// always decided; policies decide only when they can say their decision
// does not depend on those fields, and never see them.
func TestChainWithoutBody(t *testing.T) {
	req := domain.AuthRequest{Action: domain.ActionFSWrite, FSPath: "/a", FSDest: "/b",
		RPC: &domain.RPCInfo{Kind: "request", Method: "x"}, Headers: map[string][]string{"authorization": {"Bearer nope"}}}
	pass := domain.Decision{Verdict: domain.Pass}
	grant := domain.Decision{Verdict: domain.Grant, Principal: "p", By: "b"}
	for _, c := range []struct {
		name     string
		policies ports.Authorizer
		ok       bool
		decision string
	}{
		{"no policies", nil, true, "deny"},
		{"policies without the ability", &policies{d: grant}, false, ""},
		{"policies that need the body", &bodyless{policies: policies{d: grant}}, false, ""},
		{"policies passing without it", &bodyless{policies: policies{d: pass}, ok: true}, true, "deny"},
		{"policies granting without it", &bodyless{policies: policies{d: grant}, ok: true}, true, "grant"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ch := &Chain{Policies: c.policies, Tokens: NewTokens("admin")}
			out, ok, err := ch.AuthorizeWithoutBody(context.Background(), req)
			if ok != c.ok || ok && out.Decision != c.decision {
				t.Fatalf("got %+v, ok %v, %v; want ok %v, %s", out, ok, err, c.ok, c.decision)
			}
			if c.decision == "deny" && !errors.Is(err, ErrTokenInvalid) {
				t.Errorf("refusal %v, want the token check's", err)
			}
			if b, _ := c.policies.(*bodyless); b != nil && b.ok {
				if got := b.got[0]; got.FSPath != "" || got.FSDest != "" || got.RPC != nil {
					t.Errorf("the policies saw the body's fields: %+v", got)
				}
			}
		})
	}
}
