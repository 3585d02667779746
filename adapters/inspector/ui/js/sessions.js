// The Sessions section: start an ACP instance (first POST with ?agent=),
// initialize it, open sessions, send prompts, answer permission requests,
// cancel turns, delete the instance; watch its SSE stream both decoded and
// as raw JSON-RPC envelopes with their sequence numbers.

import { ApiError, RPCError, getJSON, request } from "./api.js";
import { errorBox, h, pretty, randomID, replace, spinner, str } from "./dom.js";
import { Stream } from "./sse.js";
import { Transcript } from "./transcript.js";
import { catalogue } from "./agents.js";

const instances = new Map(); // serverId -> Instance
let current = null;
let ui = null;
let pollTimer = null;

const RAW_LIMIT = 5000; // raw entries kept in the page per instance

// Instance is one /v1/acp/{serverId} the inspector talks to.
class Instance {
  constructor(serverId, agent) {
    this.serverId = serverId;
    this.agent = agent;
    this.path = `/v1/acp/${encodeURIComponent(serverId)}`;
    this.nextId = 1; // see attach for instances other clients share

    this.pending = new Map(); // canonical id -> {resolve, reject}
    this.sessions = new Map(); // sessionId -> {transcript, tab, busy, turnId}
    this.active = null;
    this.stream = null;
    this.state = "new";
    this.streamState = "idle";
    this.build();
  }

