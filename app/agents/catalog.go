package agents

import (
	"context"
	_ "embed"
	"encoding/json"
	"sync"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// catalogReference is GET /v1/agents?config=true of the reference 0.4.2:
// the source of the known agents' capabilities and configOptions.
//
//go:embed catalog_reference.json
var catalogReference []byte

type referenceAgent struct {
	ID            string              `json:"id"`
	Capabilities  domain.Capabilities `json:"capabilities"`
	ConfigOptions json.RawMessage     `json:"configOptions"`
}

// reference is parsed on first use, not at package init: every process
// the binary starts pays for its package inits, and the built-in mock
// agent (the same binary) never lists agents; parsing 32 KB of JSON at init
// was the largest init of the binary (0.45 ms of every spawn).
var reference = sync.OnceValue(func() map[string]referenceAgent {
	var doc struct {
		Agents []referenceAgent `json:"agents"`
	}
	if err := json.Unmarshal(catalogReference, &doc); err != nil {
		panic("agents: embedded catalog_reference.json: " + err.Error())
	}
	out := map[string]referenceAgent{}
	for _, a := range doc.Agents {
		out[a.ID] = a
	}
	return out
})

// Catalog answers GET /v1/agents: what agents exist, whether they are
// installed, have credentials and run, and (on request) their version,
// path and config options.
type Catalog struct {
	// Agents resolves and installs; the catalogue reads its resolutions.
	Agents *Agents
	// Running reports the oldest running instance per agent
	// (Instances.RunningSince); nil means none run.
	Running func() map[string]time.Time
	// Credentials finds the host's LLM credentials for credentialsAvailable
	// (the credentials use case's discovery, wired by the composition
	// root), once per listing; nil means none.
	Credentials func() domain.Credentials
	// Now is the clock for uptimes; nil means time.Now.
	Now func() time.Time

	mu       sync.Mutex
	versions map[string]versionInfo // agent → probed version and path
	probing  map[string]*probeCall  // agent → the probe in progress
}

// probeCall is a version probe in progress; the listings asking meanwhile
// wait for its answer instead of starting agent binaries of their own.
type probeCall struct {
	done chan struct{}
	v    versionInfo
}

type versionInfo struct{ version, path string }

// CatalogQuery are the query options of the listing.
type CatalogQuery struct {
	Config  bool // include version, path and configOptions
	NoCache bool // probe versions again
}

// List describes the known agents in the reference's order, then the
// operator's, then any other installed agent (by id).
func (c *Catalog) List(ctx context.Context, q CatalogQuery) []domain.AgentInfo {
	ids := append([]string{}, domain.KnownAgents...)
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	for _, op := range c.Agents.Operator {
		if !seen[op.ID] {
			ids = append(ids, op.ID)
			seen[op.ID] = true
		}
	}
	for _, id := range c.Agents.launcherIDs() {
		if !seen[id] {
			ids = append(ids, id)
			seen[id] = true
		}
	}
	running, creds := c.running(), c.credentials()
	out := make([]domain.AgentInfo, 0, len(ids))
	for _, id := range ids {
		out = append(out, c.info(ctx, id, q, running, creds))
	}
	return out
}

// Get describes one agent: a known, operator-defined or installed one, or
// one the ACP registry lists. Anything else is unsupported_agent.
func (c *Catalog) Get(ctx context.Context, id string, q CatalogQuery) (domain.AgentInfo, error) {
	if !c.exists(ctx, id) {
		return domain.AgentInfo{}, domain.UnsupportedAgent(id)
	}
	return c.info(ctx, id, q, c.running(), c.credentials()), nil
}

// Install installs an agent and forgets its cached version.
func (c *Catalog) Install(ctx context.Context, id string, opts domain.InstallOptions) (domain.InstallResult, error) {
	res, err := c.Agents.Install(ctx, id, opts)
	c.mu.Lock()
	delete(c.versions, id)
	c.mu.Unlock()
	return res, err
}

func (c *Catalog) exists(ctx context.Context, id string) bool {
	if !domain.ValidAgentID(id) {
		return false
	}
	if r := c.Agents.resolve(id); r.Known || r.Runnable || r.Broken != "" {
		return true
	}
	if c.Agents.Installer != nil {
		// Describing an agent should not wait long on a slow registry.
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		listed, err := c.Agents.Installer.Listed(ctx, id)
		return err == nil && listed
	}
	return false
}

func (c *Catalog) running() map[string]time.Time {
	if c.Running == nil {
		return nil
	}
	return c.Running()
}

func (c *Catalog) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Catalog) info(ctx context.Context, id string, q CatalogQuery, running map[string]time.Time, creds domain.Credentials) domain.AgentInfo {
	ref, known := reference()[id]
	r := c.Agents.resolve(id)
	info := domain.AgentInfo{
		ID:                   id,
		Installed:            r.Runnable,
		CredentialsAvailable: domain.CredentialsAvailable(id, creds),
		Capabilities:         ref.Capabilities,
		ConfigError:          r.Broken,
	}
	if t, ok := running[id]; ok {
		up := c.now().Sub(t).Milliseconds()
		if up < 0 {
			up = 0
		}
		info.ServerStatus = &domain.ServerStatus{Status: "running", UptimeMs: up}
	}
	if q.Config {
		v := c.version(ctx, r, q.NoCache)
		info.Version, info.Path = v.version, v.path
		if known && len(ref.ConfigOptions) > 0 && string(ref.ConfigOptions) != "null" {
			info.ConfigOptions = ref.ConfigOptions
		}
	}
	return info
}

