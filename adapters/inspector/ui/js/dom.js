// Tiny DOM helpers. Everything the agent or the daemon sends is put in the
// page as text (textContent), never as HTML.

// h builds an element: h("div#id.a.b", {onclick, title, ...}, ...children).
// Attributes: "class" adds classes, "text" sets textContent, "on<event>"
// adds a listener, known properties (value, disabled, ...) are set as
// properties, everything else as attributes. Children may be strings, nodes,
// arrays, null or false.
export function h(spec, attrs, ...children) {
  const parts = spec.match(/[.#]?[^.#]+/g) || ["div"];
  const el = document.createElement(parts[0][0] === "." || parts[0][0] === "#" ? "div" : parts.shift());
  for (const p of parts) {
    if (p[0] === "#") el.id = p.slice(1);
    else el.classList.add(p.slice(1));
  }
  if (attrs && (typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || (v === false && !(k in el))) continue;
    if (k === "class") el.classList.add(...String(v).split(/\s+/).filter(Boolean));
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k in el && typeof v !== "string") el[k] = v;
    else if (k === "value") el.value = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

// clear removes every child of el and appends the given ones.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function fmtBytes(n) {
  if (n === undefined || n === null) return "";
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

export function fmtTime(s) {
  if (!s) return "";
  const d = new Date(s);
  return isNaN(d) ? String(s) : d.toLocaleString();
}

export function fmtDuration(ms) {
  if (ms === undefined || ms === null) return "";
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

// spinner is the small "working" indicator shown next to a label.
export function spinner(label) {
  return h("span.busy", h("span.spinner", { "aria-hidden": "true" }), label);
}

// errorBox shows an error: its message, and any stderr or detail message
// the daemon attached, in a scrollable block.
export function errorBox(err, prefix) {
  const extra = err && err.extra;
  return h("div.error", { role: "alert" },
    h("strong", prefix ? `${prefix}: ` : ""), err && err.message ? err.message : String(err),
    extra ? h("pre.stderr", extra) : null);
}

export function randomID(n = 6) {
  const b = new Uint8Array(n);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("").slice(0, n * 2);
}

// download saves a Blob under name.
export function download(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = h("a", { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

export function pretty(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
}