  build() {
    this.stateEl = h("span.badge.off", "new");
    this.streamEl = h("span.stream-state", "stream: idle");
    this.seqEl = h("span.muted.seq", "");
    this.infoEl = h("span.muted.agent-info", "");
    this.errorEl = h("div.instance-error");
    this.tabsEl = h("div.session-tabs", { role: "tablist" });
    this.transcriptHost = h("div.transcript-host",
      h("div.empty", "Starting…"));
    this.input = h("textarea.prompt", {
      rows: 3, placeholder: "Message the agent (Enter sends, Shift+Enter for a new line)", "aria-label": "Prompt",
    });
    this.sendBtn = h("button.primary.send", { type: "submit" }, "Send");
    this.cancelBtn = h("button.cancel-turn", { type: "button", title: "send session/cancel", disabled: true }, "Cancel turn");
    this.turnEl = h("span.turn-state");
    this.composer = h("form.composer", this.input, h("div.composer-actions", this.turnEl, this.cancelBtn, this.sendBtn));
    this.composer.addEventListener("submit", (ev) => { ev.preventDefault(); this.sendPrompt(); });
    this.input.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); this.sendPrompt(); }
    });
    this.cancelBtn.addEventListener("click", () => this.cancelTurn());

    this.rawFilter = h("input.raw-filter", { type: "search", placeholder: "filter", "aria-label": "Filter raw events" });
    this.rawFilter.addEventListener("input", () => this.applyFilter());
    this.rawEl = h("div.rawlog", { "aria-label": "Raw JSON-RPC envelopes" });
    this.rawSendText = h("textarea.raw-send", { rows: 4, spellcheck: false, value: '{"jsonrpc":"2.0","id":"raw-1","method":"_inspector/echo","params":{}}' });
    this.rawSendResult = h("div.raw-send-result");
    const rawSend = h("details.raw-composer",
      h("summary", "Send a raw JSON-RPC message"),
      this.rawSendText,
      h("div.row", h("button", { type: "button", onclick: () => this.sendRaw() }, "POST"), this.rawSendResult));

    this.el = h("div.instance", { "data-server-id": this.serverId },
      h("div.instance-head",
        h("div.ids", h("strong.server-id", this.serverId), h("span.muted", ` · ${this.agent}`), " ", this.stateEl, " ", this.infoEl),
        h("div.head-actions",
          this.streamEl, this.seqEl,
          h("button.new-session", { onclick: () => this.newSession() }, "New session"),
          h("button.reconnect", { title: "close the stream and resume from the last event id", onclick: () => this.stream?.reconnect() }, "Reconnect"),
          h("button.danger.delete", { onclick: () => deleteInstance(this) }, "Delete"))),
      this.errorEl,
      h("div.instance-body",
        h("div.conversation", this.tabsEl, this.transcriptHost, this.composer),
        h("div.rawpane",
          h("div.rawhead", h("h3", "Raw stream"), this.rawFilter,
            h("button.small", { type: "button", onclick: () => replace(this.rawEl) }, "Clear")),
          this.rawEl, rawSend)));
    this.updateComposer();
  }

  setState(s) {
    this.state = s;
    this.stateEl.textContent = s;
    this.stateEl.className = `badge ${s === "running" || s === "ready" ? "ok" : s === "exited" || s === "failed" ? "bad" : "warn"}`;
    renderList();
  }

  showError(err, prefix) {
    replace(this.errorEl, err ? errorBox(err, prefix) : null);
  }

  // post sends one JSON-RPC message; the first POST of an instance carries
  // ?agent= (it is harmless on later ones, so every POST carries it).
  async post(msg) {
    const body = JSON.stringify(msg);
    const entry = this.raw("out", null, body);
    try {
      const res = await request("POST", this.path, {
        query: { agent: this.agent }, body,
        headers: { "Content-Type": "application/json", Accept: "application/json" },
      });
      entry.querySelector(".status").textContent = String(res.status);
      const text = res.status === 200 ? await res.text() : "";
      return { status: res.status, text };
    } catch (e) {
      entry.querySelector(".status").textContent = e.status ? String(e.status) : "failed";
      entry.classList.add("failed");
      throw e;
    }
  }

  // call sends a request and resolves with its result, whether the answer
  // comes in the POST's body (200) or later on the stream (202).
  async call(method, params) {
    const id = this.nextId++;
    const key = JSON.stringify(id);
    const done = new Promise((resolve, reject) => this.pending.set(key, { resolve, reject, method }));
    // The answer may come on the stream (an error when the agent exits,
    // say) before the POST has returned: marked handled now, so the page
    // reports no unhandled rejection; the await below still throws it.
    done.catch(() => {});
    try {
      const { status, text } = await this.post({ jsonrpc: "2.0", id, method, params });
      if (status === 200 && text) this.response(JSON.parse(text));
    } catch (e) {
      this.pending.delete(key);
      throw e;
    }
    return { id, result: await done };
  }

  async notify(method, params) {
    await this.post({ jsonrpc: "2.0", method, params });
  }

  // response settles the pending request a response answers (once: the
  // same response may arrive in a POST body and on the stream).
  response(msg) {
    const key = JSON.stringify(msg.id);
    const p = this.pending.get(key);
    if (!p) return;
    this.pending.delete(key);
    if (msg.error) p.reject(new RPCError(msg.error));
    else p.resolve(msg.result);
  }

  async start(cwd) {
    this.setState("starting");
    replace(this.transcriptHost, h("div.empty", spinner("starting the agent (the daemon installs it first if needed)…")));
    try {
      const { result } = await this.call("initialize", {
        protocolVersion: 1,
        clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
        clientInfo: { name: "sandbox-agent-inspector", version: "1" },
      });
      const info = result && result.agentInfo;
      this.infoEl.textContent = info ? `${info.name || ""} ${info.version || ""}`.trim() : `protocol v${result && result.protocolVersion}`;
      this.setState("running");
      this.follow();
      await this.newSession(cwd);
    } catch (e) {
      this.setState("failed");
      replace(this.transcriptHost, errorBox(e, "could not start"));
      // The instance exists when the agent answered with an error, timed
      // out or exited: its stream tells what happened (stderr is in the
      // error above).
      if (e instanceof RPCError || e.status === 500 || e.status === 504) this.follow();
    }
  }

  // follow opens the stream (from the start of the replay buffer).
  follow() {
    if (this.stream) return;
    this.stream = new Stream(this.path, {
      onEvent: (ev) => this.event(ev),
      onState: (s, err) => {
        this.streamState = s;
        this.streamEl.textContent = `stream: ${s}`;
        this.streamEl.className = `stream-state ${s}`;
        if (err && s === "gone") this.showError(new ApiError(404, "the instance no longer exists on the daemon (it was deleted)"), "stream");
        else if (err && s === "reconnecting") this.showError(err, "stream");
        else if (s === "live") this.showError(null);
      },
    }).start();
  }

  async newSession(cwd) {
    cwd = cwd || ui.cwd.value || "/";
    try {
      const { result } = await this.call("session/new", { cwd, mcpServers: [] });
      if (!result || !validSession(result.sessionId)) throw new Error(`the agent answered session/new without a sessionId: ${JSON.stringify(result)}`);
      const s = this.session(result.sessionId);
      this.select(result.sessionId);
      s.transcript.note(`session ${result.sessionId} opened in ${cwd}`);
      this.input.focus();
    } catch (e) {
      this.showError(e, "session/new failed");
    }
  }

  session(sessionId) {
    let s = this.sessions.get(sessionId);
    if (!s) {
      const tab = h("button.session-tab", { role: "tab", "data-session": sessionId, title: sessionId }, shortID(sessionId));
      tab.addEventListener("click", () => this.select(sessionId));
      s = { transcript: new Transcript(sessionId), tab, busy: false, turnId: null };
      this.sessions.set(sessionId, s);
      this.tabsEl.append(tab);
      if (!this.active) this.select(sessionId);
    }
    return s;
  }

  select(sessionId) {
    this.active = sessionId;
    for (const [id, s] of this.sessions) s.tab.classList.toggle("active", id === sessionId);
    replace(this.transcriptHost, this.sessions.get(sessionId).transcript.el);
    this.updateComposer();
  }

  updateComposer() {
    const s = this.active && this.sessions.get(this.active);
    this.sendBtn.disabled = !s || s.busy;
    this.cancelBtn.disabled = !s || !s.busy;
    replace(this.turnEl, s && s.busy ? spinner("agent is working…") : null);
  }

  async sendPrompt() {
    const s = this.active && this.sessions.get(this.active);
    const text = this.input.value.trim();
    if (!s || s.busy || !text) return;
    const sessionId = this.active;
    this.input.value = "";
    s.transcript.user(text);
    s.busy = true;
    this.updateComposer();
    try {
      const { result } = await this.call("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
      s.transcript.turnEnded(result && result.stopReason);
    } catch (e) {
      s.transcript.error(e, "prompt failed");
    } finally {
      s.busy = false;
      this.updateComposer();
    }
  }

  async cancelTurn() {
    const sessionId = this.active;
    if (!sessionId) return;
    try {
      await this.notify("session/cancel", { sessionId });
      this.sessions.get(sessionId).transcript.note("cancel requested");
    } catch (e) {
      this.showError(e, "session/cancel failed");
    }
  }

  async sendRaw() {
    let msg;
    try { msg = JSON.parse(this.rawSendText.value); } catch (e) {
      replace(this.rawSendResult, errorBox(e, "not JSON"));
      return;
    }
    replace(this.rawSendResult, spinner("sending…"));
    try {
      const { status, text } = await this.post(msg);
      replace(this.rawSendResult, h("span.muted", `${status}`), text ? h("pre.json", pretty(text)) : null);
    } catch (e) {
      replace(this.rawSendResult, errorBox(e));
    }
  }

  // event handles one SSE event: into the raw log, then decoded.
  event(ev) {
    const entry = this.raw("in", ev.id, ev.data);
    if (ev.id) this.seqEl.textContent = `last event #${ev.id}`;
    let msg;
    try { msg = JSON.parse(ev.data); } catch {
      entry.classList.add("failed");
      return;
    }
    if (!msg || typeof msg !== "object") return;
    // What an agent sends may have any shape: a message the decoded view
    // cannot show stays in the raw log, marked, and the stream goes on.
    try {
      const hasId = Object.prototype.hasOwnProperty.call(msg, "id");
      if (msg.method && hasId) return this.agentRequest(msg);
      if (msg.method) return this.notification(msg);
      if (hasId) return this.response(msg);
    } catch (e) {
      entry.classList.add("failed");
      console.warn(`inspector: cannot show event #${ev.id}:`, e);
    }
  }

  notification(msg) {
    const p = msg.params || {};
    switch (msg.method) {
      case "session/update":
        if (validSession(p.sessionId) && p.update && typeof p.update === "object") this.session(p.sessionId).transcript.update(p.update);
        return;
      case "_adapter/agent_exited":
        this.setState("exited");
        this.everywhere((t) => t.note(`agent process exited (${p.success ? "success" : "failure"}, code ${str(p.code ?? "none")})`, "bad"));
        return;
      case "_adapter/replay_gap":
        this.everywhere((t) => t.note(`events lost: the stream resumed at #${str(p.oldestAvailable)} after #${str(p.lastEventId)} (replay buffer overrun)`, "warn"));
        return;
      case "_adapter/invalid_stdout":
        this.everywhere((t) => t.note(`agent wrote a non-JSON line: ${str(p.raw)}`, "warn"));
        return;
      default:
        if (validSession(p.sessionId) && this.sessions.has(p.sessionId)) this.sessions.get(p.sessionId).transcript.note(`${str(msg.method)}: ${JSON.stringify(p)}`);
    }
  }

  everywhere(fn) {
    if (this.sessions.size === 0) return;
    for (const s of this.sessions.values()) fn(s.transcript);
  }

  agentRequest(msg) {
    const p = msg.params || {};
    if (msg.method === "session/request_permission" && validSession(p.sessionId)) {
      this.session(p.sessionId).transcript.permission(p, (outcome) =>
        this.post({ jsonrpc: "2.0", id: msg.id, result: { outcome } }));
      return;
    }
    // The inspector offers no fs or terminal capability; answer so the
    // agent does not wait forever, and say so.
    const t = validSession(p.sessionId) && this.sessions.get(p.sessionId);
    if (t) t.transcript.note(`the agent asked ${str(msg.method)}; the inspector answered "method not found"`, "warn");
    this.post({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: `method not supported by the inspector: ${str(msg.method)}` } })
      .catch((e) => this.showError(e, `reply to ${str(msg.method)}`));
  }

  raw(dir, seq, data) {
    let summary = "";
    let cls = "";
    try {
      const m = JSON.parse(data);
      const hasId = m && Object.prototype.hasOwnProperty.call(m, "id");
      if (m.method) {
        summary = str(m.method);
        if (m.method === "session/update" && m.params && m.params.update) summary += ` · ${str(m.params.update.sessionUpdate)}`;
        if (hasId) summary += ` (request id ${JSON.stringify(m.id)})`;
        cls = hasId ? "request" : "notification";
      } else if (hasId) {
        summary = `${m.error ? "error" : "result"} for id ${JSON.stringify(m.id)}`;
        cls = m.error ? "error" : "response";
      } else summary = "message";
    } catch { summary = "not JSON"; cls = "error"; }
    const body = h("pre.json");
    const entry = h(`details.raw-entry.${dir}`, { "data-seq": seq ?? "" },
      h("summary",
        h("span.seq", dir === "in" ? (seq ? `#${seq}` : "—") : "→"),
        h(`span.kind.${cls || "plain"}`, summary),
        dir === "out" ? h("span.status", "…") : null),
      body);
    entry.addEventListener("toggle", () => { if (entry.open && !body.textContent) body.textContent = pretty(data); }, { once: false });
    entry.rawText = data;
    const stick = this.rawEl.scrollHeight - this.rawEl.scrollTop - this.rawEl.clientHeight < 40;
    this.rawEl.append(entry);
    if (this.rawEl.childElementCount > RAW_LIMIT) this.rawEl.firstElementChild.remove();
    this.filterOne(entry);
    if (stick) this.rawEl.scrollTop = this.rawEl.scrollHeight;
    return entry;
  }

  filterOne(entry) {
    const q = this.rawFilter.value.trim().toLowerCase();
    entry.hidden = q !== "" && !entry.rawText.toLowerCase().includes(q) && entry.dataset.seq !== q.replace(/^#/, "");
  }

  applyFilter() {
    for (const e of this.rawEl.children) this.filterOne(e);
  }

  close() {
    this.stream?.stop();
    for (const p of this.pending.values()) p.reject(new Error("instance closed"));
    this.pending.clear();
  }
}

