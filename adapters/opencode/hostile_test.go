package opencode

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

func TestEscapedSlashesInAnIDAreNotAPath(t *testing.T) {
	// An id with encoded slashes and dots ("..%2F..%2Fetc") is an id that
	// does not exist: 404 in OpenCode's shape. It was decoded, cleaned
	// and answered with a redirect to the cleaned path without the
	// /opencode prefix (Location: /etc).
	h := newHarness(t, harnessOptions{})
	id := h.newSession()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct{ method, path string }{
		{"GET", "/session/..%2F..%2Fetc"},
		{"GET", "/session/" + id + "/message/..%2F..%2F"},
		{"POST", "/session/" + id + "%2F..%2F..%2Fsession"},
		{"DELETE", "/session/" + id + "%2F..%2F" + id},
	} {
		req, _ := http.NewRequest(tc.method, h.srv.URL+"/opencode"+tc.path, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Name string }
		if resp.StatusCode != http.StatusNotFound || json.Unmarshal(b, &e) != nil || e.Name != "NotFoundError" {
			t.Errorf("%s %s: %d (Location %q) %s, want 404 NotFoundError", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Location"), b)
		}
	}
	h.ok("GET", "/session/"+id, "", nil) // still there
}
