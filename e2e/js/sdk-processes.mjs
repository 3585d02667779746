// Drives every process method of the official TypeScript SDK,
// sandbox-agent@0.4.2, against the daemon, as users do.
// Env: BASE_URL, TOKEN (optional). Needs a global WebSocket (Node 22, or
// Node 20 with --experimental-websocket). Exits non-zero on any mismatch.
import assert from "node:assert/strict";
import { SandboxAgent, SandboxAgentError } from "sandbox-agent";

assert.equal(typeof WebSocket, "function", "no global WebSocket: run with --experimental-websocket on Node 20");

// Timers are unref'd so a finished script exits at once.
const withTimeout = (p, ms, what) =>
  Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`timeout: ${what}`)), ms).unref())]);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const sdk = await withTimeout(
  SandboxAgent.connect({ baseUrl: process.env.BASE_URL, token: process.env.TOKEN || undefined }),
  10000, "connect");

async function expectError(fn, status, detailPart) {
  try {
    await fn();
  } catch (err) {
    assert.ok(err instanceof SandboxAgentError, `not a SandboxAgentError: ${err}`);
    assert.equal(err.status, status, JSON.stringify(err.problem));
    assert.equal(err.problem.status, status);
    if (detailPart) assert.ok(err.problem.detail.includes(detailPart), err.problem.detail);
    return err;
  }
  assert.fail(`expected a ${status} error`);
}

const decode = (entries) => entries.map((e) => {
  assert.equal(e.encoding, "base64");
  return Buffer.from(e.data, "base64").toString("utf8");
}).join("");

