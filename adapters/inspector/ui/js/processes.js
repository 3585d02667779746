// The Processes section: run a command and see its output
// (POST /v1/processes/run), start managed processes (POST /v1/processes),
// list them, follow a process's logs live (SSE), send input, stop, kill,
// delete, and a terminal over the WebSocket for tty processes. The
// terminal is a plain text view: keystrokes in, output shown as text with
// ANSI control sequences stripped (no terminal emulator).

import { getJSON, getToken, sendJSON } from "./api.js";
import { errorBox, h, replace, spinner, str } from "./dom.js";
import { Stream } from "./sse.js";

let root;
let listBody;
let detail;
let current = null; // {id, stream, socket}

export function mount(el) {
  root = el;
  const line = h("input#proc-command", { placeholder: "command line, e.g. ls -la", spellcheck: "false", size: 50 });
  const viaShell = h("input#proc-shell", { type: "checkbox", checked: true });
  const cwd = h("input#proc-cwd", { placeholder: "working directory (optional)", spellcheck: "false" });
  const timeout = h("input#proc-timeout", { type: "number", min: "0", placeholder: "timeout ms (run)" });
  const tty = h("input#proc-tty", { type: "checkbox" });
  const runOut = h("div.run-output#run-output");
  const spec = () => {
    const text = line.value.trim();
    if (!text) throw new Error("enter a command");
    const parts = viaShell.checked ? ["sh", "-c", text] : text.split(/\s+/);
    const req = { command: parts[0], args: parts.slice(1) };
    if (cwd.value.trim()) req.cwd = cwd.value.trim();
    return req;
  };
  const run = async () => {
    let req;
    try { req = spec(); } catch (e) { replace(runOut, errorBox(e)); return; }
    if (timeout.value) req.timeoutMs = Number(timeout.value);
    replace(runOut, spinner("running…"));
    try {
      const r = await sendJSON("POST", "/v1/processes/run", null, req);
      replace(runOut,
        h("div.row.small",
          h("span.exit", { "data-exit": r.exitCode ?? "" }, r.timedOut ? "timed out" : r.exitCode !== undefined && r.exitCode !== null ? `exit ${r.exitCode}` : `ended by ${r.signal || "a signal"}`),
          h("span.muted", `${r.durationMs} ms`),
          r.stdoutTruncated ? h("span.warn", "stdout truncated") : null,
          r.stderrTruncated ? h("span.warn", "stderr truncated") : null),
        h("h3", "stdout"), h("pre.output.stdout", str(r.stdout)),
        r.stderr ? [h("h3", "stderr"), h("pre.output.stderr", str(r.stderr))] : null);
    } catch (e) {
      replace(runOut, errorBox(e, "run failed"));
    }
  };
  const start = async () => {
    let req;
    try { req = spec(); } catch (e) { replace(runOut, errorBox(e)); return; }
    req.tty = tty.checked;
    req.interactive = true;
    try {
      const p = await sendJSON("POST", "/v1/processes", null, req);
      replace(runOut, h("span.muted", `started ${p.id} (pid ${p.pid})`));
      await refresh();
      select(p.id, p.tty);
    } catch (e) {
      replace(runOut, errorBox(e, "start failed"));
    }
  };
  line.addEventListener("keydown", (ev) => { if (ev.key === "Enter") { ev.preventDefault(); run(); } });
  listBody = h("tbody");
  detail = h("div.proc-detail#proc-detail");
  replace(root,
    h("div.toolbar", h("h2", "Processes"),
      h("span.muted", "Run commands in the sandbox, start long-lived processes, follow their output, open a terminal.")),
    h("div.proc-form",
      h("div.row", line, h("label.check", viaShell, " via sh -c"), cwd, timeout,
        h("button.primary#proc-run", { onclick: run }, "Run"),
        h("label.check", tty, " tty"),
        h("button#proc-start", { onclick: start }, "Start"),
        h("button", { onclick: () => refresh() }, "Refresh")),
      runOut),
    h("table.grid.procs", h("thead", h("tr", ["ID", "Command", "Status", "PID", "Exit", "Started", ""].map((t) => h("th", t)))), listBody),
    detail);
  refresh();
}

export function shown() { refresh(); }
export function tokenChanged() { if (root) refresh(); }

async function refresh() {
  let procs;
  try {
    procs = (await getJSON("/v1/processes")).processes || [];
  } catch (e) {
    replace(listBody, h("tr", h("td", { colspan: "7" }, errorBox(e, "cannot list processes"))));
    return;
  }
  replace(listBody, procs.length ? procs.map(row) : h("tr", h("td.muted", { colspan: "7" }, "No processes.")));
}

function row(p) {
  const act = (label, fn, cls) => h(`button.small${cls || ""}`, { onclick: fn, "data-action": label.toLowerCase() }, label);
  const signal = (kind) => async () => {
    try { await sendJSON("POST", `/v1/processes/${encodeURIComponent(p.id)}/${kind}`, { waitMs: 2000 }); } catch (e) { alert(e.message); }
    refresh();
  };
  const running = p.status === "running";
  return h("tr", { "data-id": p.id, "data-status": p.status },
    h("td", h("button.link", { onclick: () => select(p.id, p.tty) }, str(p.id))),
    h("td.code", [p.command, ...(p.args || [])].map(str).join(" "), p.tty ? h("span.badge", "tty") : null),
    h("td.status", str(p.status)),
    h("td", str(p.pid)),
    h("td", str(p.exitCode ?? p.signal)),
    h("td", new Date(p.createdAtMs).toLocaleTimeString()),
    h("td.row",
      act("Logs", () => select(p.id, p.tty)),
      running ? act("Stop", signal("stop")) : null,
      running ? act("Kill", signal("kill"), ".danger") : null,
      !running ? act("Delete", async () => {
        try { await sendJSON("DELETE", `/v1/processes/${encodeURIComponent(p.id)}`); } catch (e) { alert(e.message); }
        if (current?.id === p.id) closeDetail();
        refresh();
      }, ".danger") : null));
}

