package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/e2e/internal/harness"
)

// fixtureAgentJS is a minimal ACP agent: it answers initialize with its
// name and every other request with an empty result.
const fixtureAgentJS = `#!/usr/bin/env node
if (process.argv.includes("--help")) { console.log("fixture-agent: a tiny ACP agent"); process.exit(0); }
const rl = require("readline").createInterface({ input: process.stdin });
rl.on("line", (line) => {
  let msg; try { msg = JSON.parse(line); } catch { return; }
  if (msg.id === undefined || !msg.method) return;
  const result = msg.method === "initialize"
    ? { protocolVersion: 1, agentCapabilities: {}, agentInfo: { name: "fixture-agent", version: "1.0.0" }, authMethods: [] }
    : {};
  process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: msg.id, result }) + "\n");
});
`

var (
	fixtureOnce sync.Once
	fixtureTgz  string
	fixtureErr  error
)

// fixturePackage packs the fixture agent into an npm tarball once, so
// installs need no npm registry.
func fixturePackage(t *testing.T) string {
	t.Helper()
	fixtureOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sandbox-agent-fixture-")
		if err != nil {
			fixtureErr = err
			return
		}
		src := filepath.Join(dir, "src")
		os.MkdirAll(filepath.Join(src, "bin"), 0o755)
		os.WriteFile(filepath.Join(src, "package.json"), []byte(`{"name":"fixture-agent","version":"1.0.0","bin":{"fixture-agent":"bin/fixture-agent.js"}}`), 0o644)
		os.WriteFile(filepath.Join(src, "bin", "fixture-agent.js"), []byte(fixtureAgentJS), 0o755)
		cmd := exec.Command("npm", "pack", "--pack-destination", dir, "--loglevel=error", src)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			fixtureErr = &npmError{err: err, out: string(out)}
			return
		}
		fixtureTgz = filepath.Join(dir, "fixture-agent-1.0.0.tgz")
	})
	if fixtureErr != nil {
		t.Fatalf("npm pack fixture: %v", fixtureErr)
	}
	return fixtureTgz
}

// shellAgentTarGz is an archive holding bin/shell-agent, a sh script that
// answers every line with an initialize result for id 1.
func shellAgentTarGz(t *testing.T) []byte {
	t.Helper()
	script := "#!/bin/sh\n[ \"$1\" = --help ] && { echo shell-agent; exit 0; }\n" +
		"while read -r line; do echo '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":1,\"agentInfo\":{\"name\":\"shell-agent\"}}}'; done\n"
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755})
	tw.WriteHeader(&tar.Header{Name: "bin/shell-agent", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(script))})
	tw.Write([]byte(script))
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// acpRegistry is a local ACP registry (and download server) on 127.0.0.1.
// Its document lists the given entries; files are served under /files/.
type acpRegistry struct {
	*httptest.Server
	mu    sync.Mutex
	doc   string
	files map[string][]byte
	hits  int
}

