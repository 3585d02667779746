package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/app/files"
)

func TestConfigRoutes(t *testing.T) {
	tests := []struct {
		name   string
		calls  []fsCall // earlier calls set the scene; the last one is checked
		status int
		body   string // exact body, when set
		want   string // substring, when set
	}{
		{name: "put then get mcp", calls: []fsCall{
			{method: "PUT", target: "/v1/config/mcp?directory=/w&mcpName=gh", headers: jsonCT,
				body: []byte(`{"type":"http","url":"https://gh","bearer_token_env_var":"T","unknown":1}`)},
			{method: "GET", target: "/v1/config/mcp?directory=/w&mcpName=gh"},
		}, status: 200, body: `{"type":"remote","url":"https://gh","bearerTokenEnvVar":"T"}`},
		{name: "put answers 204", calls: []fsCall{
			{method: "PUT", target: "/v1/config/mcp?directory=/w&mcpName=gh", headers: jsonCT, body: []byte(`{"type":"local","command":"npx"}`)},
		}, status: 204, body: ``},
		{name: "snake-case name alias", calls: []fsCall{
			{method: "PUT", target: "/v1/config/mcp?directory=/w&mcp_name=loc", headers: jsonCT, body: []byte(`{"type":"stdio","command":["a","b"],"timeout":7}`)},
			{method: "GET", target: "/v1/config/mcp?directory=/w&mcpName=loc"},
		}, status: 200, body: `{"type":"local","command":["a","b"],"args":[],"timeoutMs":7}`},
		{name: "relative directory", calls: []fsCall{
			{method: "PUT", target: "/v1/config/mcp?directory=proj&mcpName=x", headers: jsonCT, body: []byte(`{"type":"local","command":"c"}`)},
			{method: "GET", target: "/v1/config/mcp?directory=/home/u/proj&mcpName=x"},
		}, status: 200},
		{name: "get missing mcp", calls: []fsCall{{method: "GET", target: "/v1/config/mcp?directory=/w&mcpName=none"}},
			status: 404, body: `{"type":"urn:sandbox-agent:error:session_not_found","title":"Session Not Found","status":404,"detail":"session not found: mcp:none","sessionId":"mcp:none"}`},
		{name: "delete", calls: []fsCall{
			{method: "PUT", target: "/v1/config/mcp?directory=/w&mcpName=gh", headers: jsonCT, body: []byte(`{"type":"local","command":"c"}`)},
			{method: "DELETE", target: "/v1/config/mcp?directory=/w&mcpName=gh"},
			{method: "GET", target: "/v1/config/mcp?directory=/w&mcpName=gh"},
		}, status: 404},
		{name: "delete missing", calls: []fsCall{{method: "DELETE", target: "/v1/config/mcp?directory=/w&mcpName=gh"}}, status: 204},
		{name: "missing directory", calls: []fsCall{{method: "GET", target: "/v1/config/mcp?mcpName=x"}},
			status: 400, want: `"detail":"invalid request: missing required 'directory' query parameter"`},
		{name: "blank name", calls: []fsCall{{method: "DELETE", target: "/v1/config/mcp?directory=/w&mcpName=%20"}},
			status: 400, want: "missing required 'mcpName' query parameter"},
		{name: "blank name on put", calls: []fsCall{{method: "PUT", target: "/v1/config/mcp?directory=/w", headers: jsonCT, body: []byte(`nonsense`)}},
			status: 400, want: "missing required 'mcpName' query parameter"},
		{name: "unknown type", calls: []fsCall{{method: "PUT", target: "/v1/config/mcp?directory=/w&mcpName=x", headers: jsonCT, body: []byte(`{"type":"grpc"}`)}},
			status: 422, want: `"type":"urn:sandbox-agent:error:invalid_request","title":"Invalid Request","status":422,"detail":"invalid request: unknown variant`},
		{name: "missing url", calls: []fsCall{{method: "PUT", target: "/v1/config/mcp?directory=/w&mcpName=x", headers: jsonCT, body: []byte(`{"type":"remote"}`)}},
			status: 422, want: "missing field `url`"},
		{name: "not json", calls: []fsCall{{method: "PUT", target: "/v1/config/mcp?directory=/w&mcpName=x", headers: jsonCT, body: []byte(`{"type":`)}},
			status: 400, want: "invalid JSON body"},
		{name: "wrong media type", calls: []fsCall{{method: "PUT", target: "/v1/config/mcp?directory=/w&mcpName=x",
			headers: map[string]string{"Content-Type": "text/plain"}, body: []byte(`{"type":"local","command":"c"}`)}},
			status: 415},
		{name: "corrupt file", calls: []fsCall{
			{method: "PUT", target: "/v1/fs/file?path=/w/.sandbox-agent/config/mcp.json", body: []byte(`{"x":`)},
			{method: "GET", target: "/v1/config/mcp?directory=/w&mcpName=x"},
		}, status: 400, want: "invalid config file /w/.sandbox-agent/config/mcp.json"},
		{name: "put then get skills", calls: []fsCall{
			{method: "PUT", target: "/v1/config/skills?directory=/w&skillName=s", headers: jsonCT,
				body: []byte(`{"sources":[{"subpath":"p","source":"o/r","type":"github","skills":["a"]}]}`)},
			{method: "GET", target: "/v1/config/skills?directory=/w&skill_name=s"},
		}, status: 200, body: `{"sources":[{"type":"github","source":"o/r","skills":["a"],"subpath":"p"}]}`},
		{name: "get missing skills", calls: []fsCall{{method: "GET", target: "/v1/config/skills?directory=/w&skillName=none"}},
			status: 404, want: `"sessionId":"skills:none"`},
		{name: "skills without sources", calls: []fsCall{{method: "PUT", target: "/v1/config/skills?directory=/w&skillName=s", headers: jsonCT, body: []byte(`{}`)}},
			status: 422, want: "missing field `sources`"},
		{name: "delete skills", calls: []fsCall{{method: "DELETE", target: "/v1/config/skills?directory=/w&skillName=s"}}, status: 204},
		{name: "skills blank name", calls: []fsCall{{method: "GET", target: "/v1/config/skills?directory=/w&skillName="}},
			status: 400, want: "missing required 'skillName' query parameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fsServer(t, afero.NewMemMapFs(), "/home/u", 0)
			var r fsReply
			for _, c := range tt.calls {
				r = fsDo(t, srv, c)
			}
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			if tt.body != "" || tt.status == 204 {
				if strings.TrimSuffix(string(r.body), "\n") != tt.body {
					t.Fatalf("body %s\nwant %s", r.body, tt.body)
				}
			}
			if tt.want != "" && !strings.Contains(string(r.body), tt.want) {
				t.Fatalf("body %s\nlacks %s", r.body, tt.want)
			}
		})
	}
}

