package agents

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spf13/afero"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
	"github.com/sandbox-agent-go/sandbox-agent/ports/porttest"
)

// newCatalogRig is a catalogue whose credential discovery answers creds
// (the zero value: none).
func newCatalogRig(t *testing.T, creds *domain.Credentials) (*Catalog, *installRig) {
	r := newRig(t, npxRegistry)
	now := time.Unix(1000, 0)
	c := &Catalog{
		Agents: rigAgents(r),
		Credentials: func() domain.Credentials {
			if creds == nil {
				return domain.Credentials{}
			}
			return *creds
		},
		Now: func() time.Time { return now },
		Running: func() map[string]time.Time {
			return map[string]time.Time{"codex": now.Add(-1500 * time.Millisecond)}
		},
	}
	return c, r
}

func TestCatalogMatchesReference(t *testing.T) {
	c, _ := newCatalogRig(t, nil)
	got := c.List(context.Background(), CatalogQuery{})
	var ref struct {
		Agents []map[string]any `json:"agents"`
	}
	if err := json.Unmarshal(catalogReference, &ref); err != nil {
		t.Fatal(err)
	}
	for i, want := range ref.Agents {
		g := got[i]
		if g.ID != want["id"] {
			t.Fatalf("agent %d = %s, want %s", i, g.ID, want["id"])
		}
		b, _ := json.Marshal(g.Capabilities)
		wantCaps, _ := json.Marshal(want["capabilities"])
		var a, w map[string]bool
		json.Unmarshal(b, &a)
		json.Unmarshal(wantCaps, &w)
		if len(a) != 18 || len(w) != 18 {
			t.Fatalf("%s: %d capabilities, reference %d", g.ID, len(a), len(w))
		}
		for k, v := range w {
			if a[k] != v {
				t.Errorf("%s.%s = %v, reference %v", g.ID, k, a[k], v)
			}
		}
		if g.CredentialsAvailable != want["credentialsAvailable"] {
			t.Errorf("%s credentialsAvailable = %v, reference %v (no credentials anywhere)", g.ID, g.CredentialsAvailable, want["credentialsAvailable"])
		}
		// Beyond the reference: the mock is built in, so installed.
		if g.Installed != (g.ID == "mock") {
			t.Errorf("%s installed = %v on an empty disk", g.ID, g.Installed)
		}
		if g.ConfigOptions != nil || g.Version != "" || g.Path != "" {
			t.Errorf("%s has config fields without config=true", g.ID)
		}
	}
	// The operator's agent comes after the known ones.
	if len(got) != 8 || got[7].ID != "ops" {
		t.Fatalf("ids = %v", ids(got))
	}
}

func ids(infos []domain.AgentInfo) []string {
	var out []string
	for _, i := range infos {
		out = append(out, i.ID)
	}
	return out
}

func TestCatalogServerStatus(t *testing.T) {
	c, _ := newCatalogRig(t, nil)
	got := c.List(context.Background(), CatalogQuery{})
	if s := got[1].ServerStatus; s == nil || s.Status != "running" || s.UptimeMs != 1500 {
		t.Errorf("codex serverStatus = %+v", s)
	}
	if got[0].ServerStatus != nil {
		t.Errorf("claude serverStatus = %+v, want none", got[0].ServerStatus)
	}
	b, _ := json.Marshal(got[0])
	if strings.Contains(string(b), "serverStatus") || strings.Contains(string(b), "version") {
		t.Errorf("absent optionals are not omitted: %s", b)
	}
}

// credentialsAvailable reads the discovery once per listing: claude and
// amp want Anthropic, codex OpenAI, opencode either; pi, cursor and the
// mock handle their own auth, and an operator-defined agent counts as
// having them.
func TestCatalogCredentials(t *testing.T) {
	creds := &domain.Credentials{OpenAI: &domain.Credential{Provider: domain.ProviderOpenAI, Key: "sk-x"}}
	c, _ := newCatalogRig(t, creds)
	calls := 0
	discover := c.Credentials
	c.Credentials = func() domain.Credentials { calls++; return discover() }
	list := func() string {
		var out []string
		for _, i := range c.List(context.Background(), CatalogQuery{}) {
			if i.CredentialsAvailable {
				out = append(out, i.ID)
			}
		}
		return strings.Join(out, " ")
	}
	if got := list(); got != "codex opencode pi cursor mock ops" || calls != 1 {
		t.Errorf("with OpenAI: %s (%d discoveries)", got, calls)
	}
	creds.OpenAI, creds.Anthropic = nil, &domain.Credential{Provider: domain.ProviderAnthropic, Key: "k"}
	if got := list(); got != "claude opencode amp pi cursor mock ops" {
		t.Errorf("with Anthropic: %s", got)
	}
	creds.Anthropic, creds.Other = nil, map[string]domain.Credential{"zeta": {Key: "z"}}
	if got := list(); got != "pi cursor mock ops" {
		t.Errorf("with another provider only: %s", got)
	}
	creds.Anthropic = &domain.Credential{Provider: domain.ProviderAnthropic, Key: "k"}
	if info, _ := c.Get(context.Background(), "claude", CatalogQuery{}); !info.CredentialsAvailable {
		t.Error("claude: no credentials from Get")
	}
}

