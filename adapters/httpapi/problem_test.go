package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// problemOf decodes a problem response and checks its content type.
func problemOf(t *testing.T, resp *http.Response, body []byte) map[string]any {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q for %d %s", ct, resp.StatusCode, body)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("problem body %q: %v", body, err)
	}
	if m["status"] != float64(resp.StatusCode) {
		t.Errorf("status %v in body, %d on the wire", m["status"], resp.StatusCode)
	}
	return m
}

func wantProblem(t *testing.T, m map[string]any, kind, detail string) {
	t.Helper()
	if m["type"] != "urn:sandbox-agent:error:"+kind || (detail != "" && m["detail"] != detail) {
		t.Errorf("problem %v, want kind %s detail %q", m, kind, detail)
	}
}

// Errors raised by huma itself (parameter parsing, body decoding) use the
// same problem shape as ours.
func TestHumaErrorsAreProblems(t *testing.T) {
	srv, _ := agentsServer(t)
	tests := []struct {
		name, method, path, body string
		status                   int
	}{
		{"bad boolean query", "GET", "/v1/agents?config=maybe", "", 400}, // as the reference
		{"bad JSON body", "POST", "/v1/agents/mock/install", "{", 400},
		{"wrong body type", "POST", "/v1/agents/mock/install", `{"reinstall":"yes"}`, 422},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := doHTTP(t, tt.method, srv.URL+tt.path, tt.body, map[string]string{"Content-Type": "application/json"})
			m := problemOf(t, resp, body)
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			wantProblem(t, m, "invalid_request", "")
			if d, _ := m["detail"].(string); !strings.HasPrefix(d, "invalid request: ") {
				t.Errorf("detail %q", d)
			}
			if _, ok := m["errors"]; ok {
				t.Errorf("huma's own error shape leaked: %s", body)
			}
		})
	}
}

// doHTTP sends one request and returns the response with its whole body.
func doHTTP(t *testing.T, method, url, body string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" { // the request line's host, not a header
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// huma names the value it refused in its message ("(body: …)"): the whole
// body for one it cannot parse. A problem must not echo it: a 1 MiB body
// of control characters became 12 MB of answer (each escaped six times,
// once in detail and once in details.message), held while the client does
// not read, outside every budget. The value is cut to a short prefix.
func TestHumaErrorsDoNotEchoTheBody(t *testing.T) {
	srv, _ := agentsServer(t)
	big := strings.Repeat("\x01", 1<<19)
	for _, tt := range []struct{ name, ct, body string }{
		{"unparsable", "application/json", big},
		{"unknown type", "application/json-seq", big},
		{"wrong member type", "application/json", `{"reinstall":"` + strings.Repeat("a", 1<<19) + `"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := doHTTP(t, "POST", srv.URL+"/v1/agents/mock/install", tt.body, map[string]string{"Content-Type": tt.ct})
			problemOf(t, resp, body)
			if resp.StatusCode < 400 || resp.StatusCode >= 500 {
				t.Errorf("status %d: %.300s", resp.StatusCode, body)
			}
			if len(body) > 4096 {
				t.Errorf("a %d-byte body got a %d-byte answer: %.300s", len(tt.body), len(body), body)
			}
		})
	}
}
