package opencode

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
)

// compatRoutes are what OpenCode's clients read or send besides sessions:
// the agent list, config, paths and project, the TUI control routes
// (which publish the tui.* events a TUI acts on), and for the rest of
// OpenCode's API the answers a client needs to start: empty lists and
// objects. docs/opencode.md lists each with its status.
func (a *Adapter) compatRoutes(h func(string, func(http.ResponseWriter, *http.Request) error)) {
	raw := func(body string) func(http.ResponseWriter, *http.Request) error {
		return func(w http.ResponseWriter, _ *http.Request) error {
			writeRaw(w, []byte(body))
			return nil
		}
	}
	h("GET /agent", a.agents)
	h("GET /command", a.commands)
	h("GET /config", a.getConfig)
	h("PATCH /config", a.patchConfig)
	h("GET /global/config", a.getConfig)
	h("PATCH /global/config", a.patchConfig)
	h("GET /global/health", func(w http.ResponseWriter, _ *http.Request) error {
		writeJSON(w, http.StatusOK, map[string]any{"healthy": true, "version": a.cfg.Version})
		return nil
	})
	h("GET /path", a.path)
	h("GET /project", a.projects)
	h("GET /project/current", a.currentProject)
	h("GET /project/{projectID}/directories", func(w http.ResponseWriter, r *http.Request) error {
		dir, err := a.sessionDirectory(r)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, []string{dir})
		return nil
	})
	h("GET /vcs", raw(`{}`))
	h("GET /provider/auth", raw(`{}`))
	h("GET /lsp", raw(`[]`))
	h("GET /formatter", raw(`[]`))
	h("GET /mcp", raw(`{}`))
	h("GET /skill", raw(`[]`))
	h("GET /file", raw(`[]`))
	h("GET /file/status", raw(`[]`))
	h("GET /find", raw(`[]`))
	h("GET /find/file", raw(`[]`))
	h("GET /find/symbol", raw(`[]`))
	h("GET /pty", raw(`[]`))
	h("GET /experimental/tool/ids", raw(`[]`))
	h("GET /experimental/tool", raw(`[]`))
	h("GET /experimental/resource", raw(`{}`))
	h("GET /experimental/workspace", raw(`[]`))
	h("GET /experimental/worktree", raw(`[]`))
	h("GET /experimental/session", raw(`[]`))
	h("GET /experimental/capabilities", raw(`{}`))
	h("POST /log", raw(`true`))
	h("POST /instance/dispose", raw(`true`))
	h("POST /global/dispose", raw(`true`))

	// The TUI routes let a program drive a TUI attached to this daemon:
	// each publishes the event the TUI acts on.
	tuiCommand := func(command string) func(http.ResponseWriter, *http.Request) error {
		return func(w http.ResponseWriter, _ *http.Request) error {
			a.publish("tui.command.execute", map[string]string{"command": command})
			writeRaw(w, []byte("true"))
			return nil
		}
	}
	h("POST /tui/submit-prompt", tuiCommand("prompt.submit"))
	h("POST /tui/clear-prompt", tuiCommand("prompt.clear"))
	h("POST /tui/open-help", tuiCommand("help.show"))
	h("POST /tui/open-sessions", tuiCommand("session.list"))
	h("POST /tui/open-themes", tuiCommand("theme.list"))
	h("POST /tui/open-models", tuiCommand("model.list"))
	h("POST /tui/append-prompt", a.tuiPublish("tui.prompt.append", func(in map[string]any) bool { _, ok := in["text"].(string); return ok }))
	h("POST /tui/execute-command", a.tuiPublish("tui.command.execute", func(in map[string]any) bool { _, ok := in["command"].(string); return ok }))
	h("POST /tui/show-toast", a.tuiPublish("tui.toast.show", func(in map[string]any) bool { _, ok := in["message"].(string); return ok }))
	h("POST /tui/select-session", a.tuiPublish("tui.session.select", func(in map[string]any) bool { _, ok := in["sessionID"].(string); return ok }))
	h("POST /tui/publish", func(w http.ResponseWriter, r *http.Request) error {
		var in struct {
			Type       string          `json:"type"`
			Properties json.RawMessage `json:"properties"`
		}
		release, err := a.readJSON(r, &in)
		defer release()
		if err != nil {
			return err
		}
		if !strings.HasPrefix(in.Type, "tui.") || len(in.Properties) > 64<<10 || !isObject(in.Properties) {
			return errBadRequest("only tui.* events with an object of properties may be published")
		}
		a.publish(in.Type, in.Properties)
		writeRaw(w, []byte("true"))
		return nil
	})
	h("GET /tui/control/next", func(w http.ResponseWriter, _ *http.Request) error {
		writeJSON(w, http.StatusOK, map[string]any{"path": "", "body": nil})
		return nil
	})
	h("POST /tui/control/response", raw(`true`))
}

