package httpapi

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/app/agents"
	"github.com/sandbox-agent-go/sandbox-agent/app/files"
)

// Browser safety, token or not: the Host, Origin, Sec-Fetch-Site and
// content-type rules of docs/api.md section 3.
func TestBrowserGuard(t *testing.T) {
	srv := plainServer(t, Config{
		CheckHost: true, AllowedHosts: []string{"sandbox.internal"},
		CORS:    CORS{Origins: []string{"https://app.example"}},
		Files:   &files.Files{Home: t.TempDir()},
		Catalog: &agents.Catalog{},
	})
	own := "http://" + srv.Listener.Addr().String()
	tests := []struct {
		name, method, path, body string
		hdr                      map[string]string
		status                   int
		kind                     string
	}{
		{"rebinding Host", "GET", "/v1/health", "", map[string]string{"Host": "attacker.example"}, 421, "invalid_request"},
		{"rebinding Host with port", "GET", "/", "", map[string]string{"Host": "attacker.example:2468"}, 421, "invalid_request"},
		{"localhost", "GET", "/v1/health", "", map[string]string{"Host": "localhost:2468"}, 200, ""},
		{"LOCALHOST.", "GET", "/v1/health", "", map[string]string{"Host": "LOCALHOST."}, 200, ""},
		{"ipv6 loopback", "GET", "/v1/health", "", map[string]string{"Host": "[::1]:80"}, 200, ""},
		{"127.0.0.2", "GET", "/v1/health", "", map[string]string{"Host": "127.0.0.2"}, 200, ""},
		{"--allowed-host", "GET", "/v1/health", "", map[string]string{"Host": "Sandbox.Internal:9"}, 200, ""},
		{"a name that ends like localhost", "GET", "/v1/health", "", map[string]string{"Host": "evil-localhost"}, 421, "invalid_request"},

		{"no-cors mkdir from another site", "POST", "/v1/fs/mkdir?path=pwned", "", map[string]string{"Origin": "https://evil.example"}, 403, "permission_denied"},
		{"cross-site install", "POST", "/v1/agents/mock/install", "", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, 403, "permission_denied"},
		{"Sec-Fetch-Site cross-site without Origin", "DELETE", "/v1/acp/x", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "permission_denied"},
		{"same-site other port", "DELETE", "/v1/acp/x", "", map[string]string{"Origin": "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site"}, 403, "permission_denied"},
		{"null origin", "DELETE", "/v1/acp/x", "", map[string]string{"Origin": "null"}, 403, "permission_denied"},
		{"cross-site WebSocket upgrade", "GET", "/v1/health", "", map[string]string{"Origin": "https://evil.example", "Upgrade": "websocket", "Connection": "Upgrade"}, 403, "permission_denied"},
		{"cross-site GET is not state-changing", "GET", "/v1/health", "", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, 200, ""},
		{"own origin (the inspector)", "DELETE", "/v1/acp/x", "", map[string]string{"Origin": own, "Sec-Fetch-Site": "same-origin"}, 204, ""},
		{"-O origin", "DELETE", "/v1/acp/x", "", map[string]string{"Origin": "https://app.example", "Sec-Fetch-Site": "cross-site"}, 204, ""},
		{"no browser headers (a CLI)", "DELETE", "/v1/acp/x", "", nil, 204, ""},

		{"another site's <script src> of a file", "GET", "/v1/fs/file?path=a.js", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "script"}, 403, "permission_denied"},
		{"another site's <img src>", "GET", "/v1/health", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}, 403, "permission_denied"},
		{"another site's HEAD no-cors", "HEAD", "/v1/health", "", map[string]string{"Sec-Fetch-Site": "Cross-Site", "Sec-Fetch-Mode": "No-Cors"}, 403, ""},
		{"another site's CORS fetch (the browser enforces -O)", "GET", "/v1/health", "", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"}, 200, ""},
		{"a link from another site", "GET", "/v1/health", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, 200, ""},
		{"the inspector's own <img>", "GET", "/v1/health", "", map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "no-cors"}, 200, ""},
		{"another port of localhost is same-site", "GET", "/v1/health", "", map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors"}, 200, ""},

		{"move without Content-Type", "POST", "/v1/fs/move", `{"from":"a","to":"b"}`, map[string]string{"Content-Type": ""}, 415, "unsupported_media_type"},
		{"move as text/plain", "POST", "/v1/fs/move", `{"from":"a","to":"b"}`, map[string]string{"Content-Type": "text/plain"}, 415, "unsupported_media_type"},
		{"install with a text/plain body", "POST", "/v1/agents/nope/install", `{}`, map[string]string{"Content-Type": "text/plain"}, 415, "unsupported_media_type"},
		{"install without a body needs no type", "POST", "/v1/agents/not-an-agent!/install", "", nil, 400, "unsupported_agent"},
		{"ACP POST as text/plain", "POST", "/v1/acp/x?agent=mock", `{}`, map[string]string{"Content-Type": "text/plain"}, 415, "unsupported_media_type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			for k, v := range tt.hdr {
				if k == "Host" {
					req.Host = v
					continue
				}
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, b)
			}
			if tt.kind != "" {
				wantProblem(t, problemOf(t, resp, b), tt.kind, "")
			}
		})
	}
}

