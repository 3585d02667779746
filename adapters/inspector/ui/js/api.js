// The daemon's public HTTP API (api.md), as the inspector uses it: fetch
// with the bearer token, and errors turned into readable messages from the
// problem body's `detail`.

const TOKEN_KEY = "sandbox-agent.inspector.token";
let token = sessionStorage.getItem(TOKEN_KEY) || "";
let extraHeaders = {};

// initFromURL takes ?token= and ?headers= (as the TypeScript SDK's
// buildInspectorUrl writes them) and removes them from the address bar.
export function initFromURL() {
  const url = new URL(location.href);
  const t = url.searchParams.get("token");
  if (t !== null) setToken(t);
  const hs = url.searchParams.get("headers");
  if (hs) {
    try { extraHeaders = Object.fromEntries(Object.entries(JSON.parse(hs)).map(([k, v]) => [k, String(v)])); } catch { /* ignored: not JSON */ }
  }
  if (t !== null || hs !== null) {
    url.searchParams.delete("token");
    url.searchParams.delete("headers");
    history.replaceState(history.state, "", url.pathname + url.search + url.hash);
  }
}

export function getToken() { return token; }

export function setToken(t) {
  token = (t || "").trim();
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// ApiError is a failed request: status (0 when the daemon was unreachable),
// the problem body if there was one, message (the problem's detail) and
// extra (stderr or a details message worth showing in full).
export class ApiError extends Error {
  constructor(status, message, problem, extra) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.problem = problem || null;
    this.extra = extra || "";
  }
}

// RPCError is a JSON-RPC error response from the agent.
export class RPCError extends Error {
  constructor(err) {
    super(`JSON-RPC error ${err && err.code}: ${err && err.message}`);
    this.name = "RPCError";
    this.rpc = err;
    this.extra = err && err.data !== undefined ? JSON.stringify(err.data, null, 2) : "";
  }
}

async function errorFrom(res) {
  const text = await res.text().catch(() => "");
  let problem = null;
  try { problem = JSON.parse(text); } catch { /* not JSON */ }
  if (problem && typeof problem === "object" && (problem.detail || problem.title)) {
    const d = problem.details || {};
    const extra = [d.stderr, d.message && d.message !== problem.detail ? d.message : ""]
      .filter((x) => typeof x === "string" && x.trim()).join("\n");
    let msg = problem.detail || problem.title;
    if (res.status === 401) msg += " — enter the daemon's token (top right)";
    if (res.status === 404 && msg.endsWith("endpoint not found")) msg += ` (${res.url.replace(location.origin, "")} is not served by this daemon)`;
    return new ApiError(res.status, msg, problem, extra);
  }
  const msg = `HTTP ${res.status} ${res.statusText}`.trim();
  return new ApiError(res.status, text && text.length < 300 ? `${msg}: ${text}` : msg, null, "");
}

function buildURL(path, query) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, String(v));
  }
  return url.pathname + url.search;
}

// listeners are told about every 401, so the token field can say so.
const unauthorizedListeners = new Set();
export function onUnauthorized(fn) { unauthorizedListeners.add(fn); }

// request sends one request and returns the Response when it is 2xx; it
// throws ApiError otherwise. Options: query, json (a value sent as JSON),
// body (sent as is), headers, signal.
export async function request(method, path, opts = {}) {
  const headers = { ...extraHeaders, ...(opts.headers || {}) };
  if (token) headers.Authorization = `Bearer ${token}`;
  let body = opts.body;
  if (opts.json !== undefined) {
    body = JSON.stringify(opts.json);
    headers["Content-Type"] = "application/json";
  }
  let res;
  try {
    res = await fetch(buildURL(path, opts.query), { method, headers, body, signal: opts.signal, cache: "no-store" });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, `cannot reach the daemon (${e.message})`);
  }
  if (!res.ok) {
    const err = await errorFrom(res);
    if (res.status === 401) unauthorizedListeners.forEach((fn) => fn(err));
    throw err;
  }
  return res;
}

export async function getJSON(path, query, opts = {}) {
  const res = await request("GET", path, { ...opts, query, headers: { Accept: "application/json", ...(opts.headers || {}) } });
  return res.json();
}

// sendJSON sends a JSON body and returns the parsed answer (null for 204).
export async function sendJSON(method, path, query, value) {
  const res = await request(method, path, { query, json: value, headers: { Accept: "application/json" } });
  if (res.status === 204) return null;
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}
