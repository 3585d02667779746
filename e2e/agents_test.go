package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// noCredentials empties every credential variable the daemon looks at, so
// the listing matches the reference's, taken without credentials.
var noCredentials = []string{
	"ANTHROPIC_API_KEY=", "CLAUDE_API_KEY=", "CLAUDE_CODE_OAUTH_TOKEN=", "ANTHROPIC_AUTH_TOKEN=",
	"OPENAI_API_KEY=", "CODEX_API_KEY=", "AMP_API_KEY=",
}

func compactFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// builtinMock edits the reference's listing where this daemon differs on
// purpose (issue 13): the mock is built in, so installed, and has no
// install path (the reference shows <data>/sandbox-agent/bin/mock, a file
// that never exists).
func builtinMock(t *testing.T, doc []byte) []byte {
	t.Helper()
	out := bytes.Replace(doc, []byte(`{"id":"mock","installed":false,`), []byte(`{"id":"mock","installed":true,`), 1)
	out = bytes.Replace(out, []byte(`"version":"builtin","path":"/home/user/.local/share/sandbox-agent/bin/mock",`), []byte(`"version":"builtin",`), 1)
	if bytes.Count(out, []byte(`{"id":"mock","installed":true,`)) != 1 {
		t.Fatal("the reference listing has no mock entry to edit")
	}
	return out
}

// TestAgentsMatchReference: with nothing installed and no credentials, GET
// /v1/agents answers byte for byte what the reference 0.4.2 answers (key
// order included), with and without ?config=true, but for the built-in
// mock (builtinMock).
func TestAgentsMatchReference(t *testing.T) {
	t.Parallel()
	reg := newACPRegistry(t, `{"agents":[]}`)
	d := harness.Start(t, harness.Options{Env: append(reg.env(), noCredentials...)})

	st, _, body := d.Do(http.MethodGet, "/v1/agents", nil)
	if want := builtinMock(t, compactFile(t, "agents-0.4.2.json")); st != 200 || !bytes.Equal(bytes.TrimSpace(body), want) {
		t.Errorf("GET /v1/agents: %d\n got %s\nwant %s", st, body, want)
	}
	st, _, body = d.Do(http.MethodGet, "/v1/agents?config=true", nil)
	want := builtinMock(t, compactFile(t, "agents-config-0.4.2.json"))
	if st != 200 || !bytes.Equal(bytes.TrimSpace(body), want) {
		t.Errorf("GET /v1/agents?config=true: %d\n got %s\nwant %s", st, body, want)
	}

	// One agent, the same entry.
	st, _, body = d.Do(http.MethodGet, "/v1/agents/codex", nil)
	if st != 200 || !bytes.Contains(compactFile(t, "agents-0.4.2.json"), bytes.TrimSpace(body)) {
		t.Errorf("GET /v1/agents/codex: %d %s", st, body)
	}
	st, _, body = d.Do(http.MethodGet, "/v1/agents/nope", nil)
	if st != 400 || !strings.Contains(string(body), `"detail":"unsupported agent: nope"`) {
		t.Errorf("GET /v1/agents/nope: %d %s", st, body)
	}
}