function closeDetail() {
  current?.stream?.stop();
  current?.socket?.close();
  current = null;
  replace(detail);
}

// select shows one process: its logs followed live, an input box, and for
// a tty process a terminal.
function select(id, tty) {
  closeDetail();
  const logView = h("pre.output.proc-logs#proc-logs");
  const state = h("span.muted.stream-state");
  const input = h("input#proc-input", { placeholder: "input (a newline is added)", spellcheck: "false", size: 40 });
  const send = async () => {
    try {
      await sendJSON("POST", `/v1/processes/${encodeURIComponent(id)}/input`, null, { data: input.value + "\n", encoding: "utf8" });
      input.value = "";
    } catch (e) { state.textContent = e.message; }
  };
  input.addEventListener("keydown", (ev) => { if (ev.key === "Enter") { ev.preventDefault(); send(); } });
  const decoder = new TextDecoder();
  const stream = new Stream(`/v1/processes/${encodeURIComponent(id)}/logs?follow=true`, {
    onEvent: (ev) => {
      if (ev.event === "log") {
        const e = JSON.parse(ev.data);
        const text = stripAnsi(decoder.decode(b64(e.data), { stream: true }));
        logView.append(e.stream === "stderr" ? h("span.stderr", text) : text);
        logView.scrollTop = logView.scrollHeight;
      } else if (ev.event === "gap") {
        logView.append(h("span.gap", "\n[older output was evicted from the log]\n"));
      } else if (ev.event === "exit") {
        const p = JSON.parse(ev.data);
        state.textContent = p.exitCode !== undefined && p.exitCode !== null ? `exited with ${p.exitCode}` : `ended by ${p.signal || "a signal"}`;
        stream.stop();
        refresh();
      }
    },
    onState: (s) => { if (s !== "stopped") state.textContent = s; },
  });
  current = { id, stream: stream.start() };
  replace(detail,
    h("div.toolbar", h("h3", `Process ${id}`), state, h("button.small", { onclick: closeDetail }, "Close")),
    tty ? terminal(id) : null,
    h("div.row", input, h("button#proc-send", { onclick: send }, "Send")),
    h("h3", "Logs"), logView);
}

// terminal opens the WebSocket of a tty process and renders its output as
// text; keys typed in the view are sent as input frames.
function terminal(id) {
  const view = h("pre.terminal#proc-terminal", { tabindex: "0", title: "click and type" });
  const status = h("span.muted.term-state", "connecting…");
  const cols = h("input", { type: "number", value: "80", min: "1", max: "500", size: 4 });
  const rows = h("input", { type: "number", value: "24", min: "1", max: "200", size: 4 });
  const url = new URL(`/v1/processes/${encodeURIComponent(id)}/terminal/ws`, location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  if (getToken()) url.searchParams.set("access_token", getToken());
  const ws = new WebSocket(url);
  ws.binaryType = "arraybuffer";
  current.socket = ws;
  const decoder = new TextDecoder();
  let text = "";
  const render = (chunk) => {
    for (const ch of stripAnsi(chunk)) {
      if (ch === "\r") continue;
      if (ch === "\b" || ch === "\x7f") { text = text.slice(0, -1); continue; }
      if (ch === "\x07") continue;
      text += ch;
    }
    if (text.length > 200_000) text = text.slice(-100_000);
    view.textContent = text;
    view.scrollTop = view.scrollHeight;
  };
  ws.addEventListener("open", () => { status.textContent = "connected"; });
  ws.addEventListener("message", (ev) => {
    if (typeof ev.data === "string") {
      const f = JSON.parse(ev.data);
      if (f.type === "ready") status.textContent = "ready";
      else if (f.type === "exit") status.textContent = `exited with ${f.exitCode ?? "a signal"}`;
      else if (f.type === "error") status.textContent = `error: ${f.message}`;
      return;
    }
    render(decoder.decode(new Uint8Array(ev.data), { stream: true }));
  });
  ws.addEventListener("close", () => { if (!/exited/.test(status.textContent)) status.textContent = "closed"; });
  const sendKeys = (data) => { if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "input", data })); };
  view.addEventListener("keydown", (ev) => {
    const keys = { Enter: "\r", Backspace: "\x7f", Tab: "\t", Escape: "\x1b", ArrowUp: "\x1b[A", ArrowDown: "\x1b[B", ArrowRight: "\x1b[C", ArrowLeft: "\x1b[D" };
    let data = keys[ev.key];
    if (!data && ev.ctrlKey && ev.key.length === 1 && /[a-z]/i.test(ev.key)) data = String.fromCharCode(ev.key.toUpperCase().charCodeAt(0) - 64);
    if (!data && !ev.ctrlKey && !ev.metaKey && ev.key.length === 1) data = ev.key;
    if (!data) return;
    ev.preventDefault();
    sendKeys(data);
  });
  view.addEventListener("paste", (ev) => { ev.preventDefault(); sendKeys(ev.clipboardData.getData("text")); });
  const resize = () => {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "resize", cols: Number(cols.value), rows: Number(rows.value) }));
  };
  return h("div.term-box",
    h("div.row", h("h3", "Terminal"), status, h("label.check", "cols ", cols), h("label.check", "rows ", rows), h("button.small", { onclick: resize }, "Resize")),
    view);
}

function b64(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

// stripAnsi removes escape sequences (CSI, OSC, charset and keypad modes).
export function stripAnsi(s) {
  // eslint-disable-next-line no-control-regex
  return s.replace(/\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78DEHMc]/g, "");
}
