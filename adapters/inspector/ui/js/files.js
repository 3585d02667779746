// The Files section: browse directories (GET /v1/fs/entries), view and
// download files (GET /v1/fs/file), upload files (PUT /v1/fs/file) and tar
// batches (POST /v1/fs/upload-batch), create directories, move and delete.

import { getJSON, request, sendJSON } from "./api.js";
import { dataURL, download, errorBox, fmtBytes, fmtTime, h, replace, spinner, str } from "./dom.js";

const PREVIEW_BYTES = 256 * 1024; // bytes read to preview a large file
const IMAGE = /\.(png|jpe?g|gif|webp|svg|bmp|ico)$/i;

let ui = null;
let cwd = null; // absolute path of the directory shown

export function mount(root) {
  ui = {};
  ui.path = h("input#fs-path", { spellcheck: false, "aria-label": "Directory path", placeholder: "path (relative paths start at the daemon's home)" });
  const go = h("form.pathbar", ui.path, h("button", { type: "submit" }, "Go"),
    h("button", { type: "button", onclick: () => cwd && list(parent(cwd)), title: "parent directory" }, "Up"),
    h("button", { type: "button", onclick: () => list(cwd || ".") }, "Refresh"));
  go.addEventListener("submit", (ev) => { ev.preventDefault(); list(ui.path.value.trim() || "."); });

  ui.mkdirName = h("input#mkdir-name", { placeholder: "new folder name", spellcheck: false, "aria-label": "New folder name" });
  const mk = h("form.inline", ui.mkdirName, h("button", { type: "submit" }, "New folder"));
  mk.addEventListener("submit", (ev) => { ev.preventDefault(); mkdir(); });

  ui.uploadFiles = h("input#upload-files", { type: "file", multiple: true, hidden: true });
  ui.uploadFiles.addEventListener("change", () => uploadFiles([...ui.uploadFiles.files]));
  ui.uploadTar = h("input#upload-tar", { type: "file", accept: ".tar,application/x-tar", hidden: true });
  ui.uploadTar.addEventListener("change", () => uploadTar(ui.uploadTar.files[0]));

  ui.status = h("div.fs-status", { role: "status" });
  ui.table = h("tbody");
  ui.viewer = h("div.viewer", h("div.empty", "Select a file to view it."));
  replace(root,
    h("div.toolbar", h("h2", "Files"), go),
    h("div.toolbar.secondary", mk,
      h("button", { type: "button", onclick: () => ui.uploadFiles.click() }, "Upload files…"), ui.uploadFiles,
      h("button", { type: "button", onclick: () => ui.uploadTar.click(), title: "extract a .tar archive into this directory" }, "Upload .tar…"), ui.uploadTar),
    ui.status,
    h("div.files-layout",
      h("div.listing", h("table.grid.files",
        h("thead", h("tr", ["Name", "Size", "Modified", ""].map((t) => h("th", t)))), ui.table)),
      ui.viewer));
  list(".");
}

export function tokenChanged() { if (ui) list(cwd || "."); }

function join(dir, name) {
  return dir.endsWith("/") ? dir + name : `${dir}/${name}`;
}

function parent(p) {
  const t = p.replace(/\/+$/, "");
  const i = t.lastIndexOf("/");
  return i <= 0 ? "/" : t.slice(0, i);
}

function base(p) {
  return p.replace(/\/+$/, "").split("/").pop() || p;
}

function status(...children) { replace(ui.status, ...children); }

