package wasmpolicy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRunCases(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cases.json")
	doc := `[
	  {"name": "plain allow", "request": {"method": "GET", "path": "/v1/health"}, "want": {"allow": true}},
	  {"name": "header deny", "request": {"method": "GET", "headers": {"X-Fixture": ["deny"]}}, "want": {"allow": false, "status": 451, "message": "fixture says no"}},
	  {"name": "config deny", "config": {"default": "status0"}, "request": {"method": "GET"}, "want": {"allow": false, "status": 403}},
	  {"name": "wrong expectation", "request": {"method": "GET"}, "want": {"allow": false}},
	  {"request": {"method": "GET", "headers": {"x-fixture": ["deny"]}}, "want": {"allow": false, "status": 400}}
	]`
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cases, err := ReadCases(file)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	failed, err := testHost(t).RunCases(context.Background(), Spec{Path: fixtureWasm, CallTimeout: relaxed}, cases, &out)
	if err != nil {
		t.Fatal(err)
	}
	want := `ok    plain allow
ok    header deny
ok    config deny
FAIL  wrong expectation: got pass, want deny
FAIL  case 5: got deny 451 "fixture says no", want deny 400
`
	if failed != 2 || out.String() != want {
		t.Errorf("failed %d, output:\n%s\nwant:\n%s", failed, out.String(), want)
	}
}

func TestReadCasesRejects(t *testing.T) {
	dir := t.TempDir()
	for name, doc := range map[string]string{
		"unknown field": `[{"name": "x", "request": {}, "want": {"allow": true}, "wnat": 1}]`,
		"not a list":    `{"name": "x"}`,
		// No case: "PASS 0 cases" said a policy passed that was never loaded.
		"empty list": `[]`,
		"null":       `null`,
	} {
		p := filepath.Join(dir, "c.json")
		os.WriteFile(p, []byte(doc), 0o600)
		if _, err := ReadCases(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A FIFO is refused at once (it blocked policy test forever).
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := ReadCases(fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("a FIFO: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ReadCases blocked on a FIFO")
	}
}

// A policy that fails (a trap, the time limit) fails its case, even when
// failing closed denies as the case wants: "ok" said a deny the policy
// never made, so a CI run passed a policy that crashes on every request.
func TestRunCasesReportsFailures(t *testing.T) {
	cases := []Case{
		{Name: "want deny, panics", Request: fixtureReq("panic"), Want: Want{Decision: "deny"}},
		{Name: "want deny 403, loops", Request: fixtureReq("loop"), Want: Want{Decision: "deny", Status: 403}},
		{Name: "want pass", Request: fixtureReq("pass"), Want: Want{Decision: "pass"}},
	}
	for _, tt := range []struct {
		failOpen bool
		mode     string
	}{{false, "denied (fail closed)"}, {true, "passed on (fail=open)"}} {
		var out strings.Builder
		failed, err := testHost(t).RunCases(context.Background(), Spec{Path: fixtureWasm, Name: "fx", CallTimeout: 300 * time.Millisecond, FailOpen: tt.failOpen}, cases, &out)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if failed != 2 || len(lines) != 3 ||
			!strings.HasPrefix(lines[0], "FAIL  want deny, panics: policy fx failed: ") || !strings.HasSuffix(lines[0], "; "+tt.mode) ||
			!strings.Contains(lines[1], "policy fx failed: time limit exceeded") || lines[2] != "ok    want pass" {
			t.Errorf("fail open %v: failed %d, output:\n%s", tt.failOpen, failed, out.String())
		}
	}
}
