package httpapi

import (
	"net/http/httptest"
	"net/url"
	"path"
	"reflect"
	"testing"

	"github.com/danielgtaylor/huma/v2/queryparam"
	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi/internal/route"
	"github.com/sandbox-agent-go/sandbox-agent/app/acp"
	"github.com/sandbox-agent-go/sandbox-agent/app/files"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// A policy judges the query the operation acts on. The policy here
// refuses recursive deletes by reading the query itself (as a custom
// policy may: no typed accessor says "recursive"). "?recursive" with no
// "=" is true to huma, which binds the operation's parameters, and "" to
// url.ParseQuery, which the policies' view was built with: the policy
// passed it and the tree was deleted.
func TestPolicySeesTheQueryTheOperationReads(t *testing.T) {
	fsys := afero.NewMemMapFs()
	home := "/home/u"
	if err := afero.WriteFile(fsys, path.Join(home, "tree/a/b.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fa := &fakeAuthorizer{decide: func(r domain.AuthRequest) (domain.Decision, error) {
		if v := r.Query["recursive"]; r.Action == domain.ActionFSWrite && len(v) > 0 && v[0] == "true" {
			return domain.Decision{Verdict: domain.Deny, Status: 403, Message: "no recursive deletes"}, nil
		}
		return domain.Decision{Verdict: domain.Pass}, nil
	}}
	srv := httptest.NewServer(New(Config{
		Instances:  acp.NewInstances(acp.DefaultOptions(), nil, nil),
		Files:      &files.Files{Fs: fsys, Home: home},
		Token:      "tok",
		Authorizer: fa,
	}))
	t.Cleanup(srv.Close)
	for _, q := range []string{"path=tree&recursive=true", "path=tree&recursive", "recursive&path=tree&recursive"} {
		st, body := send(t, srv, "DELETE", "/v1/fs/entry?"+q, "")
		if st != 403 {
			t.Errorf("DELETE ?%s: %d %s, want the policy's 403", q, st, body)
		}
		if _, err := fsys.Stat(path.Join(home, "tree/a/b.txt")); err != nil {
			t.Fatalf("DELETE ?%s deleted the tree (%d %s)", q, st, body)
		}
	}
}

// QueryAsRead's first value of each name is huma's; later values follow.
func TestQueryAsRead(t *testing.T) {
	for raw, want := range map[string]map[string][]string{
		"a=1&a=2":        {"a": {"1", "2"}},
		"flag":           {"flag": {"true"}},
		"flag&a=1":       {"flag": {""}, "a": {"1"}}, // huma reads "flag&a" as one name there
		"a=1;&a=2":       {"a": {"1;", "2"}},
		"a=%zz&a=2":      {"a": {"", "2"}},
		"%zz=1&b=2":      {"b": {"2"}},
		"a=x+y&b=%2F":    {"a": {"x y"}, "b": {"/"}},
		"a=b=c":          {"a": {"b=c"}},
		"&&a=1&":         {"a": {"1"}},
		"access_token=t": {"access_token": {"t"}},
	} {
		if got := route.QueryAsRead(raw); !reflect.DeepEqual(got, want) {
			t.Errorf("QueryAsRead(%q) = %v, want %v", raw, got, want)
		}
	}
}

// FuzzQueryAsRead: for every name in the view, its first value is what
// huma binds; every name url.ParseQuery finds is in the view.
func FuzzQueryAsRead(f *testing.F) {
	for _, s := range []string{"a=1&a=2", "flag", "a=1;&a=2", "a=%zz&a=2", "x&path=/etc", "a=b=c&&"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got := route.QueryAsRead(raw)
		for name, vals := range got {
			if len(vals) == 0 || vals[0] != queryparam.Get(raw, name) {
				t.Fatalf("%q: %q first value %q, huma reads %q", raw, name, vals, queryparam.Get(raw, name))
			}
		}
		std, _ := url.ParseQuery(raw)
		for name := range std {
			if _, ok := got[name]; !ok {
				t.Fatalf("%q: %q missing from %v (ParseQuery: %v)", raw, name, got, std)
			}
		}
	})
}

// OpenCode's routes read their query with net/url: the policies see that
// reading there (a pair with ';' is dropped by both).
func TestPolicySeesOpenCodesQuery(t *testing.T) {
	fa := &fakeAuthorizer{decide: allowAll}
	srv := httptest.NewServer(New(Config{Instances: acp.NewInstances(acp.DefaultOptions(), nil, nil), Token: "tok", Authorizer: fa, OpenCode: &fakeOpenCode{}}))
	t.Cleanup(srv.Close)
	if st, body := send(t, srv, "GET", "/opencode/session?directory=/etc;&directory=/srv&flag", ""); st != 200 {
		t.Fatalf("%d %s", st, body)
	}
	got := fa.requests()
	if want := map[string][]string{"directory": {"/srv"}, "flag": {""}}; len(got) != 1 || !reflect.DeepEqual(got[0].Query, want) {
		t.Errorf("the policy saw %v, want %v (net/url's reading)", got[0].Query, want)
	}
}
