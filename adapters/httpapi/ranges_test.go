package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCanonicalRange: each shape of RFC 9110 section 14.1.1, valid or not.
// ok false means the header is ignored (200, the whole file).
func TestCanonicalRange(t *testing.T) {
	for _, tt := range []struct {
		header string
		size   int64
		want   string
		ok     bool
	}{
		// Valid; none overlaps: 416 with Content-Range: bytes */SIZE.
		{"bytes=-0", 10, "bytes=10-", true},
		{"bytes=10-", 10, "bytes=10-", true},
		{"bytes=10-20", 10, "bytes=10-", true},
		{"bytes=-0, 12-", 10, "bytes=10-", true},
		{"bytes=-1", 0, "bytes=0-", true},
		{"bytes=0-", 0, "bytes=0-", true},
		{"bytes=99999999999999999999-", 10, "bytes=10-", true},
		// Valid; the overlapping ones kept, clamped and canonical.
		{"bytes=-3", 10, "bytes=-3", true},
		{"bytes=9-", 10, "bytes=9-", true},
		{"bytes=0-0", 10, "bytes=0-0", true},
		{"bytes=-0,0-0", 10, "bytes=0-0", true},
		{"bytes=0-1, 10-, -2", 10, "bytes=0-1,-2", true},
		{"bytes=2-100", 10, "bytes=2-9", true},
		{"bytes=3-3", 10, "bytes=3-3", true},
		{"bytes=-20", 10, "bytes=-20", true},
		{"bytes=007-0009", 10, "bytes=7-9", true},
		{"bytes=0-99999999999999999999", 10, "bytes=0-9", true},
		{"bytes=-99999999999999999999", 10, "bytes=-9223372036854775807", true},
		{"Bytes=0-1", 10, "bytes=0-1", true}, // units are case-insensitive
		{"BYTES=0-1", 10, "bytes=0-1", true},
		{"bytes=0-1,,2-3", 10, "bytes=0-1,2-3", true},   // empty list elements
		{"bytes=0-1 ,\t2-3", 10, "bytes=0-1,2-3", true}, // OWS around commas
		{"bytes= 0-1", 10, "bytes=0-1", true},
		// Invalid: ignored, the whole file is served.
		{"bytes=2-1", 10, "", false}, // last-pos < first-pos
		{"bytes=5-2,0-1", 10, "", false},
		{"bytes=0-1,5-2", 10, "", false},
		{"bytes=x-", 10, "", false},
		{"bytes=-", 10, "", false},
		{"bytes=", 10, "", false},
		{"bytes=,", 10, "", false},
		{"bytes=, ,", 10, "", false},
		{"bytes=1", 10, "", false},
		{"bytes=1-2-3", 10, "", false},
		{"bytes=-1-2", 10, "", false},
		{"bytes=1--2", 10, "", false},
		{"bytes=+1-2", 10, "", false},
		{"bytes=1-+2", 10, "", false},
		{"bytes=-+1", 10, "", false},
		{"bytes=-1.5", 10, "", false},
		{"bytes=0x1-2", 10, "", false},
		{"bytes=0 - 1", 10, "", false},
		{"bytes=\u0663-", 10, "", false}, // a non-ASCII digit
		{"bytes 0-1", 10, "", false},
		{"=0-1", 10, "", false},
		{"by tes=0-1", 10, "", false},
		{"", 10, "", false},
		// Another unit: ignored (section 14.2 requires it).
		{"items=0-1", 10, "", false},
		{"none=0-1", 10, "", false},
	} {
		got, ok := canonicalRange(tt.header, tt.size)
		if got != tt.want || ok != tt.ok {
			t.Errorf("canonicalRange(%q, %d) = %q, %v; want %q, %v", tt.header, tt.size, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzCanonicalRange: whatever the header, the result is stable (judging
// it again changes nothing), names only ranges that overlap the file (or
// the one "SIZE-" that stands for none), and http.ServeContent answers it
// with 206, or 416 for that one (200 when it judges the ranges too many,
// or the file empty).
func FuzzCanonicalRange(f *testing.F) {
	for _, s := range []string{"bytes=0-1", "bytes=-0", "bytes=2-1", "Bytes=1-,-3", "bytes=0-1,,9-", "items=1-2", "bytes=99999999999999999999-"} {
		f.Add(s, int64(10))
	}
	f.Fuzz(func(t *testing.T, header string, size int64) {
		size = max(0, size%64)
		out, ok := canonicalRange(header, size)
		if !ok {
			if out != "" {
				t.Fatalf("ignored %q but returned %q", header, out)
			}
			return
		}
		again, ok2 := canonicalRange(out, size)
		if !ok2 || again != out {
			t.Fatalf("%q → %q → %q, %v", header, out, again, ok2)
		}
		none := out == "bytes="+strconv.FormatInt(size, 10)+"-"
		if !none {
			for _, r := range strings.Split(strings.TrimPrefix(out, "bytes="), ",") {
				first, _, _ := strings.Cut(r, "-")
				if first != "" {
					if n, _ := strconv.ParseInt(first, 10, 64); n >= size {
						t.Fatalf("%q → %q keeps %q, past the end of %d bytes", header, out, r, size)
					}
				}
			}
		}
		req := httptest.NewRequest("GET", "/f", nil)
		req.Header.Set("Range", out)
		w := httptest.NewRecorder()
		http.ServeContent(w, req, "", time.Time{}, strings.NewReader(strings.Repeat("x", int(size))))
		switch {
		case none && size == 0 && w.Code == http.StatusOK:
			// ServeContent ignores the Range of an empty file (14.2's
			// MAY): clients that always send one get the empty body.
		case none && w.Code != http.StatusRequestedRangeNotSatisfiable:
			t.Fatalf("%q → %q: %d, want 416", header, out, w.Code)
		case !none && w.Code != http.StatusPartialContent && w.Code != http.StatusOK:
			t.Fatalf("%q → %q: %d", header, out, w.Code)
		}
	})
}
