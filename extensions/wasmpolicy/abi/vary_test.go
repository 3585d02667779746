package abi

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

func TestVaryRoundTrip(t *testing.T) {
	v := &Vary{Fields: 1<<FieldAction | 1<<FieldRPCMethod, Headers: []string{"Authorization", "x-a"}, Query: []string{"Agent"}}
	for _, d := range []domain.Decision{
		{Verdict: domain.Grant, Principal: "viewer ü"},
		{Verdict: domain.Pass},
		{Status: 451, Message: "no"},
	} {
		ans := AppendDecisionVary([]byte("prefix"), d, v)[len("prefix"):]
		got, failure, err := ParseAnswer(ans, Version)
		if err != nil || failure != "" || got != d {
			t.Errorf("%+v: got %+v %q %v", d, got, failure, err)
		}
		gv, ok := ParseVary(ans)
		want := &Vary{Fields: v.Fields, Headers: []string{"authorization", "x-a"}, Query: []string{"Agent"}}
		if !ok || !reflect.DeepEqual(gv, want) {
			t.Errorf("vary: %+v %v", gv, ok)
		}
	}
	if _, ok := ParseVary(AppendDecision(nil, domain.Decision{Verdict: domain.Pass})); ok {
		t.Error("an answer without a block has a vary")
	}
	// A v1 module's flags byte means nothing: its allow stays a pass.
	if d, _, err := ParseAnswer([]byte{VerdictAllow, FlagVary, 0, 0, 0, 0, 0, 0, 'x'}, 1); err != nil || d.Verdict != domain.Pass {
		t.Errorf("v1: %+v %v", d, err)
	}
	// A block that does not fit is a malformed answer.
	for _, bad := range [][]byte{
		{VerdictPass, FlagVary, 0, 0, 0, 0, 0, 0, 1, 2, 3},
		append([]byte{VerdictPass, FlagVary, 0, 0, 0, 0, 0, 0}, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 'a'),
	} {
		if _, _, err := ParseAnswer(bad, Version); err == nil {
			t.Errorf("%v parsed", bad)
		}
		if _, ok := ParseVary(bad); ok {
			t.Errorf("%v has a vary", bad)
		}
	}
}

func TestAppendKey(t *testing.T) {
	base := domain.AuthRequest{Method: "POST", Action: domain.ActionACPSend, Path: "/a",
		Headers: map[string][]string{"authorization": {"Bearer x"}, "x-b": {"1"}},
		Query:   map[string][]string{"agent": {"mock"}}}
	v := &Vary{Fields: 1 << FieldAction, Headers: []string{"authorization"}, Query: []string{"agent"}}
	key := func(r domain.AuthRequest) []byte {
		rv, err := ParseRequest(AppendRequest(nil, &r))
		if err != nil {
			t.Fatal(err)
		}
		return rv.AppendKey(nil, v)
	}
	k := key(base)
	same := base
	same.Path, same.Headers = "/b", map[string][]string{"authorization": {"Bearer x"}, "x-b": {"2"}}
	if !bytes.Equal(k, key(same)) {
		t.Error("requests alike in what varies have different keys")
	}
	for name, r := range map[string]domain.AuthRequest{
		"action":       {Method: "POST", Action: domain.ActionACPStart, Path: "/a", Headers: base.Headers, Query: base.Query},
		"header value": {Method: "POST", Action: domain.ActionACPSend, Headers: map[string][]string{"authorization": {"Bearer y"}}, Query: base.Query},
		"header twice": {Method: "POST", Action: domain.ActionACPSend, Headers: map[string][]string{"authorization": {"Bearer x", ""}}, Query: base.Query},
		"header gone":  {Method: "POST", Action: domain.ActionACPSend, Query: base.Query},
		"query":        {Method: "POST", Action: domain.ActionACPSend, Headers: base.Headers, Query: map[string][]string{"agent": {"mockx"}}},
	} {
		if bytes.Equal(k, key(r)) {
			t.Errorf("%s: same key", name)
		}
	}
}

// FuzzParseAnswer: whatever a module answers, parsing does not panic, and
// an answer that parses with FlagVary set has a readable vary block, which
// encodes back to an answer meaning the same.
func FuzzParseAnswer(f *testing.F) {
	f.Add(AppendDecisionVary(nil, domain.Decision{Verdict: domain.Grant, Principal: "p"}, &Vary{Fields: 3, Headers: []string{"a"}, Query: []string{"b"}}))
	f.Add(AppendDecision(nil, domain.Decision{Status: 403, Message: "m"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, failure, err := ParseAnswer(b, Version)
		v, ok := ParseVary(b)
		if err != nil || failure != "" || b[1]&FlagVary == 0 {
			return
		}
		if !ok {
			t.Fatalf("%v parsed, but its vary block did not", b)
		}
		again := AppendDecisionVary(nil, d, v)
		d2, _, err := ParseAnswer(again, Version)
		v2, ok := ParseVary(again)
		if err != nil || !ok || d2 != d || v2.Fields != v.Fields || len(v2.Headers) != len(v.Headers) || !reflect.DeepEqual(v2.Query, v.Query) {
			t.Errorf("re-encoded %+v %+v as %+v %+v (%v)", d, v, d2, v2, err)
		}
	})
}