// tuiPublish publishes the request's body, if valid says it is, as an
// event of type typ.
func (a *Adapter) tuiPublish(typ string, valid func(map[string]any) bool) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		var in map[string]any
		release, err := a.readJSON(r, &in)
		defer release()
		if err != nil {
			return err
		}
		if in == nil || !valid(in) {
			return errBadRequest("invalid body for %s", typ)
		}
		a.publish(typ, in)
		writeRaw(w, []byte("true"))
		return nil
	}
}

// agents is GET /agent: OpenCode's agents (modes of working) are not the
// daemon's agents, which are its providers; one primary agent, "build",
// runs whatever the session's provider is.
func (a *Adapter) agents(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, []map[string]any{{
		"name": "build", "description": "Runs the prompt on the session's agent (the provider chosen) through ACP.",
		"mode": "primary", "native": false, "hidden": false, "permission": []any{}, "options": map[string]any{},
	}})
	return nil
}

// commands is GET /command: the slash commands the running agents
// announced (available_commands_update), each once.
func (a *Adapter) commands(w http.ResponseWriter, _ *http.Request) error {
	a.mu.Lock()
	all := make([]*session, 0, len(a.sessions))
	for _, s := range a.sessions {
		all = append(all, s)
	}
	a.mu.Unlock()
	seen := map[string]command{}
	for _, s := range all {
		s.mu.Lock()
		for _, c := range s.commands {
			if c.Name != "" && len(seen) < 512 {
				seen[c.Name] = c
			}
		}
		s.mu.Unlock()
	}
	out := make([]map[string]any, 0, len(seen))
	for _, c := range seen {
		out = append(out, map[string]any{"name": c.Name, "description": c.Description, "template": "", "hints": []string{}, "source": "command"})
	}
	sort.Slice(out, func(i, j int) bool { return out[i]["name"].(string) < out[j]["name"].(string) })
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getConfig is GET /config: an empty configuration plus what PATCH
// /config set (kept in memory, for clients that write settings and read
// them back; nothing here acts on it).
func (a *Adapter) getConfig(w http.ResponseWriter, _ *http.Request) error {
	a.mu.Lock()
	cfg := a.config
	a.mu.Unlock()
	if cfg == nil {
		cfg = defaultConfig
	}
	writeRaw(w, cfg)
	return nil
}

// defaultConfig is the configuration before any PATCH: the keys native
// OpenCode's always has, empty.
var defaultConfig = json.RawMessage(`{"agent":{},"mode":{},"plugin":[],"command":{},"provider":{},"mcp":{}}`)

// maxConfigBytes bounds the configuration PATCH /config keeps.
const maxConfigBytes = 256 << 10

func (a *Adapter) patchConfig(w http.ResponseWriter, r *http.Request) error {
	var patch map[string]json.RawMessage
	release, err := a.readJSON(r, &patch)
	defer release()
	if err != nil {
		return err
	}
	a.mu.Lock()
	cur := map[string]json.RawMessage{}
	base := a.config
	if base == nil {
		base = defaultConfig
	}
	_ = json.Unmarshal(base, &cur)
	for k, v := range patch {
		cur[k] = v
	}
	b, err := json.Marshal(cur)
	if err == nil && len(b) > maxConfigBytes {
		a.mu.Unlock()
		return errBadRequest("the configuration would pass 256 KiB")
	}
	a.config = b
	a.mu.Unlock()
	writeRaw(w, b)
	return nil
}

// path is GET /path: the directory a client's sessions work in, and the
// home, state and config directories it may show.
func (a *Adapter) path(w http.ResponseWriter, r *http.Request) error {
	dir, err := a.sessionDirectory(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"home": a.cfg.Home, "state": a.cfg.Home, "config": a.cfg.Home, "worktree": dir, "directory": dir})
	return nil
}

func (a *Adapter) projectOf(dir string) map[string]any {
	now := a.now()
	return map[string]any{"id": projectID(dir), "worktree": dir, "time": map[string]int64{"created": now, "updated": now}, "sandboxes": []string{}}
}

func (a *Adapter) currentProject(w http.ResponseWriter, r *http.Request) error {
	dir, err := a.sessionDirectory(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a.projectOf(dir))
	return nil
}

func (a *Adapter) projects(w http.ResponseWriter, r *http.Request) error {
	dir, err := a.sessionDirectory(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, []any{a.projectOf(dir)})
	return nil
}
