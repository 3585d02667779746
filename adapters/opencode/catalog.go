package opencode

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// OpenCode's providers are the daemon's agents: choosing the model
// "claude/sonnet" in an OpenCode client runs the session on the agent
// claude with its model option set to sonnet. The list comes from the
// agent catalogue (GET /v1/agents?config=true): each agent's "model"
// config option gives its models; an agent without one has the single
// model "default".

// providerNames are the display names of the known agents.
var providerNames = map[string]string{
	"claude": "Claude Code", "codex": "Codex CLI", "opencode": "OpenCode", "amp": "Amp",
	"pi": "Pi", "cursor": "Cursor Agent", "mock": "Mock", "gemini": "Gemini CLI",
}

type catalogModel struct {
	ID, Name string
}

type catalogProvider struct {
	ID, Name  string
	Connected bool
	Default   string
	Models    []catalogModel
}

// catalog reads the agents as providers, in the catalogue's order; the
// default agent is always there.
func (a *Adapter) catalog(ctx context.Context) []catalogProvider {
	var infos []domain.AgentInfo
	if a.cfg.Agents != nil {
		infos = a.cfg.Agents(ctx)
	}
	seen := false
	for _, in := range infos {
		if in.ID == a.cfg.DefaultAgent {
			seen = true
		}
	}
	if !seen {
		infos = append(infos, domain.AgentInfo{ID: a.cfg.DefaultAgent, Installed: true, CredentialsAvailable: true})
	}
	out := make([]catalogProvider, 0, len(infos))
	for _, in := range infos {
		p := catalogProvider{ID: in.ID, Name: providerNames[in.ID], Connected: in.Installed && in.CredentialsAvailable}
		if p.Name == "" {
			p.Name = in.ID
		}
		var opts []struct {
			ID           string `json:"id"`
			Category     string `json:"category"`
			CurrentValue string `json:"currentValue"`
			Options      []struct {
				Name  string `json:"name"`
				Value string `json:"value"`
			} `json:"options"`
		}
		_ = json.Unmarshal(in.ConfigOptions, &opts)
		for _, o := range opts {
			if o.ID != "model" && o.Category != "model" {
				continue
			}
			p.Default = o.CurrentValue
			for _, v := range o.Options {
				p.Models = append(p.Models, catalogModel{ID: v.Value, Name: firstNonEmpty(v.Name, v.Value)})
			}
			break
		}
		if len(p.Models) == 0 {
			p.Models = []catalogModel{{ID: "default", Name: "Default"}}
		}
		if p.Default == "" {
			p.Default = p.Models[0].ID
		}
		out = append(out, p)
	}
	return out
}

// defaultModel is the model an agent starts with, as the catalogue says
// (its model option's current value), remembered per agent.
func (a *Adapter) defaultModel(ctx context.Context, agent string) string {
	a.mu.Lock()
	m, ok := a.defaults[agent]
	a.mu.Unlock()
	if ok {
		return m
	}
	for _, p := range a.catalog(ctx) {
		if p.ID == agent {
			m = p.Default
		}
	}
	a.mu.Lock()
	if len(a.defaults) < 1024 {
		a.defaults[agent] = m
	}
	a.mu.Unlock()
	return m
}

// modelJSON is one model in both shapes OpenCode's clients read: the
// models.dev fields of GET /provider up to 1.2 (attachment, reasoning,
// tool_call, release_date) and the Model of /config/providers and of
// GET /provider since (capabilities, api, cost, status).
func modelJSON(provider string, m catalogModel) map[string]any {
	io := map[string]bool{"text": true, "audio": false, "image": false, "video": false, "pdf": false}
	return map[string]any{
		"id": m.ID, "providerID": provider, "name": m.Name, "family": provider,
		"api":    map[string]string{"id": m.ID, "url": "", "npm": ""},
		"status": "active", "release_date": "", "options": map[string]any{}, "headers": map[string]string{},
		"capabilities": map[string]any{
			"temperature": true, "reasoning": false, "attachment": false, "toolcall": true,
			"input": io, "output": io, "interleaved": false,
		},
		"cost":       map[string]any{"input": 0, "output": 0, "cache": map[string]int{"read": 0, "write": 0}},
		"limit":      map[string]int{"context": 200000, "output": 32000},
		"variants":   map[string]any{},
		"attachment": false, "reasoning": false, "temperature": true, "tool_call": true,
	}
}

func providerJSON(p catalogProvider) map[string]any {
	models := map[string]any{}
	for _, m := range p.Models {
		models[m.ID] = modelJSON(p.ID, m)
	}
	return map[string]any{"id": p.ID, "name": p.Name, "source": "custom", "env": []string{}, "options": map[string]any{}, "models": models}
}

// providers is GET /provider: every agent, the default model of each,
// and the ones that can run now (installed, with credentials).
func (a *Adapter) providers(w http.ResponseWriter, r *http.Request) error {
	all := []any{}
	def := map[string]string{}
	connected := []string{}
	for _, p := range a.catalog(r.Context()) {
		all = append(all, providerJSON(p))
		def[p.ID] = p.Default
		if p.Connected {
			connected = append(connected, p.ID)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"all": all, "default": def, "connected": connected})
	return nil
}

// configProviders is GET /config/providers: the providers a client may
// choose from (those that can run now, the default agent first).
func (a *Adapter) configProviders(w http.ResponseWriter, r *http.Request) error {
	list := []any{}
	def := map[string]string{}
	cat := a.catalog(r.Context())
	sort.SliceStable(cat, func(i, j int) bool { return cat[i].ID == a.cfg.DefaultAgent && cat[j].ID != a.cfg.DefaultAgent })
	for _, p := range cat {
		if !p.Connected && p.ID != a.cfg.DefaultAgent {
			continue
		}
		list = append(list, providerJSON(p))
		def[p.ID] = p.Default
	}
	writeJSON(w, http.StatusOK, map[string]any{"providers": list, "default": def})
	return nil
}
