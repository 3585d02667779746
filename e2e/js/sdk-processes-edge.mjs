// Processes through the official TypeScript SDK, sandbox-agent@0.4.2, at
// their edges, where this daemon once answered otherwise than the
// reference: a run ended by a signal (exitCode null), logs with tail=0,
// a terminal sized 0×0 (REST and WebSocket), a process killed while its
// log is followed and while a terminal is attached, a terminal opened on
// a process that has exited.
//
// Env: BASE_URL, TARGET (ours|reference). Needs a global WebSocket (Node
// 22, or Node 20 with --experimental-websocket). Exits non-zero on any
// mismatch.
import assert from "node:assert/strict";
import { SandboxAgent, SandboxAgentError } from "sandbox-agent";

const ours = process.env.TARGET !== "reference";
assert.equal(typeof WebSocket, "function", "no global WebSocket: run with --experimental-websocket on Node 20");
const withTimeout = (p, ms, what) =>
  Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`timeout: ${what}`)), ms))]);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const sdk = await withTimeout(SandboxAgent.connect({ baseUrl: process.env.BASE_URL }), 10000, "connect");
const text = (entries) => entries.map((e) => Buffer.from(e.data, "base64").toString("utf8")).join("");

async function waitFor(fn, what, ms = 10000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timeout: ${what}`);
    await sleep(25);
  }
}

// A run a signal ended, or that timed out, says exitCode null (present).
let r = await sdk.runProcess({ command: "sh", args: ["-c", "printf 'a\\0b'; kill -9 $$"] });
assert.ok("exitCode" in r && r.exitCode === null, JSON.stringify(r));
assert.equal(r.stdout, "a\0b");
assert.equal(r.timedOut, false);
r = await sdk.runProcess({ command: "sleep", args: ["30"], timeoutMs: 100 });
assert.ok("exitCode" in r && r.exitCode === null && r.timedOut === true, JSON.stringify(r));
r = await sdk.runProcess({ command: "sh", args: ["-c", "exit 7"] });
assert.equal(r.exitCode, 7);

// tail=0 is no entries; tail=1 the last one.
const two = await sdk.createProcess({ command: "sh", args: ["-c", "echo one; sleep 0.2; echo two"] });
await waitFor(async () => (await sdk.getProcess(two.id)).status === "exited", "the process exits");
assert.deepEqual((await sdk.getProcessLogs(two.id, { tail: 0 })).entries, []);
assert.equal(text((await sdk.getProcessLogs(two.id, { tail: 1 })).entries), "two\n");
assert.equal(text((await sdk.getProcessLogs(two.id)).entries), "one\ntwo\n");
await sdk.deleteProcess(two.id);

// Unknown processes: 404 naming the process in details, as the reference.
for (const call of [() => sdk.getProcess("proc_999999"), () => sdk.getProcessLogs("proc_999999"), () => sdk.killProcess("proc_999999")]) {
  await assert.rejects(call(), (err) => {
    assert.ok(err instanceof SandboxAgentError);
    assert.equal(err.status, 404);
    assert.equal(err.problem.type, "urn:sandbox-agent:error:not_found");
    assert.equal(err.problem.detail, "not found: process proc_999999");
    assert.deepEqual(err.problem.details, { id: "proc_999999", resource: "process" });
    return true;
  });
}

// A terminal sized 0×0 (a hidden xterm) is taken, over REST and over the
// socket; past 65535 REST answers 422 and the socket an error frame.
const sh = await sdk.createProcess({ command: "sh", tty: true, interactive: true, env: { PS1: "$ " } });
assert.deepEqual(await sdk.resizeProcessTerminal(sh.id, { cols: 0, rows: 0 }), { cols: 0, rows: 0 });
await assert.rejects(sdk.resizeProcessTerminal(sh.id, { cols: 65536, rows: 1 }), (err) => err.status === 422);
const term = sdk.connectProcessTerminal(sh.id);
let output = "";
const errors = [];
term.onData((b) => { output += new TextDecoder().decode(b); });
term.onError((e) => errors.push(e.message ?? JSON.stringify(e)));
const exited = new Promise((resolve) => term.onExit(resolve));
await withTimeout(new Promise((resolve) => term.onReady(resolve)), 10000, "terminal ready");
term.sendInput("stty size\n");
await waitFor(() => /\r?\n0 0\r?\n/.test(output), "stty shows 0 0");
term.resize({ cols: 0, rows: 0 });
term.resize({ cols: 100, rows: 30 });
let from = output.length;
term.sendInput("stty size\n");
await waitFor(() => /\r?\n30 100\r?\n/.test(output.slice(from)), "stty shows 30 100");
term.resize({ cols: 70000, rows: 5 });
await waitFor(() => errors.length === 1, "an error frame for 70000 columns");
assert.deepEqual(errors.length, 1, JSON.stringify(errors));
from = output.length;
term.sendInput("stty size\n");
await waitFor(() => /\r?\n30 100\r?\n/.test(output.slice(from)), "the size kept");

// Killed while attached: the socket gets the exit frame and closes.
await sdk.killProcess(sh.id, { waitMs: 5000 });
const exitFrame = await withTimeout(exited, 10000, "exit frame after kill");
assert.equal(exitFrame.exitCode ?? null, null);
await withTimeout(term.closed, 10000, "socket closed after kill");
await sdk.deleteProcess(sh.id);

// A terminal opened on a process that has exited: ready, its exit, closed.
const gone = await sdk.createProcess({ command: "sh", args: ["-c", "echo bye; exit 3"], tty: true });
await waitFor(async () => (await sdk.getProcess(gone.id)).status === "exited", "the tty process exits");
const late = sdk.connectProcessTerminal(gone.id);
const seen = [];
let lateOut = "";
late.onReady(() => seen.push("ready"));
late.onData((b) => { lateOut += new TextDecoder().decode(b); });
late.onExit((f) => seen.push(`exit ${f.exitCode}`));
await withTimeout(late.closed, 10000, "socket of an exited process closes");
assert.deepEqual(seen, ["ready", "exit 3"]);
// This daemon sends the output the process wrote before the socket
// opened (the reference sends only what comes after).
if (ours) assert.match(lateOut, /bye/);
await sdk.deleteProcess(gone.id);

if (ours) {
  // Killed while its log is followed: the stream ends (the reference's
  // never does, the SDK's `closed` never settles).
  const sleeper = await sdk.createProcess({ command: "sh", args: ["-c", "echo start; exec sleep 60"] });
  const got = [];
  const follow = await sdk.followProcessLogs(sleeper.id, (e) => got.push(e));
  await waitFor(() => got.length > 0, "the first entry");
  await sdk.killProcess(sleeper.id, { waitMs: 5000 });
  await withTimeout(follow.closed, 10000, "follow ends when the process is killed");
  assert.equal(text(got), "start\n");
  // Followed with tail=0: live output only.
  const ticker = await sdk.createProcess({ command: "sh", args: ["-c", "echo old; read x; echo new"], interactive: true });
  await waitFor(async () => text((await sdk.getProcessLogs(ticker.id)).entries) === "old\n", "the old line");
  const live = [];
  const follow2 = await sdk.followProcessLogs(ticker.id, (e) => live.push(e), { tail: 0 });
  await sdk.sendProcessInput(ticker.id, { data: "go\n", encoding: "utf8" });
  await withTimeout(follow2.closed, 10000, "follow ends at exit");
  assert.equal(text(live), "new\n");
  await sdk.deleteProcess(sleeper.id);
  await sdk.deleteProcess(ticker.id);
}

await sdk.dispose();
console.log("sdk process edges: ok");
process.exit(0);
