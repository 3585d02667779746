package abi

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

func TestRequestRoundTrip(t *testing.T) {
	tests := []domain.AuthRequest{
		{},
		{Method: "GET", Route: "/v1/health", OperationID: "get_v1_health", Path: "/v1/health", RemoteAddr: "[::1]:9"},
		{
			Method: "POST", Route: "/v1/acp/{server_id}", OperationID: "post_v1_acp", Path: "/v1/acp/a%2Fb",
			Query:    map[string][]string{"agent": {"mock"}, "z": {"", "2"}},
			Headers:  map[string][]string{"authorization": {"Bearer x"}, "x-multi": {"1", "2", "3"}, "x-utf8": {"é\x00\xff"}},
			ServerID: "a/b", Agent: "mock",
			RPC:    &domain.RPCInfo{Kind: "notification", Method: "session/cancel"},
			Action: domain.ActionACPStart, Implies: []domain.Action{domain.ActionAgentInstall, "x.y"},
			FSPath: "/a", FSDest: "/b", Principal: "p",
		},
		{RPC: &domain.RPCInfo{Kind: "response", ID: "null"}},
	}
	for i, want := range tests {
		v, err := ParseRequest(AppendRequest([]byte("prefix"), &want)[len("prefix"):])
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		if got := v.AuthRequest(); !reflect.DeepEqual(got, want) {
			t.Errorf("%d: got %+v\nwant %+v", i, got, want)
		}
	}
}

func TestRequestOrder(t *testing.T) {
	r := domain.AuthRequest{Headers: map[string][]string{"b": {"2", "1"}, "a": {"x"}}}
	v, _ := ParseRequest(AppendRequest(nil, &r))
	var got []string
	for i := range v.NumHeaders() {
		k, val := v.HeaderAt(i)
		got = append(got, string(k)+"="+string(val))
	}
	if want := []string{"a=x", "b=2", "b=1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v (names sorted, values in order)", got, want)
	}
}