func TestCatalogConfig(t *testing.T) {
	c, r := newCatalogRig(t, nil)
	ctx := context.Background()
	mock, err := c.Get(ctx, "mock", CatalogQuery{Config: true})
	if err != nil {
		t.Fatal(err)
	}
	// Built in: no path (the reference shows one that never exists).
	if mock.Version != "builtin" || mock.Path != "" || !mock.Installed || len(mock.ConfigOptions) == 0 {
		t.Errorf("mock = %+v", mock)
	}
	var opts []map[string]any
	if err := json.Unmarshal(mock.ConfigOptions, &opts); err != nil || len(opts) != 3 || opts[0]["id"] != "model" {
		t.Errorf("mock configOptions = %s", mock.ConfigOptions)
	}

	// After an install the version and path come from the install.
	if _, err := c.Install(ctx, "claude", domain.InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	claude, _ := c.Get(ctx, "claude", CatalogQuery{Config: true})
	if !claude.Installed || claude.Path != testDir+"/agent_processes/claude-acp" || claude.Version != "0.30.1" {
		t.Errorf("claude after install = %+v", claude)
	}
	// A native binary is probed with --version (cached until no_cache).
	if err := afero.WriteFile(r.fs, testDir+"/claude", []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if claude, _ = c.Get(ctx, "claude", CatalogQuery{Config: true}); claude.Path != testDir+"/agent_processes/claude-acp" {
		t.Errorf("cached path = %q", claude.Path)
	}
	if claude, _ = c.Get(ctx, "claude", CatalogQuery{Config: true, NoCache: true}); claude.Path != testDir+"/claude" || claude.Version != "1.0.7" {
		t.Errorf("claude with native = %+v", claude)
	}
}

func TestCatalogGet(t *testing.T) {
	c, _ := newCatalogRig(t, nil)
	ctx := context.Background()
	if _, err := c.Get(ctx, "nobody", CatalogQuery{}); !domain.IsKind(err, domain.KindUnsupportedAgent) {
		t.Errorf("nobody: %v", err)
	}
	// Listed in the registry: described, not installed.
	info, err := c.Get(ctx, "new-agent", CatalogQuery{})
	if err != nil || info.Installed || info.ID != "new-agent" {
		t.Errorf("new-agent = %+v, %v", info, err)
	}
	// Installed registry agents appear in the listing after the operator's.
	if _, err := c.Install(ctx, "new-agent", domain.InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	got := ids(c.List(ctx, CatalogQuery{}))
	if got[len(got)-1] != "new-agent" || got[len(got)-2] != "ops" {
		t.Errorf("ids = %v", got)
	}
}

// A version probe runs the agent's binary (claude --version starts a
// runtime of 100 MB or more): listings with no_cache at once share the
// probe in progress for an agent instead of each starting one, so a
// reader cannot fill the box with agent processes.
func TestCatalogProbesOncePerAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, r := newCatalogRig(t, nil)
		if err := afero.WriteFile(r.fs, testDir+"/claude", []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		var running atomic.Int32
		r.in.Commands = &porttest.FakeCommands{RunFunc: func(ctx context.Context, name string, args ...string) (domain.CommandResult, error) {
			running.Add(1)
			defer running.Add(-1)
			<-release
			return domain.CommandResult{Stdout: []byte("1.0.7 (Claude Code)\n")}, nil
		}}
		var wg sync.WaitGroup
		got := make([]string, 20)
		for i := range got {
			wg.Go(func() {
				info, err := c.Get(context.Background(), "claude", CatalogQuery{Config: true, NoCache: true})
				if err != nil {
					t.Error(err)
				}
				got[i] = info.Version
			})
		}
		synctest.Wait() // every listing is waiting for a probe
		if n := running.Load(); n != 1 {
			t.Errorf("%d probes of claude at once, want 1", n)
		}
		close(release)
		wg.Wait()
		for i, v := range got {
			if v != "1.0.7" {
				t.Errorf("listing %d: version %q", i, v)
			}
		}
	})
}
