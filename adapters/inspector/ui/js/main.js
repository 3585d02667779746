// Entry point: the top bar (sections, token, daemon health) and the
// client-side routes /ui/sessions, /ui/agents, /ui/files, /ui/config,
// /ui/processes.

import { getJSON, getToken, initFromURL, onUnauthorized, setToken } from "./api.js";
import { replace } from "./dom.js";
import * as agents from "./agents.js";
import * as sessions from "./sessions.js";
import * as files from "./files.js";
import * as config from "./config.js";
import * as processes from "./processes.js";

const views = { sessions, agents, files, config, processes };
const mounted = new Set();
let current = null;

function route() {
  const name = location.pathname.replace(/^\/ui\/?/, "").split("/")[0] || "sessions";
  // Own keys only: /ui/constructor or /ui/__proto__ must not name a view.
  show(Object.hasOwn(views, name) ? name : "sessions");
}

function show(name) {
  for (const a of document.querySelectorAll(".tabs a")) {
    a.classList.toggle("active", a.dataset.view === name);
    if (a.dataset.view === name) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  for (const v of Object.keys(views)) document.getElementById(`view-${v}`).hidden = v !== name;
  const root = document.getElementById(`view-${name}`);
  if (!mounted.has(name)) {
    mounted.add(name);
    views[name].mount(root);
  } else {
    views[name].shown?.();
  }
  current = name;
  document.title = `${name[0].toUpperCase()}${name.slice(1)} · Sandbox Agent inspector`;
}

function banner(text, kind = "error") {
  const el = document.getElementById("banner");
  if (!text) { el.hidden = true; return; }
  el.className = `banner ${kind}`;
  replace(el, text);
  el.hidden = false;
}

async function checkHealth() {
  const el = document.getElementById("health");
  el.className = "health";
  el.textContent = "…";
  try {
    await getJSON("/v1/health");
    el.classList.add("ok");
    el.textContent = "connected";
    el.title = getToken() ? "daemon reachable, token accepted" : "daemon reachable";
    document.getElementById("token-input").classList.remove("attention");
    banner(null);
  } catch (e) {
    el.classList.add("bad");
    el.textContent = e.status === 401 ? "token needed" : "unreachable";
    el.title = e.message;
    banner(e.status === 401
      ? "This daemon requires a bearer token: enter the value of --token at the top right and press Apply."
      : `Cannot reach the daemon: ${e.message}`);
  }
}

function init() {
  initFromURL();
  const input = document.getElementById("token-input");
  input.value = getToken();
  document.getElementById("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    setToken(input.value);
    checkHealth();
    for (const v of Object.values(views)) v.tokenChanged?.();
  });
  onUnauthorized(() => {
    const el = document.getElementById("health");
    el.className = "health bad";
    el.textContent = "token needed";
    input.classList.add("attention");
    setTimeout(() => input.classList.remove("attention"), 1500);
  });
  document.querySelector(".tabs").addEventListener("click", (ev) => {
    const a = ev.target.closest("a[data-view]");
    if (!a || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.button !== 0) return;
    ev.preventDefault();
    if (a.dataset.view !== current) history.pushState(null, "", a.getAttribute("href"));
    show(a.dataset.view);
  });
  window.addEventListener("popstate", route);
  checkHealth();
  route();
}

init();