func newACPRegistry(t *testing.T, doc string) *acpRegistry {
	r := &acpRegistry{doc: doc, files: map[string][]byte{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if req.URL.Path == "/registry.json" {
			r.hits++
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(r.doc))
			return
		}
		if b, ok := r.files[strings.TrimPrefix(req.URL.Path, "/files/")]; ok {
			w.Write(b)
			return
		}
		http.NotFound(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

// setDoc replaces the registry document. The registry's handler runs on
// the server's goroutines while daemons are hitting it, so what it serves
// is changed under its lock only.
func (r *acpRegistry) setDoc(doc string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.doc = doc
}

// setFile serves b under /files/name.
func (r *acpRegistry) setFile(name string, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.files[name] = b
}

func (r *acpRegistry) env() []string {
	return []string{"SANDBOX_AGENT_ACP_REGISTRY_URL=" + r.URL + "/registry.json"}
}

// npmCacheEnv keeps npm's download cache in the real home, since each
// daemon gets a fresh HOME.
func npmCacheEnv() []string {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil
	}
	return []string{"npm_config_cache=" + filepath.Join(home, ".npm")}
}

// npxEntry is a registry entry installing the fixture package.
func npxEntry(id, tgz string) string {
	return `{"id":"` + id + `","version":"1.0.0","distribution":{"npx":{"package":"` + tgz + `","args":["--acp"],"env":{"FIXTURE":"1"}}}}`
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`

// TestLazyInstall: the first POST for an agent installs it from the
// registry and starts it; concurrent first POSTs install once; later
// instances reuse the install.
func TestLazyInstall(t *testing.T) {
	t.Parallel()
	requireNodeModules(t) // node runs the fixture agent
	tgz := fixturePackage(t)
	reg := newACPRegistry(t, `{"version":"1","agents":[`+npxEntry("claude-acp", tgz)+`,`+npxEntry("amp-acp", tgz)+`,`+npxEntry("fixture-agent", tgz)+`]}`)
	d := harness.Start(t, harness.Options{Env: append(reg.env(), npmCacheEnv()...)})

	st, body := d.Post("/v1/acp/one?agent=claude", initialize)
	if st != 200 || !strings.Contains(string(body), `"name":"fixture-agent"`) {
		t.Fatalf("initialize via lazy install: %d %s", st, body)
	}
	launcher := filepath.Join(d.Home, ".local/share/sandbox-agent/bin/agent_processes/claude-acp")
	if b, err := os.ReadFile(launcher); err != nil || !strings.Contains(string(b), "export FIXTURE='1'") || !strings.Contains(string(b), "'--acp' \"$@\"") {
		t.Fatalf("launcher: %v\n%s", err, b)
	}

	// Concurrent bootstraps of another agent: one install, every POST served.
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, body := d.Post("/v1/acp/amp-"+string(rune('a'+i))+"?agent=amp", initialize)
			if st != 200 || !strings.Contains(string(body), "fixture-agent") {
				t.Errorf("amp bootstrap %d: %d %s", i, st, body)
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(d.Logs(), "npm install "+tgz); n != 2 {
		t.Errorf("npm install ran %d times for claude and amp, want 2", n)
	}

	// Beyond the reference: an agent only the registry knows.
	st, body = d.Post("/v1/acp/f?agent=fixture-agent", initialize)
	if st != 200 || !strings.Contains(string(body), "fixture-agent") {
		t.Fatalf("registry-only agent: %d %s", st, body)
	}
	// A second instance of claude reuses the install.
	if st, body := d.Post("/v1/acp/two?agent=claude", initialize); st != 200 {
		t.Fatalf("second instance: %d %s", st, body)
	}
	if n := strings.Count(d.Logs(), "npm install "+tgz); n != 3 {
		t.Errorf("npm install ran %d times, want 3", n)
	}

	// The listing shows what is installed and what runs.
	st, _, b := d.Do(http.MethodGet, "/v1/agents", nil)
	var list struct {
		Agents []struct {
			ID           string
			Installed    bool
			ServerStatus *struct{ Status string } `json:"serverStatus"`
		}
	}
	if st != 200 || json.Unmarshal(b, &list) != nil {
		t.Fatalf("list: %d %s", st, b)
	}
	got := map[string]bool{}
	for _, a := range list.Agents {
		got[a.ID] = a.Installed && a.ServerStatus != nil && a.ServerStatus.Status == "running"
	}
	if !got["claude"] || !got["amp"] || !got["fixture-agent"] || got["codex"] {
		t.Errorf("installed and running: %v\n%s", got, b)
	}
	if last := list.Agents[len(list.Agents)-1].ID; last != "fixture-agent" {
		t.Errorf("registry agent listed as %q last, want fixture-agent", last)
	}
}

// TestInstallEndpoint: explicit installs, provenance, idempotence,
// reinstall, binary archives, fallback when the registry has no entry.
func TestInstallEndpoint(t *testing.T) {
	t.Parallel()
	requireNodeModules(t)
	tgz := fixturePackage(t)
	reg := newACPRegistry(t, "")
	reg.setFile("shell-agent-linux.tar.gz", shellAgentTarGz(t))
	binTarget := `{"archive":"` + reg.URL + `/files/shell-agent-linux.tar.gz","cmd":"./bin/shell-agent"}`
	reg.setDoc(`{"agents":[` + npxEntry("codex-acp", tgz) + `,{"id":"shell-agent","version":"0.9.0","distribution":{"binary":{` +
		`"linux-x86_64":` + binTarget + `,"linux-aarch64":` + binTarget + `,"darwin-aarch64":` + binTarget + `,"darwin-x86_64":` + binTarget + `}}}]}`)
	// The fallback case below must not reach the real npm registry; every
	// other install here is of a local tarball.
	env := append(reg.env(), npmCacheEnv()...)
	env = append(env, "npm_config_registry="+deadNPMRegistry(t), "npm_config_fetch_retries=0")
	d := harness.Start(t, harness.Options{Env: env})

	install := func(agent, body string) (int, map[string]any) {
		t.Helper()
		st, _, b := d.Do(http.MethodPost, "/v1/agents/"+agent+"/install", []byte(body), "Content-Type", "application/json")
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("install %s: %d %s", agent, st, b)
		}
		return st, m
	}
	st, res := install("codex", "{}")
	arts, _ := res["artifacts"].([]any)
	if st != 200 || res["already_installed"] != false || len(arts) != 1 {
		t.Fatalf("install codex: %d %v", st, res)
	}
	a := arts[0].(map[string]any)
	if a["kind"] != "agent_process" || a["source"] != "registry" || a["version"] != "1.0.0" || !strings.HasSuffix(a["path"].(string), "/agent_processes/codex-acp") {
		t.Errorf("artifact = %v", a)
	}
	if st, res = install("codex", "{}"); st != 200 || res["already_installed"] != true || len(res["artifacts"].([]any)) != 0 {
		t.Errorf("second install: %d %v", st, res)
	}
	if st, res = install("codex", `{"reinstall":true}`); st != 200 || res["already_installed"] != false {
		t.Errorf("reinstall: %d %v", st, res)
	}

	// A binary archive from the registry, then used through /v1/acp.
	if st, res = install("shell-agent", "{}"); st != 200 || res["artifacts"].([]any)[0].(map[string]any)["version"] != "0.9.0" {
		t.Fatalf("install shell-agent: %d %v", st, res)
	}
	if st, body := d.Post("/v1/acp/sh?agent=shell-agent", initialize); st != 200 || !strings.Contains(string(body), "shell-agent") {
		t.Fatalf("shell-agent initialize: %d %s", st, body)
	}

	// No registry entry: the pinned fallback. Its npm install needs the npm
	// registry, which is dead here: the failure is reported with npm's words.
	st, res = install("pi", "{}")
	if st != 500 || res["type"] != "urn:sandbox-agent:error:install_failed" || res["agent"] != "pi" {
		t.Fatalf("pi without npm registry: %d %v", st, res)
	}
	details, _ := res["details"].(map[string]any)
	if s, _ := details["stderr"].(string); !strings.Contains(s, "npm install pi-acp@") {
		t.Errorf("stderr = %q", s)
	}

	// Unknown agents are 400.
	if st, res = install("nobody", "{}"); st != 400 || res["type"] != "urn:sandbox-agent:error:unsupported_agent" {
		t.Errorf("nobody: %d %v", st, res)
	}
}

// deadNPMRegistry is an npm registry URL nothing listens on.
func deadNPMRegistry(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/"
}

// TestInstallFailures: an unreachable registry and preinstall-only mode.
func TestInstallFailures(t *testing.T) {
	t.Parallel()
	dead := deadNPMRegistry(t)
	t.Run("unreachable registry", func(t *testing.T) {
		d := harness.Start(t, harness.Options{Env: []string{"SANDBOX_AGENT_ACP_REGISTRY_URL=" + dead + "registry.json"}})
		start := time.Now()
		st, body := d.Post("/v1/acp/x?agent=claude", initialize)
		if st != 500 || !strings.Contains(string(body), "install_failed") || !strings.Contains(string(body), dead+"registry.json") {
			t.Fatalf("lazy install with a dead registry: %d %s", st, body)
		}
		t.Logf("failed in %v", time.Since(start))
		st, body = d.Post("/v1/acp/y?agent=not-an-agent", initialize)
		if st != 400 || !strings.Contains(string(body), "unsupported_agent") {
			t.Fatalf("unknown agent with a dead registry: %d %s", st, body)
		}
	})
	// A mirror's URL with credentials: the problem names the mirror, not
	// its password (it reaches every API client).
	t.Run("credentials in the registry URL", func(t *testing.T) {
		withCreds := strings.Replace(dead, "http://", "http://user:s3cret@", 1) + "registry.json"
		d := harness.Start(t, harness.Options{Env: []string{"SANDBOX_AGENT_ACP_REGISTRY_URL=" + withCreds}})
		for path, req := range map[string]string{"/v1/agents/claude/install": "{}", "/v1/acp/x?agent=claude": initialize} {
			st, body := d.Post(path, req)
			if st != 500 || !strings.Contains(string(body), "install_failed") || !strings.Contains(string(body), strings.TrimPrefix(dead, "http://")) || strings.Contains(string(body), "s3cret") {
				t.Errorf("POST %s with a registry URL holding a password: %d %s", path, st, body)
			}
		}
	})
	t.Run("preinstall required", func(t *testing.T) {
		reg := newACPRegistry(t, `{"agents":[]}`)
		d := harness.Start(t, harness.Options{Env: append(reg.env(), "SANDBOX_AGENT_REQUIRE_PREINSTALL=true")})
		st, body := d.Post("/v1/acp/x?agent=codex", initialize)
		if st != 404 || !strings.Contains(string(body), `"type":"urn:sandbox-agent:error:agent_not_installed"`) || !strings.Contains(string(body), `"agent":"codex"`) {
			t.Fatalf("preinstall required: %d %s", st, body)
		}
		// The mock needs no install.
		if st, body := d.Post("/v1/acp/m?agent=mock", initialize); st != 200 {
			t.Fatalf("mock: %d %s", st, body)
		}
	})
}

// TestInstallCLI: install-agent installs without a daemon, with progress on
// stderr; "api agents" talks to a daemon.
func TestInstallCLI(t *testing.T) {
	t.Parallel()
	requireNodeModules(t)
	tgz := fixturePackage(t)
	reg := newACPRegistry(t, `{"agents":[`+npxEntry("claude-acp", tgz)+`]}`)
	home := t.TempDir()
	env := append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, ".local", "share"))
	env = append(append(env, reg.env()...), npmCacheEnv()...)
	run := func(args ...string) (string, string, error) {
		cmd := exec.Command(harness.Binary, args...)
		cmd.Env = env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	out, errOut, err := run("install-agent", "claude")
	if err != nil {
		t.Fatalf("install-agent: %v\n%s", err, errOut)
	}
	var res struct {
		AlreadyInstalled bool `json:"already_installed"`
		Artifacts        []struct{ Source, Path string }
	}
	if json.Unmarshal([]byte(out), &res) != nil || res.AlreadyInstalled || len(res.Artifacts) != 1 || res.Artifacts[0].Source != "registry" {
		t.Fatalf("install-agent output:\n%s", out)
	}
	for _, step := range []string{"claude npm install " + tgz, "claude verify claude-acp --help", "claude installed claude"} {
		if !strings.Contains(errOut, step) {
			t.Errorf("progress lacks %q:\n%s", step, errOut)
		}
	}
	if out, _, err = run("install-agent", "claude"); err != nil || !strings.Contains(out, `"already_installed": true`) {
		t.Errorf("second install-agent: %v\n%s", err, out)
	}
	if _, errOut, err = run("install-agent"); err == nil || !strings.Contains(errOut, "Usage:") {
		t.Errorf("install-agent without agent: %v\n%s", err, errOut)
	}

	d := harness.Start(t, harness.Options{Home: home, Env: reg.env(), Args: []string{"--token", "tok"}})
	// Output to a pipe is compact, one document per line; --format pretty
	// indents it.
	out, errOut, err = run("api", "agents", "list", "--endpoint", d.URL, "--token", "tok")
	if err != nil || !strings.Contains(out, `{"id":"claude","installed":true,`) || strings.Count(out, "\n") != 1 {
		t.Fatalf("api agents list: %v\n%s%s", err, out, errOut)
	}
	out, errOut, err = run("api", "agents", "list", "--format", "pretty", "--endpoint", d.URL, "--token", "tok")
	if err != nil || !strings.Contains(out, `"id": "claude",`+"\n      \"installed\": true") {
		t.Fatalf("api agents list --format pretty: %v\n%s%s", err, out, errOut)
	}
	// The mock is built in: installing it is a no-op.
	out, errOut, err = run("api", "agents", "install", "mock", "--endpoint", d.URL, "--token", "tok")
	if err != nil || !strings.Contains(out, `"already_installed":true`) {
		t.Fatalf("api agents install mock: %v\n%s%s", err, out, errOut)
	}
	_, errOut, err = run("api", "agents", "get", "nobody", "--endpoint", d.URL, "--token", "tok")
	if err == nil || !strings.Contains(errOut, "400 unsupported agent: nobody") {
		t.Fatalf("api agents get nobody: %v\n%s", err, errOut)
	}
}

// TestInstallVersionsArePlain: agentVersion and agentProcessVersion are
// versions (or npm ranges and tags), never another package source. They
// went into the npm spec as given ("name@npm:other", "name@file:/x",
// "name@github:u/r", "name@https://…") and into the native download URL
// ("../../other-bucket/x" walks out of the vendor's release path), so a
// token allowed agent.install, and not process.run, could have the daemon
// install and run any code. 400 now, before anything is fetched.
func TestInstallVersionsArePlain(t *testing.T) {
	t.Parallel()
	dead := deadNPMRegistry(t)
	d := harness.Start(t, harness.Options{Env: []string{"SANDBOX_AGENT_ACP_REGISTRY_URL=" + dead + "registry.json"}})
	for _, body := range []string{
		`{"agentProcessVersion":"npm:evil@1.0.0"}`,
		`{"agentProcessVersion":"file:/tmp/evil.tgz"}`,
		`{"agentProcessVersion":"github:attacker/repo"}`,
		`{"agentProcessVersion":"attacker/repo"}`,
		`{"agentProcessVersion":"https://attacker.example/evil.tgz"}`,
		`{"agentProcessVersion":"../evil"}`,
		`{"agentVersion":"../../../other-bucket/x"}`,
		`{"agentVersion":"1.0.0?x=1"}`,
		`{"agentVersion":"1.0.0#x"}`,
		`{"agentVersion":"1.0.0/../../x"}`,
		`{"agentVersion":"` + strings.Repeat("1", 200) + `"}`,
	} {
		for _, agent := range []string{"claude", "mock"} {
			st, h, b := d.Do(http.MethodPost, "/v1/agents/"+agent+"/install", []byte(body), "Content-Type", "application/json")
			if problemOf(t, st, h, b); st != 400 || !strings.Contains(string(b), "not a version") {
				t.Errorf("%s %s: %d %s", agent, body, st, b)
			}
		}
	}
	// Versions, ranges and tags stay fine (mock needs no install).
	for _, body := range []string{`{"agentProcessVersion":"1.2.3"}`, `{"agentProcessVersion":"^1.2.0-beta.1+build.5"}`,
		`{"agentProcessVersion":">=1.0.0 <2"}`, `{"agentProcessVersion":"latest"}`, `{"agentVersion":"v2.0.14"}`} {
		if st, _, b := d.Do(http.MethodPost, "/v1/agents/mock/install", []byte(body), "Content-Type", "application/json"); st != 200 {
			t.Errorf("mock %s: %d %s", body, st, b)
		}
	}
}
