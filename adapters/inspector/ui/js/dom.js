// Tiny DOM helpers. Everything the agent or the daemon sends is put in the
// page as text (text nodes, textContent), never as HTML: nothing here or in
// the other modules uses innerHTML, insertAdjacentHTML or document.write,
// and the page's Content-Security-Policy enforces Trusted Types, so such a
// sink would throw rather than parse markup.

// h builds an element: h("div#id.a.b", {onclick, title, ...}, ...children).
// Children may be strings, nodes, arrays, null or false; any other value is
// shown as its JSON text (str).
//
// The second argument is taken for attributes only when it is a plain
// object whose every key is one h knows (see setAttr); anything else is a
// child. Call sites pass what agents, files and processes sent (wrapped in
// str, but a slip must stay harmless): a JSON object where a string was
// expected is then shown as text, never turned into an event handler,
// markup (innerHTML), a style or a javascript: URL.
export function h(spec, attrs, ...children) {
  const parts = spec.match(/[.#]?[^.#]+/g) || ["div"];
  const el = document.createElement(parts[0][0] === "." || parts[0][0] === "#" ? "div" : parts.shift());
  for (const p of parts) {
    if (p[0] === "#") el.id = p.slice(1);
    else el.classList.add(p.slice(1));
  }
  if (attrs !== undefined && !isAttrs(attrs)) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [k, v] of Object.entries(attrs || {})) setAttr(el, k, v);
  append(el, children);
  return el;
}

// Attributes set from a string or number; booleans set the property.
const plainAttrs = new Set(["accept", "alt", "colspan", "download", "id", "max", "min", "placeholder", "role",
  "rows", "size", "spellcheck", "tabindex", "title", "type"]);
const boolProps = new Set(["checked", "disabled", "hidden", "multiple", "spellcheck"]);
const namedAttr = /^(?:aria|data)-[a-z0-9-]+$/;

function knownAttr(k) {
  return k === "class" || k === "text" || k === "value" || k === "dataset" || k === "href" || k === "src" ||
    /^on[a-z]+$/.test(k) || plainAttrs.has(k) || boolProps.has(k) || namedAttr.test(k);
}

function isAttrs(v) {
  if (v === null || typeof v !== "object" || Object.getPrototypeOf(v) !== Object.prototype) return false;
  return Object.keys(v).every(knownAttr);
}

// setAttr sets one attribute the safe way: event handlers only from
// functions, href only to a blob: URL (downloads), src only to a blob: or
// a base64 data: image, nothing else that can hold script or style.
function setAttr(el, k, v) {
  if (v === undefined || v === null || v === false && !boolProps.has(k)) return;
  if (/^on[a-z]+$/.test(k)) {
    if (typeof v === "function") el.addEventListener(k.slice(2), v);
  } else if (k === "class") {
    el.classList.add(...str(v).split(/\s+/).filter(Boolean));
  } else if (k === "text") {
    el.textContent = str(v);
  } else if (k === "value") {
    el.value = str(v);
  } else if (k === "dataset") {
    for (const [dk, dv] of Object.entries(v)) if (/^[a-z][a-zA-Z0-9]*$/.test(dk)) el.dataset[dk] = str(dv);
  } else if (k === "href") {
    if (typeof v === "string" && v.startsWith("blob:")) el.setAttribute("href", v);
  } else if (k === "src") {
    if (typeof v === "string" && /^(?:blob:|data:image\/(?:png|jpeg|gif|webp|bmp|x-icon|svg\+xml);base64,)/.test(v)) el.setAttribute("src", v);
  } else if (typeof v === "boolean" && boolProps.has(k)) {
    el[k] = v;
  } else if (typeof v === "string" || typeof v === "number" || v === true) {
    el.setAttribute(k, v === true ? "" : String(v));
  }
}

// str is how a value that should have been a string is shown: itself, or
// its JSON text ("" for undefined and null).
export function str(v) {
  if (typeof v === "string") return v;
  if (v === undefined || v === null) return "";
  if (typeof v === "object") {
    try { return JSON.stringify(v); } catch { return String(v); }
  }
  return String(v);
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : str(c));
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
    h("strong", prefix ? `${prefix}: ` : ""), str(err && err.message ? err.message : String(err)),
    extra ? h("pre.stderr", str(extra)) : null);
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

// dataURL returns bytes as a base64 data: URL of the given type.
export function dataURL(bytes, type) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(r.result);
    r.onerror = () => reject(r.error);
    r.readAsDataURL(new Blob([bytes], { type }));
  });
}

export function pretty(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
}