async function list(path) {
  status(spinner("loading…"));
  try {
    // stat resolves "." and other relative paths to the absolute one.
    const st = await getJSON("/v1/fs/stat", { path });
    if (st.entryType !== "directory") {
      await list(parent(st.path));
      view(st.path, st.size);
      return;
    }
    const entries = await getJSON("/v1/fs/entries", { path: st.path });
    cwd = st.path;
    ui.path.value = cwd;
    entries.sort((a, b) => (a.entryType === b.entryType ? a.name.localeCompare(b.name) : a.entryType === "directory" ? -1 : 1));
    replace(ui.table, entries.length ? entries.map(row) : h("tr", h("td.muted", { colspan: 4 }, "empty directory")));
    status(h("span.muted", `${entries.length} entr${entries.length === 1 ? "y" : "ies"}`));
  } catch (e) {
    // A missing path is 404 not_found; a 404 of another kind means the
    // daemon does not serve the file routes.
    const unserved = e.status === 404 && e.problem?.type !== "urn:sandbox-agent:error:not_found";
    status(errorBox(e, unserved ? "the file routes are not available" : `cannot list ${path}`));
  }
}

function row(e) {
  const isDir = e.entryType === "directory";
  const name = h("button.link.entry-name", { type: "button", title: str(e.path) }, isDir ? `${str(e.name)}/` : str(e.name));
  name.addEventListener("click", () => (isDir ? list(e.path) : view(e.path, e.size)));
  const actions = h("td.actions");
  const normal = () => replace(actions,
    isDir ? null : h("button.small", { type: "button", onclick: () => save(e.path) }, "Download"),
    h("button.small", { type: "button", onclick: moveForm }, "Move"),
    h("button.small.danger", { type: "button", onclick: del }, "Delete"));
  function moveForm() {
    const to = h("input.move-to", { value: e.path, spellcheck: false, "aria-label": "Move to" });
    const over = h("input", { type: "checkbox" });
    const f = h("form.inline", to, h("label.check", over, " overwrite"), h("button.small", { type: "submit" }, "OK"),
      h("button.small", { type: "button", onclick: normal }, "Cancel"));
    f.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      try {
        await sendJSON("POST", "/v1/fs/move", null, { from: e.path, to: to.value.trim(), overwrite: over.checked });
        await list(cwd);
      } catch (err) { status(errorBox(err, "move failed")); }
    });
    replace(actions, f);
    to.focus();
    to.setSelectionRange(e.path.length - e.name.length, e.path.length);
  }
  function del(ev) {
    const b = ev.currentTarget;
    if (!b.dataset.armed) {
      b.dataset.armed = "1";
      b.textContent = isDir ? "Delete folder and contents?" : "Really delete?";
      setTimeout(() => { if (b.isConnected) { delete b.dataset.armed; b.textContent = "Delete"; } }, 4000);
      return;
    }
    request("DELETE", "/v1/fs/entry", { query: { path: e.path, recursive: isDir ? "true" : "false" } })
      .then(() => list(cwd), (err) => status(errorBox(err, "delete failed")));
  }
  normal();
  return h("tr", { "data-name": str(e.name), "data-type": str(e.entryType) },
    h("td", h("span", { class: `icon ${isDir ? "dir" : "file"}`, "aria-hidden": "true" }), name),
    h("td.num", isDir ? "" : fmtBytes(e.size)),
    h("td", fmtTime(e.modified)),
    actions);
}

async function view(path, size) {
  const name = base(path);
  const dl = h("button", { type: "button", onclick: () => save(path) }, "Download");
  replace(ui.viewer, h("div.viewer-head", h("strong.viewer-name", name), h("span.muted", ` ${fmtBytes(size)}`), dl),
    h("div.viewer-path.muted", path), h("div.viewer-body", spinner("loading…")));
  const body = ui.viewer.querySelector(".viewer-body");
  try {
    const partial = size > PREVIEW_BYTES;
    const res = await request("GET", "/v1/fs/file", {
      query: { path },
      headers: { Accept: "application/octet-stream", ...(partial ? { Range: `bytes=0-${PREVIEW_BYTES - 1}` } : {}) },
    });
    let buf = new Uint8Array(await res.arrayBuffer());
    if (buf.length > PREVIEW_BYTES) buf = buf.slice(0, PREVIEW_BYTES);
    const note = partial ? h("div.muted.small", `showing the first ${fmtBytes(buf.length)} of ${fmtBytes(size)}`) : null;
    if (IMAGE.test(name) && !partial) {
      // A data: URL, not a blob: one: a blob: URL is of the daemon's
      // origin, so "open image in new tab" on an SVG would run its
      // script there; a data: document has an origin of its own, and
      // browsers refuse to open one at the top level. The type is taken
      // from the name: the fs API sends every file as octet-stream.
      const type = /\.svg$/i.test(name) ? "image/svg+xml" : imageType(name);
      replace(body, h("img.preview", { src: await dataURL(buf, type), alt: name }));
      return;
    }
    let text = null;
    try { text = new TextDecoder("utf-8", { fatal: !partial }).decode(buf); } catch { /* binary */ }
    if (text !== null && !/\u0000/.test(text.slice(0, 8192))) replace(body, note, h("pre.file-content", text));
    else replace(body, note, h("div.muted", "binary file; first bytes:"), h("pre.file-content.hex", hexdump(buf.slice(0, 512))));
  } catch (e) {
    replace(body, errorBox(e, "cannot read"));
  }
}

