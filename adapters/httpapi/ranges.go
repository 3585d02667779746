package httpapi

import (
	"math"
	"strconv"
	"strings"
)

// Range requests on GET /v1/fs/file follow RFC 9110 section 14, which
// http.ServeContent does only in part: it answers an invalid header
// ("bytes=2-1", "bytes=x") with 416 where section 14.2 lets a server ignore
// it, knows only a lower-case "bytes" unit (units are case-insensitive,
// 14.1), takes "+5" and spaces inside a range for numbers, and serves
// "bytes=-0" (a valid but unsatisfiable suffix) as a 206 of nothing. So the
// header is judged here first and ServeContent is handed either no Range
// at all or a canonical one:
//
//   - not a valid ranges-specifier, or another unit: the header is ignored
//     and the whole file is served (200), as 14.2 allows for an invalid one
//     and requires for an unknown unit;
//   - valid: only the ranges that overlap the file are kept, rewritten
//     ("first-last" clamped to the file, "first-", "-suffix"); when none
//     does, "bytes=SIZE-", which ServeContent answers with 416 and
//     Content-Range: bytes */SIZE, after its own If-Range check (an If-Range
//     that does not match still gets the whole file). An empty file is the
//     exception ServeContent makes: no range can overlap it, and it is
//     served whole (200, no body), as 14.2 allows, for clients that send a
//     Range with every request.
//
// The grammar (14.1.1, with the list rule of 5.6.1):
//
//	ranges-specifier = range-unit "=" range-set
//	range-set        = 1#range-spec   ; empty elements and OWS around commas allowed
//	range-spec       = int-range / suffix-range / other-range
//	int-range        = first-pos "-" [ last-pos ]   ; invalid when last-pos < first-pos
//	suffix-range     = "-" suffix-length
//	first-pos, last-pos, suffix-length = 1*DIGIT
//
// other-range has no meaning for bytes and counts as invalid. Numbers too
// large for int64 are as large as can be: a first-pos past the end does
// not overlap, a last-pos or suffix past it reaches the end.

// canonicalRange returns the Range header to hand to http.ServeContent for
// a file of size bytes, or ok false to serve the whole file.
func canonicalRange(header string, size int64) (out string, ok bool) {
	unit, set, found := strings.Cut(header, "=")
	if !found || !isToken(unit) || !strings.EqualFold(unit, "bytes") {
		return "", false
	}
	var keep []string
	specs := 0
	for _, spec := range strings.Split(set, ",") {
		spec = strings.Trim(spec, " \t")
		if spec == "" {
			continue // an empty list element
		}
		specs++
		first, last, found := strings.Cut(spec, "-")
		if !found {
			return "", false
		}
		if first == "" { // suffix-range
			n, ok := digits(last)
			if !ok {
				return "", false
			}
			if n > 0 && size > 0 {
				keep = append(keep, "-"+strconv.FormatInt(n, 10))
			}
			continue
		}
		start, ok := digits(first)
		if !ok {
			return "", false
		}
		end := int64(-1)
		if last != "" {
			if end, ok = digits(last); !ok || end < start {
				return "", false
			}
		}
		if start >= size {
			continue // valid, but past the end
		}
		r := strconv.FormatInt(start, 10) + "-"
		if end >= 0 {
			r += strconv.FormatInt(min(end, size-1), 10)
		}
		keep = append(keep, r)
	}
	if specs == 0 {
		return "", false
	}
	if len(keep) == 0 {
		return "bytes=" + strconv.FormatInt(size, 10) + "-", true
	}
	return "bytes=" + strings.Join(keep, ","), true
}

// digits parses 1*DIGIT, saturating at math.MaxInt64.
func digits(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			n = math.MaxInt64
			continue
		}
		n = n*10 + d
	}
	return n, true
}

// isToken reports whether s is an RFC 9110 token (1*tchar).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