func (c *Catalog) credentials() domain.Credentials {
	if c.Credentials == nil {
		return domain.Credentials{}
	}
	return c.Credentials()
}

// version finds an agent's binary and asks it for its version, caching the
// answer until an install or a no_cache query.
func (c *Catalog) version(ctx context.Context, r Resolution, noCache bool) versionInfo {
	c.mu.Lock()
	v, ok := c.versions[r.Agent]
	if ok && !noCache {
		c.mu.Unlock()
		return v
	}
	// One probe per agent at a time: a probe runs the agent's binary, and
	// listings with no_cache at once would each start one.
	if call := c.probing[r.Agent]; call != nil {
		c.mu.Unlock()
		select {
		case <-call.done:
			return call.v
		case <-ctx.Done():
			return versionInfo{}
		}
	}
	call := &probeCall{done: make(chan struct{})}
	if c.probing == nil {
		c.probing = map[string]*probeCall{}
	}
	c.probing[r.Agent] = call
	c.mu.Unlock()
	// Not cut short when this listing's client leaves: others may wait.
	v = c.probe(context.WithoutCancel(ctx), r)
	c.mu.Lock()
	if c.versions == nil {
		c.versions = map[string]versionInfo{}
	}
	c.versions[r.Agent] = v
	delete(c.probing, r.Agent)
	c.mu.Unlock()
	call.v = v
	close(call.done)
	return v
}

// probe reads what the resolution found: the built-in mock has version
// "builtin" and no path (nothing installed); a native binary answers for
// its agent; else the launcher's recorded version, the operator's command,
// or the adapter on PATH.
func (c *Catalog) probe(ctx context.Context, r Resolution) versionInfo {
	inst := c.Agents.Installer
	switch {
	case r.Spec.Source == sourceBuiltin:
		return versionInfo{version: "builtin"}
	case inst == nil:
		return versionInfo{}
	}
	if p, _, ok := inst.NativePath(r.Agent); ok {
		return versionInfo{version: inst.Version(ctx, p), path: p}
	}
	switch r.Spec.Source {
	case sourceOperator:
		return versionInfo{path: r.Spec.Command}
	case sourceLauncher:
		return versionInfo{version: inst.AgentProcessVersion(r.Agent), path: r.Launcher}
	case sourceLocalPath:
		return versionInfo{version: inst.Version(ctx, r.Spec.Command), path: r.Spec.Command}
	}
	if r.Broken != "" {
		return versionInfo{path: r.Launcher}
	}
	return versionInfo{}
}