// With -O '*' any site may read the daemon's answers through CORS, so
// embedding one (no-cors) is no more than that: not refused.
func TestEmbeddingWithWildcardCORS(t *testing.T) {
	srv := plainServer(t, Config{CORS: CORS{Origins: []string{"*"}}})
	resp, b := doHTTP(t, "GET", srv.URL+"/v1/health", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
}

// Every answer says nosniff, whoever writes it: a route, a problem, the
// browser guard, an unknown path, the UI, an SSE stream, a file: so no
// browser runs or renders a body as other than its Content-Type.
func TestNosniffEverywhere(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "page.html"), []byte("<script>alert(1)</script>"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := plainServer(t, Config{
		CheckHost: true, Token: "t",
		Files: &files.Files{Fs: afero.NewOsFs(), Home: home},
		UI:    http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ui")) }),
	})
	auth := map[string]string{"Authorization": "Bearer t"}
	for _, tt := range []struct {
		name, method, path string
		hdr                map[string]string
		status             int
	}{
		{"json", "GET", "/v1/health", auth, 200},
		{"root", "GET", "/", nil, 200},
		{"401", "GET", "/v1/health", nil, 401},
		{"421", "GET", "/v1/health", map[string]string{"Host": "evil.example"}, 421},
		{"403 cross-site", "DELETE", "/v1/acp/x", map[string]string{"Origin": "https://evil.example", "Authorization": "Bearer t"}, 403},
		{"404", "GET", "/nope", nil, 404},
		{"ui", "GET", "/ui/", nil, 200},
		{"file", "GET", "/v1/fs/file?path=page.html", auth, 200},
		{"file range", "GET", "/v1/fs/file?path=page.html", map[string]string{"Authorization": "Bearer t", "Range": "bytes=0-3"}, 206},
		{"file 416", "GET", "/v1/fs/file?path=page.html", map[string]string{"Authorization": "Bearer t", "Range": "bytes=900-"}, 416},
		{"openapi", "GET", "/openapi.json", nil, 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			for k, v := range tt.hdr {
				if k == "Host" {
					req.Host = v
				} else {
					req.Header.Set(k, v)
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, b)
			}
			if got := resp.Header.Values("X-Content-Type-Options"); len(got) != 1 || got[0] != "nosniff" {
				t.Errorf("X-Content-Type-Options = %q", got)
			}
		})
	}
	// Two credentials are refused (400) behind the browser guard: with
	// nosniff, and after the Host check, which answers a rebinding name
	// whatever else the request holds.
	for _, tt := range []struct {
		name, host string
		status     int
	}{{"400 two credentials", "", 400}, {"421 before two credentials", "evil.example", 421}} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", srv.URL+"/v1/health", nil)
			req.Header["Authorization"] = []string{"Bearer t", "Bearer t"}
			if tt.host != "" {
				req.Host = tt.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if got := resp.Header.Values("X-Content-Type-Options"); len(got) != 1 || got[0] != "nosniff" {
				t.Errorf("X-Content-Type-Options = %q", got)
			}
		})
	}
}

// Without CheckHost (a listener on a public address) any Host is served.
func TestHostNotCheckedOffLoopback(t *testing.T) {
	srv := plainServer(t, Config{})
	req, _ := http.NewRequest("GET", srv.URL+"/v1/health", nil)
	req.Host = "sandbox.example.com"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("status %d", resp.StatusCode)
	}
}

// Headers over the limit, and requests net/http cannot parse, get
// problems too, not net/http's text/plain.
func TestCannedErrorsAreProblems(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const limit = 4096
	srv := &http.Server{Handler: New(Config{}), MaxHeaderBytes: limit, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(WrapListener(ln, limit))
	defer srv.Close()

	for _, tt := range []struct {
		name, request string
		status        int
	}{
		{"header too large", "GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 3*limit) + "\r\n\r\n", 431},
		{"malformed", "GET /v1/health HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", 400},
		{"normal", "GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			go io.WriteString(c, tt.request)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if tt.status == 200 {
				return
			}
			m := problemOf(t, resp, b)
			wantProblem(t, m, "invalid_request", "")
			if tt.status == 431 {
				var p Problem
				_ = json.Unmarshal(b, &p)
				if p.Details["limitBytes"] != float64(limit) {
					t.Errorf("details %v", p.Details)
				}
			}
		})
	}
}
