package route

import (
	"io"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
)

// A limit given as the largest number ("any size", --max-acp-body or
// --max-upload 9223372036854775807) reads bodies whole. limit+1 used to
// wrap to a negative slice bound: every ACP POST and PUT panicked (500).
// A client announcing a length of MaxInt64 is no different.
func TestLimitAtMaxInt64(t *testing.T) {
	for _, length := range []int64{-1, 5, math.MaxInt64} {
		r := httptest.NewRequest("POST", "/", strings.NewReader("hello"))
		r.ContentLength = length
		b, charged, err := ReadCharged(r, math.MaxInt64, NewInflight(math.MaxInt64))
		if length == math.MaxInt64 {
			// The body ends early: the read fails as net/http's would, never panics.
			if err == nil && string(b) != "hello" {
				t.Errorf("length %d: %q", length, b)
			}
			continue
		}
		if err != nil || string(b) != "hello" || charged <= 0 {
			t.Errorf("length %d: %q, charged %d, %v", length, b, charged, err)
		}
		r = httptest.NewRequest("PUT", "/", strings.NewReader("hello"))
		body, err := LimitBody(r, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := io.ReadAll(body); err != nil || string(got) != "hello" {
			t.Errorf("LimitBody: %q, %v", got, err)
		}
	}
	if PlusOne(math.MaxInt64) != math.MaxInt64 || PlusOne(1) != 2 {
		t.Error("PlusOne")
	}
}