func TestConfigFileOnDisk(t *testing.T) {
	fsys := afero.NewMemMapFs()
	srv := fsServer(t, fsys, "/home/u", 0)
	for _, name := range []string{"zed", "alpha"} {
		r := fsDo(t, srv, fsCall{method: "PUT", target: "/v1/config/mcp?directory=/w&mcpName=" + name, headers: jsonCT,
			body: []byte(`{"type":"local","command":"<c>","env":{"B":"1","A":"2"}}`)})
		if r.status != 204 {
			t.Fatalf("put: %d %s", r.status, r.body)
		}
	}
	b, err := afero.ReadFile(fsys, "/w/.sandbox-agent/config/mcp.json")
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "alpha": {
    "type": "local",
    "command": "<c>",
    "args": [],
    "env": {
      "A": "2",
      "B": "1"
    }
  },
  "zed": {
    "type": "local",
    "command": "<c>",
    "args": [],
    "env": {
      "A": "2",
      "B": "1"
    }
  }
}`
	if string(b) != want {
		t.Fatalf("file:\n%s", b)
	}
	r := fsDo(t, srv, fsCall{method: "GET", target: "/v1/config/mcp?directory=/w&mcpName=alpha"})
	if strings.TrimSpace(string(r.body)) != `{"type":"local","command":"<c>","args":[],"env":{"A":"2","B":"1"}}` {
		t.Fatalf("get: %s", r.body)
	}
}

// Reading a config file holds several times its size (the file, the
// entries, the file written back or the entry answered); that is charged
// to the in-flight budget until the request is answered, so requests on
// large config files wait (503, Retry-After) instead of each holding
// hundreds of megabytes: ten GETs of a 16 MiB mcp.json at once peaked at
// 2.9 GB. A file costing more than the whole budget is served when the
// daemon is otherwise idle.
func TestConfigReadsCharged(t *testing.T) {
	fsys := afero.NewMemMapFs()
	doc := `{"big":{"type":"local","command":"c","args":["` + strings.Repeat("a", 200<<10) + `"]}}`
	if err := afero.WriteFile(fsys, "/w/.sandbox-agent/config/mcp.json", []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Files: &files.Files{Fs: fsys, Home: "/"}, Config: &files.ConfigStore{Fs: fsys, Base: "/"}, InflightBytes: 1 << 20}
	cfg.fill()
	srv := httptest.NewServer(New(cfg))
	defer srv.Close()
	budget := cfg.env.Budget
	get := fsCall{method: "GET", target: "/v1/config/mcp?directory=/w&mcpName=big"}
	put := fsCall{method: "PUT", target: "/v1/config/mcp?directory=/w&mcpName=x", headers: jsonCT, body: []byte(`{"type":"local","command":"c"}`)}
	del := fsCall{method: "DELETE", target: "/v1/config/mcp?directory=/w&mcpName=x"}

	// 200 KiB × 12, cut to half the budget, does not fit beside 600 KiB
	// held by others.
	if !budget.Take(600 << 10) {
		t.Fatal("take")
	}
	for _, c := range []fsCall{get, put, del} {
		r := fsDo(t, srv, c)
		if r.status != 503 || r.header.Get("Retry-After") == "" || !strings.Contains(string(r.body), "overloaded") {
			t.Errorf("%s with the budget half spent: %d %v %s", c.method, r.status, r.header, r.body)
		}
	}
	// A small config elsewhere still fits.
	if r := fsDo(t, srv, fsCall{method: "GET", target: "/v1/config/mcp?directory=/other&mcpName=x"}); r.status != 404 {
		t.Errorf("a directory without a file: %d %s", r.status, r.body)
	}
	budget.Give(600 << 10)
	for _, c := range []fsCall{get, put, del} {
		if r := fsDo(t, srv, c); r.status >= 300 {
			t.Errorf("%s: %d %.200s", c.method, r.status, r.body)
		}
	}
	if u := budget.Used(); u != 0 {
		t.Errorf("%d bytes still charged after the answers", u)
	}
}