// Header names reach the record in lower case whatever case the caller
// used; names alike but for case become one, their values kept in order;
// query names keep their case.
func TestRequestLowersHeaderNames(t *testing.T) {
	r := domain.AuthRequest{
		Headers: map[string][]string{"authorization": {"3"}, "Authorization": {"1", "2"}, "X-B": {"x"}, "a": {"y"}},
		Query:   map[string][]string{"Agent": {"q"}},
	}
	v, _ := ParseRequest(AppendRequest(nil, &r))
	var got []string
	for i := range v.NumHeaders() {
		k, val := v.HeaderAt(i)
		got = append(got, string(k)+"="+string(val))
	}
	if want := []string{"a=y", "authorization=1", "authorization=2", "authorization=3", "x-b=x"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if k, _ := v.QueryAt(0); string(k) != "Agent" {
		t.Errorf("query name %q", k)
	}
	if _, ok := r.Headers["X-B"]; !ok || len(r.Headers) != 4 {
		t.Errorf("the caller's map changed: %v", r.Headers)
	}
}

func TestFoldASCII(t *testing.T) {
	for _, c := range []struct {
		a, b string
		eq   bool
	}{{"Authorization", "authorization", true}, {"X-A", "x-a", true}, {"a", "ab", false}, {"\u212a", "k", false}, {"σ", "ς", false}} {
		if got := EqualFoldASCII(c.a, c.b); got != c.eq {
			t.Errorf("EqualFoldASCII(%q, %q) = %v", c.a, c.b, got)
		}
		if got := LowerASCII(c.a) == LowerASCII(c.b); got != c.eq {
			t.Errorf("LowerASCII(%q) == LowerASCII(%q): %v", c.a, c.b, got)
		}
	}
}

// A record from a newer host with more fields still reads; one from an
// older host with fewer reads the missing fields as empty.
func TestRequestFieldCount(t *testing.T) {
	r := domain.AuthRequest{Method: "GET", Agent: "mock"}
	b := AppendRequest(nil, &r)
	v, _ := ParseRequest(b)
	if got := string(v.Field(NumFields + 3)); got != "" {
		t.Errorf("unknown field read %q", got)
	}
	le.PutUint32(b, 2) // pretend only method and route exist
	v, err := ParseRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(v.Field(FieldMethod)) != "GET" || v.Field(FieldAgent) != nil {
		t.Errorf("short table: method %q agent %q", v.Field(FieldMethod), v.Field(FieldAgent))
	}
}

func FuzzRequestRoundTrip(f *testing.F) {
	f.Add("GET", "/v1/fs/file", "authorization", "Bearer t", "path", "/tmp/x", "terminal/create")
	f.Fuzz(func(t *testing.T, method, path, hk, hv, qk, qv, rpcMethod string) {
		want := domain.AuthRequest{
			Method: method, Path: path,
			Headers: map[string][]string{hk: {hv}},
			Query:   map[string][]string{qk: {qv, hv}},
			RPC:     &domain.RPCInfo{Kind: "request", Method: rpcMethod},
		}
		v, err := ParseRequest(AppendRequest(nil, &want))
		if err != nil {
			t.Fatal(err)
		}
		if got := v.AuthRequest(); !reflect.DeepEqual(got, want) {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
}

// Any bytes parse or fail cleanly, and every accessor stays in bounds.
func FuzzParseRequest(f *testing.F) {
	f.Add(AppendRequest(nil, &domain.AuthRequest{Method: "GET", Headers: map[string][]string{"a": {"b"}}}))
	f.Add([]byte{10, 0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseRequest(b)
		if err != nil {
			return
		}
		_ = v.AuthRequest()
	})
}

func TestAnswerRoundTrip(t *testing.T) {
	for _, d := range []domain.Decision{
		{Verdict: domain.Pass},
		{Verdict: domain.Pass, Principal: "alice"},
		{Verdict: domain.Grant, Principal: "viewer ü"},
		{Status: 403, Message: "no"},
		{Status: 0},
		{Status: 429, Message: "slow down ü"},
	} {
		got, failure, err := ParseAnswer(AppendDecision(nil, d), Version)
		if err != nil || failure != "" || got != d {
			t.Errorf("%+v: got %+v, %q, %v", d, got, failure, err)
		}
	}
	if _, failure, err := ParseAnswer(AppendError(nil, "boom"), Version); err != nil || failure != "boom" {
		t.Errorf("error answer: %q, %v", failure, err)
	}
	if _, failure, _ := ParseAnswer(AppendError(nil, ""), Version); failure == "" {
		t.Error("an empty error answer must still be a failure")
	}
	for _, bad := range [][]byte{nil, {1, 0, 0}, {9, 0, 0, 0, 0, 0, 0, 0}} {
		if _, _, err := ParseAnswer(bad, Version); err == nil {
			t.Errorf("%v parsed", bad)
		}
	}
}

// A v1 module's allow is a pass, whatever bytes follow it; v1 has no grant.
func TestAnswerV1(t *testing.T) {
	got, _, err := ParseAnswer([]byte{VerdictAllow, 0, 0, 0, 0, 0, 0, 0, 'x'}, 1)
	if err != nil || got != (domain.Decision{Verdict: domain.Pass}) {
		t.Errorf("v1 allow: %+v, %v", got, err)
	}
	if _, _, err := ParseAnswer(AppendDecision(nil, domain.Decision{Verdict: domain.Grant, Principal: "p"}), 1); err == nil {
		t.Error("a v1 module answered grant and it was accepted")
	}
}

func TestSetPrincipal(t *testing.T) {
	r := domain.AuthRequest{Method: "GET", Headers: map[string][]string{"a": {"b"}}, Query: map[string][]string{"q": {"1"}}}
	rec := AppendRequest(nil, &r)
	rec = SetPrincipal(rec, "alice")
	rec = SetPrincipal(rec, "bob")
	v, err := ParseRequest(rec)
	if err != nil {
		t.Fatal(err)
	}
	r.Principal = "bob"
	if got := v.AuthRequest(); !reflect.DeepEqual(got, r) {
		t.Errorf("got %+v, want %+v", got, r)
	}
}

func TestPack(t *testing.T) {
	p, n := Unpack(Pack(0xdeadbeef, 42))
	if p != 0xdeadbeef || n != 42 {
		t.Errorf("got %x %d", p, n)
	}
}

// A long answer text is cut to MaxText at a UTF-8 boundary, before it is
// copied out of the guest's memory.
func TestCutText(t *testing.T) {
	long := strings.Repeat("é", MaxText) // 2 bytes each
	for _, tt := range []struct {
		in   string
		want int
	}{
		{"short", 5}, {strings.Repeat("a", MaxText+1), MaxText}, {long, MaxText}, {"a" + long, MaxText - 1},
	} {
		if got := CutText([]byte(tt.in)); len(got) != tt.want || !utf8.Valid(got) && utf8.ValidString(tt.in) {
			t.Errorf("CutText(%d bytes) = %d bytes (valid %v), want %d", len(tt.in), len(got), utf8.Valid(got), tt.want)
		}
	}
	d, _, err := ParseAnswer(append([]byte{VerdictDeny, 0, 0, 0, 0, 0, 0, 0}, "a"+long...), Version)
	if err != nil || len(d.Message) != MaxText-1 || !utf8.ValidString(d.Message) {
		t.Errorf("ParseAnswer: %d bytes, %v", len(d.Message), err)
	}
}
