// The Agents section: the catalogue (GET /v1/agents?config=true) with
// install state, and install buttons (POST /v1/agents/{agent}/install).

import { getJSON, sendJSON } from "./api.js";
import { errorBox, fmtDuration, h, replace, spinner, str } from "./dom.js";

// knownAgents is api.md section 5's list, used when the daemon has no
// catalogue route.
export const knownAgents = ["claude", "codex", "opencode", "amp", "pi", "cursor", "mock"];

// catalogue returns {agents, error}: the daemon's list, or the known ids
// (without install state) and the error that prevented reading it.
export async function catalogue(noCache = false) {
  try {
    const res = await getJSON("/v1/agents", { config: "true", no_cache: noCache ? "true" : undefined });
    return { agents: res.agents || [], error: null };
  } catch (e) {
    return { agents: knownAgents.map((id) => ({ id })), error: e };
  }
}

let root;
let body;
let noCache;
const installing = new Map(); // agent id -> status element kept across refreshes

export function mount(el) {
  root = el;
  noCache = h("input", { type: "checkbox", id: "agents-nocache" });
  body = h("div.agents-body");
  replace(root,
    h("div.toolbar",
      h("h2", "Agents"),
      h("button", { onclick: () => refresh() }, "Refresh"),
      h("label.check", noCache, " bypass cache"),
      h("span.muted", "Install state, versions and capabilities of every agent this daemon can run.")),
    body);
  refresh();
}

export function shown() { refresh(); }
export function tokenChanged() { if (root) refresh(); }

async function refresh() {
  const { agents, error } = await catalogue(noCache.checked);
  const rows = agents.map(row);
  replace(body,
    error ? h("div.notice", { role: "status" },
      h("strong", "The agent catalogue is not available. "),
      error.status === 404
        ? `GET /v1/agents answered 404 (${error.message}): this daemon does not serve the catalogue yet. `
        : `GET /v1/agents failed: ${error.message}. `,
      "Sessions still work with the known agent ids below; the daemon installs an agent on its first use.") : null,
    h("table.grid.agents",
      h("thead", h("tr", ["Agent", "Installed", "Credentials", "Version", "Path", "Running", "Capabilities", "Options", ""].map((t) => h("th", t)))),
      h("tbody", rows)));
}

function yesNo(v) {
  if (v === undefined || v === null) return h("span.muted", "?");
  return h(`span.badge.${v ? "ok" : "off"}`, v ? "yes" : "no");
}

function row(a) {
  const caps = a.capabilities ? Object.entries(a.capabilities).filter(([, v]) => v).map(([k]) => k) : null;
  const total = a.capabilities ? Object.keys(a.capabilities).length : 0;
  let status = installing.get(a.id);
  if (!status) { status = h("div.install-status"); installing.set(a.id, status); }
  // The built-in mock (version "builtin", no install path) is part of the
  // daemon: nothing to install.
  const builtin = a.installed && a.version === "builtin" && !a.path;
  let btn = null;
  if (!builtin) {
    btn = h("button", { "data-agent": a.id, class: "install" }, a.installed ? "Reinstall" : "Install");
    btn.addEventListener("click", () => install(a.id, !!a.installed, btn, status));
  }
  return h("tr", { "data-agent": a.id },
    h("td", h("strong", str(a.id))),
    h("td", builtin ? h("span.badge.ok.builtin", { title: "part of the daemon; needs no install" }, "built in") : yesNo(a.installed)),
    h("td", yesNo(a.credentialsAvailable)),
    h("td", a.version ? str(a.version) : h("span.muted", "—")),
    a.path ? h("td.path", str(a.path)) : h("td", h("span.muted", "—")),
    h("td", a.serverStatus && a.serverStatus.status === "running"
      ? h("span.badge.ok", `running ${fmtDuration(a.serverStatus.uptimeMs)}`) : h("span.muted", "—")),
    h("td", caps ? h("details.caps", h("summary", `${caps.length}/${total}`), h("div.chips", caps.map((c) => h("span.chip", c)))) : h("span.muted", "—")),
    h("td", options(a.configOptions)),
    h("td.actions", btn, status,
      // configError: what is wrong with the agent's setup, e.g. a launcher
      // whose program is gone.
      a.configError ? h("div.error.small.config-error", str(a.configError)) : null));
}

// options shows the agent's session config options (model, mode, ...) with
// their current values.
function options(list) {
  if (!Array.isArray(list) || !list.length) return h("span.muted", "—");
  return h("details.caps", h("summary", `${list.length}`),
    h("ul.options", list.map((o) => h("li",
      h("strong", str(o && (o.name || o.id))), ": ", str(o && o.currentValue),
      o && Array.isArray(o.options) ? h("span.muted", ` (${o.options.map((x) => str(x && (x.value ?? x.name))).join(", ")})`) : null))));
}

async function install(id, reinstall, btn, status) {
  btn.disabled = true;
  replace(status, spinner(`installing ${id}…`));
  try {
    const res = await sendJSON("POST", `/v1/agents/${encodeURIComponent(id)}/install`, null, reinstall ? { reinstall: true } : {});
    const arts = (res && res.artifacts) || [];
    replace(status, h("div.ok", res && res.already_installed ? "already installed" : "installed"),
      arts.length ? h("ul.artifacts", arts.map((x) => h("li", `${str(x.kind)} (${str(x.source)}${x.version ? " " + str(x.version) : ""}): `, h("code", str(x.path))))) : null);
    refresh();
  } catch (e) {
    replace(status, errorBox(e, "install failed"));
  } finally {
    btn.disabled = false;
  }
}
