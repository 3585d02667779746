package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// TestConfigOnDisk checks where and how /v1/config stores entries with the
// default backend: <directory>/.sandbox-agent/config/*.json, a relative
// directory resolving against the daemon's working directory.
func TestConfigOnDisk(t *testing.T) {
	t.Parallel()
	d := harness.Start(t, harness.Options{}) // working directory: d.Home
	json := []string{"Content-Type", "application/json"}

	for _, c := range []struct{ target, body string }{
		{"/v1/config/mcp?directory=proj&mcpName=zeta", `{"type":"http","url":"https://z","envHttpHeaders":{"X-Key":"KEY"}}`},
		{"/v1/config/mcp?directory=proj&mcp_name=alpha", `{"type":"stdio","command":["node","s.js"],"environment":{"A":"1"},"timeout":500}`},
		{"/v1/config/skills?directory=" + q(d.Home+"/proj") + "&skillName=s", `{"sources":[{"type":"local","source":"./skills"}]}`},
	} {
		if st, _, body := d.Do("PUT", c.target, []byte(c.body), json...); st != 204 || len(body) != 0 {
			t.Fatalf("PUT %s: %d %s", c.target, st, body)
		}
	}
	mcp, err := os.ReadFile(filepath.Join(d.Home, "proj", ".sandbox-agent", "config", "mcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "alpha": {
    "type": "local",
    "command": [
      "node",
      "s.js"
    ],
    "args": [],
    "env": {
      "A": "1"
    },
    "timeoutMs": 500
  },
  "zeta": {
    "type": "remote",
    "url": "https://z",
    "envHeaders": {
      "X-Key": "KEY"
    }
  }
}`
	if string(mcp) != want {
		t.Fatalf("mcp.json:\n%s", mcp)
	}
	skills, err := os.ReadFile(filepath.Join(d.Home, "proj", ".sandbox-agent", "config", "skills.json"))
	if err != nil || !strings.Contains(string(skills), `"source": "./skills"`) {
		t.Fatalf("skills.json: %s, %v", skills, err)
	}

	st, _, body := d.Do("GET", "/v1/config/mcp?directory="+q(d.Home+"/proj")+"&mcpName=zeta", nil)
	if st != 200 || strings.TrimSpace(string(body)) != `{"type":"remote","url":"https://z","envHeaders":{"X-Key":"KEY"}}` {
		t.Fatalf("GET: %d %s", st, body)
	}
	st, _, body = d.Do("GET", "/v1/config/mcp?directory=proj&mcpName=nope", nil)
	if st != 404 || !strings.Contains(string(body), `"sessionId":"mcp:nope"`) {
		t.Fatalf("GET missing: %d %s", st, body)
	}
	st, _, body = d.Do("PUT", "/v1/config/mcp?directory=proj&mcpName=x", []byte(`{"type":"sse","url":"u"}`), json...)
	if st != 422 || !strings.Contains(string(body), "urn:sandbox-agent:error:invalid_request") {
		t.Fatalf("unknown type: %d %s", st, body)
	}
	st, _, body = d.Do("GET", "/v1/config/skills?directory=proj", nil)
	if st != 400 || !strings.Contains(string(body), "missing required 'skillName' query parameter") {
		t.Fatalf("missing name: %d %s", st, body)
	}

	// DELETE rewrites the file without the entry; deleting again is fine.
	for range 2 {
		if st, _, body := d.Do("DELETE", "/v1/config/mcp?directory=proj&mcpName=zeta", nil); st != 204 {
			t.Fatalf("DELETE: %d %s", st, body)
		}
	}
	mcp, _ = os.ReadFile(filepath.Join(d.Home, "proj", ".sandbox-agent", "config", "mcp.json"))
	if strings.Contains(string(mcp), "zeta") || !strings.Contains(string(mcp), "alpha") {
		t.Fatalf("after delete:\n%s", mcp)
	}

	// A corrupt file is the client's to fix: 400, and it is left alone.
	corrupt := filepath.Join(d.Home, "bad", ".sandbox-agent", "config", "mcp.json")
	if err := os.MkdirAll(filepath.Dir(corrupt), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(corrupt, []byte(`{"x": {`), 0o644); err != nil {
		t.Fatal(err)
	}
	st, _, body = d.Do("PUT", "/v1/config/mcp?directory=bad&mcpName=y", []byte(`{"type":"local","command":"c"}`), json...)
	if st != 400 || !strings.Contains(string(body), "invalid config file") {
		t.Fatalf("corrupt file: %d %s", st, body)
	}
	if b, _ := os.ReadFile(corrupt); string(b) != `{"x": {` {
		t.Fatalf("corrupt file rewritten: %q", b)
	}
}

// TestConfigUnderFSRoot checks that --fs-root confines config files too:
// relative directories resolve against the root, and none can leave it.
func TestConfigUnderFSRoot(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	root := filepath.Join(parent, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	d := harness.Start(t, harness.Options{Args: []string{"--fs-root", root}})
	json := []string{"Content-Type", "application/json"}
	if st, _, body := d.Do("PUT", "/v1/config/mcp?directory=proj&mcpName=m", []byte(`{"type":"local","command":"c"}`), json...); st != 204 {
		t.Fatalf("PUT: %d %s", st, body)
	}
	if _, err := os.Stat(filepath.Join(root, "proj", ".sandbox-agent", "config", "mcp.json")); err != nil {
		t.Fatalf("not under the root: %v", err)
	}
	for _, dir := range []string{"..", "../root-secret", parent, "/tmp"} {
		st, _, body := d.Do("PUT", "/v1/config/mcp?directory="+q(dir)+"&mcpName=m", []byte(`{"type":"local","command":"c"}`), json...)
		if st != 400 || !strings.Contains(string(body), "escapes the filesystem root") {
			t.Errorf("directory %q: %d %s", dir, st, body)
		}
	}
	entries, _ := os.ReadDir(parent)
	if len(entries) != 1 {
		t.Fatalf("config written outside the root: %v", entries)
	}
}