function imageType(name) {
  const ext = name.toLowerCase().split(".").pop();
  return { jpg: "image/jpeg", jpeg: "image/jpeg", png: "image/png", gif: "image/gif", webp: "image/webp", bmp: "image/bmp", ico: "image/x-icon" }[ext] || "image/png";
}

function hexdump(b) {
  const lines = [];
  for (let i = 0; i < b.length; i += 16) {
    const row = Array.from(b.slice(i, i + 16));
    lines.push(`${i.toString(16).padStart(6, "0")}  ${row.map((x) => x.toString(16).padStart(2, "0")).join(" ").padEnd(48)}  ${row.map((x) => (x >= 32 && x < 127 ? String.fromCharCode(x) : ".")).join("")}`);
  }
  return lines.join("\n");
}

async function save(path) {
  try {
    const res = await request("GET", "/v1/fs/file", { query: { path }, headers: { Accept: "application/octet-stream" } });
    download(await res.blob(), base(path));
  } catch (e) {
    status(errorBox(e, "download failed"));
  }
}

async function mkdir() {
  const name = ui.mkdirName.value.trim();
  if (!name || !cwd) return;
  try {
    await request("POST", "/v1/fs/mkdir", { query: { path: name.startsWith("/") ? name : join(cwd, name) } });
    ui.mkdirName.value = "";
    await list(cwd);
  } catch (e) {
    status(errorBox(e, "mkdir failed"));
  }
}

async function uploadFiles(files) {
  if (!files.length || !cwd) return;
  const dir = cwd;
  const done = [];
  for (const [i, f] of files.entries()) {
    status(spinner(`uploading ${f.name} (${i + 1}/${files.length}, ${fmtBytes(f.size)})…`));
    try {
      await request("PUT", "/v1/fs/file", { query: { path: join(dir, f.name) }, body: f, headers: { "Content-Type": "application/octet-stream" } });
      done.push(f.name);
    } catch (e) {
      ui.uploadFiles.value = "";
      await list(dir);
      status(errorBox(e, `upload of ${f.name} failed`));
      return;
    }
  }
  ui.uploadFiles.value = "";
  await list(dir);
  status(h("span.ok", `uploaded ${done.join(", ")}`));
}

async function uploadTar(file) {
  if (!file || !cwd) return;
  const dir = cwd;
  status(spinner(`extracting ${file.name} (${fmtBytes(file.size)})…`));
  try {
    const res = await request("POST", "/v1/fs/upload-batch", { query: { path: dir }, body: file, headers: { "Content-Type": "application/x-tar", Accept: "application/json" } });
    const out = await res.json();
    ui.uploadTar.value = "";
    await list(dir);
    const n = (out.paths || []).length;
    status(h("span.ok", `extracted ${n}${out.truncated ? "+" : ""} path${n === 1 ? "" : "s"} from ${file.name}`),
      n ? h("details.small", h("summary", "paths"), h("pre", out.paths.join("\n"))) : null);
  } catch (e) {
    ui.uploadTar.value = "";
    status(errorBox(e, `extracting ${file.name} failed`));
  }
}
