// The Config section: view and edit the MCP server and skills entries of a
// directory (GET/PUT/DELETE /v1/config/mcp and /v1/config/skills).

import { getJSON, request, sendJSON } from "./api.js";
import { errorBox, h, replace, spinner } from "./dom.js";

const kinds = {
  mcp: { route: "/v1/config/mcp", param: "mcpName", file: "mcp.json", label: "MCP server" },
  skills: { route: "/v1/config/skills", param: "skillName", file: "skills.json", label: "Skills" },
};

const templates = {
  "local MCP": { type: "local", command: "npx", args: ["-y", "@modelcontextprotocol/server-everything"], env: {}, enabled: true },
  "remote MCP": { type: "remote", url: "https://example.com/mcp", headers: {}, transport: "http", enabled: true },
  skills: { sources: [{ type: "github", source: "owner/repo", skills: [], ref: "main" }] },
};

let ui = null;

export function mount(root) {
  ui = {};
  ui.dir = h("input#cfg-dir", { spellcheck: false, placeholder: "directory (relative: the daemon's cwd)", "aria-label": "Directory" });
  ui.kind = h("select#cfg-kind", { "aria-label": "Kind" }, Object.entries(kinds).map(([k, v]) => h("option", { value: k }, v.label)));
  ui.name = h("input#cfg-name", { spellcheck: false, placeholder: "entry name", "aria-label": "Entry name" });
  ui.editor = h("textarea#cfg-editor.code", { rows: 18, spellcheck: false, "aria-label": "Entry JSON" });
  ui.status = h("div.cfg-status", { role: "status" });
  ui.known = h("div.known");
  const form = h("form.cfg-form",
    h("label", "Directory", ui.dir),
    h("label", "Kind", ui.kind),
    h("label", "Name", ui.name),
    h("div.row",
      h("button#cfg-load", { type: "submit" }, "Load"),
      h("button.primary#cfg-save", { type: "button", onclick: save }, "Save"),
      h("button.danger#cfg-delete", { type: "button", onclick: del }, "Delete")));
  form.addEventListener("submit", (ev) => { ev.preventDefault(); load(); });
  ui.kind.addEventListener("change", () => { refreshKnown(); fillTemplate(); });
  ui.dir.addEventListener("change", refreshKnown);
  replace(root,
    h("div.toolbar", h("h2", "Config"), h("span.muted", "MCP server and skills entries the daemon stores for a directory, in .sandbox-agent/config/. It does not pass them to agents: your client reads them.")),
    h("div.config-layout",
      h("div.cfg-side", form, h("h3", "Entries in this directory"), ui.known),
      h("div.cfg-main",
        h("div.row.templates", h("span.muted", "Templates:"),
          Object.keys(templates).map((t) => h("button.small", { type: "button", onclick: () => { ui.editor.value = JSON.stringify(templates[t], null, 2); } }, t))),
        ui.editor, ui.status)));
  fillTemplate();
  defaultDir();
}

export function tokenChanged() { if (ui) refreshKnown(); }

function fillTemplate() {
  if (ui.editor.value.trim() && !Object.values(templates).some((t) => JSON.stringify(t, null, 2) === ui.editor.value)) return;
  ui.editor.value = JSON.stringify(ui.kind.value === "mcp" ? templates["local MCP"] : templates.skills, null, 2);
}

async function defaultDir() {
  try {
    const st = await getJSON("/v1/fs/stat", { path: "." });
    if (!ui.dir.value && st && st.path) ui.dir.value = st.path;
  } catch { /* left empty */ }
  if (!ui.dir.value) ui.dir.value = ".";
  refreshKnown();
}

function query() {
  const k = kinds[ui.kind.value];
  return { k, q: { directory: ui.dir.value.trim(), [k.param]: ui.name.value.trim() } };
}

function status(...c) { replace(ui.status, ...c); }

async function load() {
  const { k, q } = query();
  if (!q.directory || !q[k.param]) { status(h("div.error", "Directory and name are both required.")); return; }
  status(spinner("loading…"));
  try {
    const entry = await getJSON(k.route, q);
    ui.editor.value = JSON.stringify(entry, null, 2);
    status(h("span.ok", `loaded ${k.label} entry "${q[k.param]}"`));
  } catch (e) {
    if (e.status === 404 && e.problem && e.problem.type && e.problem.type.endsWith(":session_not_found")) {
      status(h("div.notice", `No ${k.label} entry "${q[k.param]}" in ${q.directory} yet: edit the JSON and press Save to create it.`));
    } else status(errorBox(e, "load failed"));
  }
}

async function save() {
  const { k, q } = query();
  if (!q.directory || !q[k.param]) { status(h("div.error", "Directory and name are both required.")); return; }
  let value;
  try { value = JSON.parse(ui.editor.value); } catch (e) { status(errorBox(e, "the entry is not valid JSON")); return; }
  status(spinner("saving…"));
  try {
    await sendJSON("PUT", k.route, q, value);
    // Show what the daemon stored (aliases normalised, unknown fields dropped).
    const stored = await getJSON(k.route, q);
    ui.editor.value = JSON.stringify(stored, null, 2);
    status(h("span.ok", `saved ${k.label} entry "${q[k.param]}"`));
    refreshKnown();
  } catch (e) {
    status(errorBox(e, "save failed"));
  }
}

async function del() {
  const { k, q } = query();
  if (!q.directory || !q[k.param]) { status(h("div.error", "Directory and name are both required.")); return; }
  try {
    await request("DELETE", k.route, { query: q });
    status(h("span.ok", `deleted ${k.label} entry "${q[k.param]}"`));
    refreshKnown();
  } catch (e) {
    status(errorBox(e, "delete failed"));
  }
}

// refreshKnown lists the entry names by reading the config file through the
// file routes; it needs an absolute directory (config resolves relative
// directories against the daemon's cwd, files against its home). A
// directory with no config file yet has no entries: each step down to the
// file is a listing of a directory known to exist, so a missing file is
// never a failed request (nor an error in the browser's console).
async function refreshKnown() {
  const dir = ui.dir.value.trim().replace(/\/+$/, "") || "/";
  const k = kinds[ui.kind.value];
  if (!dir.startsWith("/")) { replace(ui.known, h("span.muted.small", "Enter an absolute directory to list its entries.")); return; }
  const none = () => replace(ui.known, h("span.muted.small", "no entries yet"));
  try {
    let at = dir === "/" ? "" : dir;
    for (const name of [".sandbox-agent", "config", k.file]) {
      const entries = await getJSON("/v1/fs/entries", { path: at || "/" });
      if (!entries.some((e) => e.name === name)) { none(); return; }
      at = `${at}/${name}`;
    }
    const res = await request("GET", "/v1/fs/file", { query: { path: at } });
    const names = Object.keys(await res.json()).sort();
    replace(ui.known, names.length ? h("ul.known-list", names.map((n) =>
      h("li", h("button.link", { type: "button", onclick: () => { ui.name.value = n; load(); } }, n)))) : none());
  } catch (e) {
    replace(ui.known, h("span.muted.small", e.status === 404 ? "no such directory" : `cannot list entries: ${e.message}`));
  }
}