// validSession reports whether an agent's sessionId can name a session
// tab: a non-empty string (an object would open a tab per message).
function validSession(id) {
  return typeof id === "string" && id !== "";
}

function shortID(id) {
  return id.length > 18 ? `${id.slice(0, 8)}…${id.slice(-6)}` : id;
}

// --- the section ---

export function mount(root) {
  ui = {};
  ui.agent = h("select#agent-select", { "aria-label": "Agent" }, h("option", { value: "mock" }, "mock"));
  ui.serverId = h("input#server-id", { placeholder: "generated", spellcheck: false });
  ui.cwd = h("input#cwd", { placeholder: "/", spellcheck: false });
  ui.startBtn = h("button.primary#start-session", { type: "submit" }, "Start session");
  ui.agentNote = h("div.muted.small");
  ui.startStatus = h("div.start-status");
  const form = h("form.start",
    h("h3", "Start a session"),
    h("label", "Agent", ui.agent), ui.agentNote,
    h("label", "Server id", ui.serverId),
    h("label", "Working directory", ui.cwd),
    ui.startBtn, ui.startStatus);
  form.addEventListener("submit", (ev) => { ev.preventDefault(); startNew(); });
  ui.list = h("ul.instance-list");
  ui.listStatus = h("div.muted.small");
  ui.host = h("div.instance-host");
  replace(root, h("div.sessions-layout",
    h("aside.sidebar", form,
      h("div.instances",
        h("div.list-head", h("h3", "Instances"), h("button.small", { type: "button", onclick: () => refreshList() }, "Refresh")),
        ui.list, ui.listStatus)),
    ui.host));
  showEmpty();
  loadAgents();
  defaultCwd();
  refreshList();
  pollTimer = setInterval(() => { if (!document.hidden && !root.hidden) refreshList(); }, 5000);
}