// waitFor polls until fn returns a truthy value.
async function waitFor(fn, what, ms = 10000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timeout: ${what}`);
    await sleep(25);
  }
}

// --- config -----------------------------------------------------------
const cfg = await sdk.getProcessConfig();
assert.deepEqual(Object.keys(cfg).sort(), ["defaultRunTimeoutMs", "maxConcurrentProcesses", "maxInputBytesPerRequest",
  "maxLogBytesPerProcess", "maxOutputBytes", "maxRunTimeoutMs"]);
assert.equal(cfg.maxConcurrentProcesses, 64);
const set = await sdk.setProcessConfig({ ...cfg, defaultRunTimeoutMs: 999999, maxRunTimeoutMs: 60000 });
assert.equal(set.defaultRunTimeoutMs, 60000, "default timeout is lowered to the maximum");
assert.deepEqual(await sdk.getProcessConfig(), set);
await expectError(() => sdk.setProcessConfig({ ...cfg, maxConcurrentProcesses: 0 }), 400);
await sdk.setProcessConfig(cfg);

// --- run ----------------------------------------------------------------
let r = await sdk.runProcess({ command: "sh", args: ["-c", "echo out; echo err >&2; exit 3"] });
assert.equal(r.exitCode, 3);
assert.equal(r.stdout, "out\n");
assert.equal(r.stderr, "err\n");
assert.equal(r.timedOut, false);
assert.equal(r.stdoutTruncated, false);
assert.equal(typeof r.durationMs, "number");
r = await sdk.runProcess({ command: "sh", args: ["-c", "head -c 5000 /dev/zero | tr '\\0' x"], maxOutputBytes: 100 });
assert.equal(r.stdout, "x".repeat(100));
assert.equal(r.stdoutTruncated, true);
assert.equal(r.exitCode, 0);
r = await sdk.runProcess({ command: "sleep", args: ["30"], timeoutMs: 200 });
assert.equal(r.timedOut, true);
assert.equal(r.exitCode ?? null, null);
r = await sdk.runProcess({ command: "pwd", cwd: "/tmp" });
assert.equal(r.stdout, "/tmp\n");
r = await sdk.runProcess({ command: "sh", args: ["-c", "echo $FOO"], env: { FOO: "bar" } });
assert.equal(r.stdout, "bar\n");
await expectError(() => sdk.runProcess({ command: "definitely-not-a-command-xyz" }), 400, "command not found");

// --- managed process on pipes --------------------------------------------
const cat = await sdk.createProcess({ command: "cat", interactive: true });
assert.match(cat.id, /^proc_\d+$/);
assert.equal(cat.status, "running");
assert.equal(cat.tty, false);
assert.equal(cat.interactive, true);
assert.equal(cat.owner, "user");
assert.equal(typeof cat.pid, "number");
assert.deepEqual(cat.args, []);
assert.deepEqual(await sdk.getProcess(cat.id), cat);
assert.ok((await sdk.listProcesses()).processes.some((p) => p.id === cat.id));
assert.ok((await sdk.listProcesses({ owner: "user" })).processes.some((p) => p.id === cat.id));
assert.equal((await sdk.listProcesses({ owner: "system" })).processes.length, 0);

assert.deepEqual(await sdk.sendProcessInput(cat.id, { data: Buffer.from("one\n").toString("base64"), encoding: "base64" }), { bytesWritten: 4 });
// cat echoes each input in its own log entry only if it read the first one
// before the second arrived.
await waitFor(async () => decode((await sdk.getProcessLogs(cat.id)).entries) === "one\n", "cat echoes its first input");
assert.deepEqual(await sdk.sendProcessInput(cat.id, { data: "two\n", encoding: "utf8" }), { bytesWritten: 4 });
await waitFor(async () => decode((await sdk.getProcessLogs(cat.id)).entries) === "one\ntwo\n", "cat echoes its input");
const logs = await sdk.getProcessLogs(cat.id, { stream: "stdout" });
assert.equal(logs.processId, cat.id);
assert.equal(logs.stream, "stdout");
assert.ok(logs.entries.every((e) => e.stream === "stdout" && typeof e.timestampMs === "number" && typeof e.sequence === "number"));
assert.equal((await sdk.getProcessLogs(cat.id, { stream: "stderr" })).entries.length, 0);
const tail = await sdk.getProcessLogs(cat.id, { tail: 1 });
assert.equal(tail.entries.length, 1);
assert.equal(decode(tail.entries), "two\n");
const since = await sdk.getProcessLogs(cat.id, { since: logs.entries[0].sequence });
assert.equal(decode(since.entries), "two\n");
await expectError(() => sdk.sendProcessInput(cat.id, { data: "x".repeat(cfg.maxInputBytesPerRequest + 1), encoding: "utf8" }), 413);
await expectError(() => sdk.deleteProcess(cat.id), 409, "still running");
await expectError(() => sdk.resizeProcessTerminal(cat.id, { cols: 80, rows: 24 }), 409);

const stopped = await sdk.stopProcess(cat.id, { waitMs: 5000 });
assert.equal(stopped.status, "exited");
assert.equal(typeof stopped.exitedAtMs, "number");
await expectError(() => sdk.sendProcessInput(cat.id, { data: "late", encoding: "utf8" }), 409);
await sdk.deleteProcess(cat.id);
await expectError(() => sdk.getProcess(cat.id), 404);
await expectError(() => sdk.getProcessLogs(cat.id), 404);
await expectError(() => sdk.deleteProcess(cat.id), 404);

// kill: a process ignoring SIGTERM, with a child, dies as a group.
const stubborn = await sdk.createProcess({ command: "sh", args: ["-c", "trap '' TERM; sleep 300 & echo ready; wait"] });
await waitFor(async () => decode((await sdk.getProcessLogs(stubborn.id)).entries).includes("ready"), "trap installed");
let info = await sdk.stopProcess(stubborn.id, { waitMs: 200 });
assert.equal(info.status, "running", "SIGTERM is ignored");
info = await sdk.killProcess(stubborn.id, { waitMs: 5000 });
assert.equal(info.status, "exited");
assert.equal(info.exitCode ?? null, null);
await sdk.deleteProcess(stubborn.id);

// --- followProcessLogs, resumed after a reconnect -----------------------
const ticker = await sdk.createProcess({ command: "sh", args: ["-c", "for i in 1 2 3 4 5 6 7 8; do echo line$i; sleep 0.1; done"] });
const seen = [];
let sub = await sdk.followProcessLogs(ticker.id, (e) => seen.push(e));
await withTimeout(waitFor(() => seen.length >= 3, "first entries"), 10000, "follow");
sub.close();
await sub.closed;
const lastSeq = seen[seen.length - 1].sequence;
sub = await sdk.followProcessLogs(ticker.id, (e) => seen.push(e), { since: lastSeq });
// The stream ends by itself once the process has exited and all was sent.
await withTimeout(sub.closed, 15000, "follow ends at exit");
const seqs = seen.map((e) => e.sequence);
assert.deepEqual(seqs, [...new Set(seqs)].sort((a, b) => a - b), "no duplicate, in order");
assert.equal(decode(seen), [1, 2, 3, 4, 5, 6, 7, 8].map((i) => `line${i}\n`).join(""));
info = await sdk.getProcess(ticker.id);
assert.equal(info.status, "exited");
assert.equal(info.exitCode, 0);
await sdk.deleteProcess(ticker.id);

// --- terminal over WebSocket ---------------------------------------------
const sh = await sdk.createProcess({ command: "sh", tty: true, interactive: true, env: { PS1: "$ " } });
assert.equal(sh.tty, true);
assert.equal((await sdk.getProcessLogs(sh.id)).stream, "pty");
const term = sdk.connectProcessTerminal(sh.id);
let output = "";
const ready = new Promise((resolve) => term.onReady(resolve));
const exited = new Promise((resolve) => term.onExit(resolve));
const errors = [];
term.onError((e) => errors.push(e));
term.onData((bytes) => { output += new TextDecoder().decode(bytes); });
const readyFrame = await withTimeout(ready, 10000, "terminal ready");
assert.equal(readyFrame.processId, sh.id);
// On a timeout, say what the terminal showed and what the daemon logged.
const expectOutput = async (re, what, from = 0) => {
  try {
    await withTimeout(waitFor(() => re.test(output.slice(from)), what), 10000, what);
  } catch (err) {
    const logged = decode((await sdk.getProcessLogs(sh.id)).entries);
    throw new Error(`${err.message}\nterminal output: ${JSON.stringify(output)}\nprocess log: ${JSON.stringify(logged)}`);
  }
};
// command types a line once the shell shows its prompt, as a person does,
// and waits for re in what follows. Typed sooner, the line is echoed by
// the terminal at once, before the shell prints the prompt it was about to
// print ("echo hi\r\n$ hi\r\n"), and output no longer starts a line.
const command = async (send, line, re, what) => {
  await expectOutput(/\$ $/, `prompt before ${what}`);
  const from = output.length;
  await send(line);
  await expectOutput(re, what, from);
};
const typed = (line) => term.sendInput(line);

await command(typed, "echo hi\n", /\r?\nhi\r?\n/, "echo hi read back");
term.resize({ cols: 100, rows: 40 });
await command(typed, "stty size\n", /40 100/, "resize over the socket");
assert.deepEqual(await sdk.resizeProcessTerminal(sh.id, { cols: 120, rows: 50 }), { cols: 120, rows: 50 });
// binary input goes as base64
await command((line) => term.sendInput(new TextEncoder().encode(line)), "stty size\n", /50 120/, "resize over REST");
await command((line) => sdk.sendProcessInput(sh.id, { data: line, encoding: "utf8" }), "echo via-rest\n",
  /\r?\nvia-rest\r?\n/, "REST input reaches the terminal");
term.sendInput("exit 7\n");
const exitFrame = await withTimeout(exited, 10000, "terminal exit");
assert.equal(exitFrame.exitCode, 7);
await withTimeout(term.closed, 10000, "terminal closed");
assert.deepEqual(errors, []);
assert.equal((await sdk.getProcess(sh.id)).exitCode, 7);
await sdk.deleteProcess(sh.id);

// A process without a terminal refuses the socket.
const plain = await sdk.createProcess({ command: "sleep", args: ["30"] });
const refused = sdk.connectProcessTerminal(plain.id);
await withTimeout(new Promise((resolve) => { refused.onError(resolve); refused.onClose(resolve); }), 10000, "refused socket fails");
const wsURL = new URL(sdk.buildProcessTerminalWebSocketUrl(plain.id));
wsURL.protocol = "http:";
const plainGet = await fetch(wsURL);
assert.equal(plainGet.status, 409);
assert.equal((await plainGet.json()).detail, "conflict: process is not running in tty mode");
await sdk.killProcess(plain.id, { waitMs: 5000 });
await sdk.deleteProcess(plain.id);

assert.equal((await sdk.listProcesses()).processes.length, 0);
await sdk.dispose();
console.log("ok");
