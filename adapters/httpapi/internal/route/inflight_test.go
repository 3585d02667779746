package route

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Bodies are charged to the in-flight budget as their buffer grows, before
// the bytes are read into it: a body is refused as soon as it outgrows what
// is left, an announced length costs nothing until bytes come, and what was
// charged is reported to be given back.
func TestInflightBudget(t *testing.T) {
	b := NewInflight(64 << 10)
	req := func(body string, length int64) *http.Request {
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		r.ContentLength = length
		return r
	}
	if _, charged, err := ReadCharged(req(strings.Repeat("x", 80000), 80000), 1<<20, b); !isKind(err, "overloaded") || charged != 64<<10 {
		t.Fatalf("declared 80000: charged %d, %v", charged, err)
	} else {
		b.Give(charged)
	}
	// An announced length is not charged until bytes come.
	if _, charged, err := ReadCharged(req("{}", 1<<20), 1<<20, b); err != nil || charged != 16<<10 {
		t.Fatalf("declared 1 MiB, sent 2 bytes: charged %d, %v", charged, err)
	} else {
		b.Give(charged)
	}
	body, charged, err := ReadCharged(req(strings.Repeat("x", 60000), 60000), 1<<20, b)
	if err != nil || len(body) != 60000 || charged != 60001 || b.Used() != 60001 {
		t.Fatalf("declared 60000: %d bytes, charged %d, used %d, %v", len(body), charged, b.Used(), err)
	}
	_, charged2, err := ReadCharged(req(strings.Repeat("x", 6000), -1), 1<<20, b)
	if !isKind(err, "overloaded") || charged2 != 4096 || b.Used() != 60001+charged2 {
		t.Fatalf("chunked 6000 with 5535 left: charged %d, used %d, %v", charged2, b.Used(), err)
	}
	b.Give(charged)
	b.Give(charged2)
	if b.Used() != 0 {
		t.Fatalf("used %d after giving back", b.Used())
	}
}

func isKind(err error, kind string) bool {
	p := ProblemFor(context.Background(), err)
	return p.Type == "urn:sandbox-agent:error:"+kind
}