export function shown() { refreshList(); }

export function tokenChanged() {
  if (!ui) return;
  loadAgents();
  defaultCwd();
  refreshList();
  for (const inst of instances.values()) inst.stream?.reconnect();
}

function showEmpty() {
  replace(ui.host, h("div.empty.big",
    h("p", "Pick an agent and press ", h("strong", "Start session"), ", or open an instance from the list."),
    h("p.muted", "The mock agent needs no install. Its prompt words: permission, stream N, slow MS, think, tool, plan, exit.")));
}

async function loadAgents() {
  const { agents, error } = await catalogue();
  const prev = ui.agent.value || "mock";
  replace(ui.agent, agents.map((a) => h("option", { value: a.id },
    a.installed === undefined ? a.id : `${a.id}${a.installed ? "" : " (not installed)"}`)));
  ui.agent.value = agents.some((a) => a.id === prev) ? prev : (agents.some((a) => a.id === "mock") ? "mock" : agents[0]?.id);
  ui.agentNote.textContent = error
    ? (error.status === 404 ? "Catalogue not served by this daemon: showing the known agent ids." : `Catalogue unavailable: ${error.message}`)
    : "";
}

// defaultCwd fills the working directory with the daemon's home (the
// directory relative file paths resolve against), when the fs routes tell.
async function defaultCwd() {
  if (ui.cwd.value) return;
  try {
    const st = await getJSON("/v1/fs/stat", { path: "." });
    if (st && st.path && !ui.cwd.value) ui.cwd.value = st.path;
  } catch { /* the placeholder "/" is used */ }
}