// TestAgentsCredentialsAndStatus: credentials from the environment and
// from credential files (found as `credentials extract` finds them: codex
// by the key in its auth file); serverStatus while an instance runs;
// operator agents after the known ones.
func TestAgentsCredentialsAndStatus(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".codex", "auth.json"), []byte(`{"OPENAI_API_KEY":"sk-codex-test"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := newACPRegistry(t, `{"agents":[]}`)
	env := append(append(reg.env(), noCredentials...), "ANTHROPIC_API_KEY=sk-test")
	d := harness.Start(t, harness.Options{Home: home, Env: env, Args: harness.WithTestAgent(t)})

	if st, body := d.Post("/v1/acp/m1?agent=mock", initialize); st != 200 {
		t.Fatalf("mock: %d %s", st, body)
	}
	type info struct {
		ID                   string
		CredentialsAvailable bool `json:"credentialsAvailable"`
		ServerStatus         *struct {
			Status   string
			UptimeMs *int64 `json:"uptimeMs"`
		} `json:"serverStatus"`
	}
	var list struct{ Agents []info }
	_, _, body := d.Do(http.MethodGet, "/v1/agents", nil)
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	byID := map[string]info{}
	var ids []string
	for _, a := range list.Agents {
		byID[a.ID] = a
		ids = append(ids, a.ID)
	}
	if got := strings.Join(ids, ","); got != "claude,codex,opencode,amp,pi,cursor,mock,test" {
		t.Errorf("ids = %s", got)
	}
	for id, want := range map[string]bool{"claude": true, "codex": true, "opencode": true, "amp": true, "pi": true, "mock": true} {
		if byID[id].CredentialsAvailable != want {
			t.Errorf("%s credentialsAvailable = %v", id, byID[id].CredentialsAvailable)
		}
	}
	if s := byID["mock"].ServerStatus; s == nil || s.Status != "running" || s.UptimeMs == nil {
		t.Errorf("mock serverStatus = %+v", s)
	}
	if byID["claude"].ServerStatus != nil {
		t.Error("claude has a serverStatus without an instance")
	}
	// Once deleted, the mock no longer runs.
	d.Do(http.MethodDelete, "/v1/acp/m1", nil)
	_, _, body = d.Do(http.MethodGet, "/v1/agents/mock", nil)
	if strings.Contains(string(body), "serverStatus") {
		t.Errorf("after DELETE: %s", body)
	}
}

// TestCompatSDKAgents runs the official TypeScript SDK sandbox-agent@0.4.2
// against /v1/agents (list, get, install from a local ACP registry) and a
// mock session.
func TestCompatSDKAgents(t *testing.T) {
	t.Parallel()
	requireNodeModules(t)
	tgz := fixturePackage(t)
	reg := newACPRegistry(t, `{"agents":[`+npxEntry("sdk-fixture", tgz)+`]}`)
	t.Run("no token", func(t *testing.T) {
		d := harness.Start(t, harness.Options{Env: append(reg.env(), npmCacheEnv()...)})
		runNode(t, "sdk-agents.mjs", 120*time.Second, "BASE_URL="+d.URL, "INSTALL_AGENT=sdk-fixture")
	})
	t.Run("token", func(t *testing.T) {
		d := harness.Start(t, harness.Options{Env: append(reg.env(), npmCacheEnv()...), Args: []string{"--token", "s3cret"}})
		runNode(t, "sdk-agents.mjs", 120*time.Second, "BASE_URL="+d.URL, "INSTALL_AGENT=sdk-fixture", "TOKEN=s3cret")
	})
}

// TestRealAgentInstall installs the real Claude ACP adapter
// (@zed-industries/claude-agent-acp, the pinned fallback, from the npm
// registry; npm's cache makes reruns fast) through a lazy bootstrap, and
// the real agent answers initialize. SANDBOX_AGENT_E2E_OFFLINE=1 skips it
// on machines without the npm registry.
func TestRealAgentInstall(t *testing.T) {
	t.Parallel()
	if os.Getenv("SANDBOX_AGENT_E2E_OFFLINE") == "1" {
		t.Skip("SANDBOX_AGENT_E2E_OFFLINE=1")
	}
	requireNodeModules(t)
	reg := newACPRegistry(t, `{"agents":[]}`) // no entry: the pinned fallback
	d := harness.Start(t, harness.Options{Env: append(reg.env(), npmCacheEnv()...)})
	start := time.Now()
	st, body := d.Post("/v1/acp/real?agent=claude", initialize)
	if st != 200 {
		t.Fatalf("initialize: %d %s", st, body)
	}
	t.Logf("install + initialize took %v", time.Since(start))
	var resp struct {
		Result struct {
			ProtocolVersion int `json:"protocolVersion"`
			AgentInfo       struct{ Name, Version string }
		}
	}
	if err := json.Unmarshal(body, &resp); err != nil || resp.Result.ProtocolVersion != 1 ||
		resp.Result.AgentInfo.Name != "@zed-industries/claude-agent-acp" || resp.Result.AgentInfo.Version != "0.20.0" {
		t.Fatalf("initialize answer: %s", body)
	}
	_, _, b := d.Do(http.MethodGet, "/v1/agents/claude?config=true", nil)
	var info struct {
		Installed bool
		Version   string
		Path      string
	}
	if json.Unmarshal(b, &info) != nil || !info.Installed || info.Version != "0.20.0" || !strings.HasSuffix(info.Path, "/agent_processes/claude-acp") {
		t.Errorf("claude after install: %s", b)
	}
	manifest, err := os.ReadFile(filepath.Join(d.Home, ".local/share/sandbox-agent/bin/packages/claude/manifest.json"))
	if err != nil || !strings.Contains(string(manifest), `"source": "fallback"`) || !strings.Contains(string(manifest), "@zed-industries/claude-agent-acp@0.20.0") {
		t.Errorf("manifest: %v\n%s", err, manifest)
	}
}