async function startNew() {
  const agent = ui.agent.value;
  if (!agent) return;
  const serverId = ui.serverId.value.trim() || `ui-${agent}-${randomID(4)}`;
  if (instances.has(serverId)) {
    open(instances.get(serverId));
    return;
  }
  ui.serverId.value = "";
  const inst = new Instance(serverId, agent);
  instances.set(serverId, inst);
  open(inst);
  ui.startBtn.disabled = true;
  try {
    await inst.start(ui.cwd.value.trim() || "/");
  } finally {
    ui.startBtn.disabled = false;
    refreshList();
  }
}

function open(inst) {
  current = inst;
  replace(ui.host, inst.el);
  renderList();
}

async function deleteInstance(inst) {
  try {
    await request("DELETE", inst.path);
  } catch (e) {
    inst.showError(e, "delete failed");
    return;
  }
  inst.close();
  instances.delete(inst.serverId);
  if (current === inst) { current = null; showEmpty(); }
  refreshList();
}

let listed = []; // the daemon's GET /v1/acp answer

async function refreshList() {
  try {
    const res = await getJSON("/v1/acp");
    listed = res.servers || [];
    ui.listStatus.textContent = "";
  } catch (e) {
    ui.listStatus.textContent = `cannot list instances: ${e.message}`;
  }
  renderList();
}

function renderList() {
  if (!ui) return;
  const byId = new Map(listed.map((s) => [s.serverId, s]));
  for (const inst of instances.values()) if (!byId.has(inst.serverId)) byId.set(inst.serverId, { serverId: inst.serverId, agent: inst.agent, state: inst.state, local: true });
  const items = [...byId.values()].sort((a, b) => a.serverId.localeCompare(b.serverId));
  replace(ui.list, items.length ? items.map((s) => {
    const inst = instances.get(s.serverId);
    const state = s.state || (inst && inst.state) || "";
    const li = h("li", { class: inst && inst === current ? "active" : "", "data-server-id": s.serverId },
      h("button.link", { type: "button", title: inst ? "show" : "attach: read its stream from the start of the replay buffer" },
        h("span.sid", s.serverId), h("span.muted", ` ${s.agent}`)),
      state ? h(`span.badge.${state === "running" || state === "ready" ? "ok" : state === "exited" || state === "failed" ? "bad" : "warn"}`, state) : null);
    li.querySelector("button").addEventListener("click", () => attach(s));
    return li;
  }) : h("li.muted", "none yet"));
}

// attach shows an instance, following its stream if the inspector did not
// create it (the daemon replays what its buffer holds).
function attach(s) {
  let inst = instances.get(s.serverId);
  if (!inst) {
    inst = new Instance(s.serverId, s.agent);
    // Our request ids start high, so they are unlikely to collide with the
    // other client's (a duplicate in-flight id is answered 409).
    inst.nextId = 1_000_000 + Math.floor(Math.random() * 1_000_000);
    instances.set(s.serverId, inst);
    inst.setState(s.state || "running");
    replace(inst.transcriptHost, h("div.empty", "Attached: replaying the stream. Use New session to open a session here."));
    inst.follow();
  }
  open(inst);
}

window.addEventListener("beforeunload", () => { clearInterval(pollTimer); });
