// The official ACP TypeScript SDK (@agentclientprotocol/sdk, pinned in
// package.json) spawns `sandbox-agent acp ...` as its agent over stdio, as an
// editor would, and runs a session against the daemon's mock agent:
// initialize, session/new, a permission request answered, "stream 1000" in
// order before the result, a cancelled turn, then stdin closed.
// Env: BINARY, ENDPOINT. Exits non-zero on any mismatch.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const child = spawn(process.env.BINARY, ["acp", "--endpoint", process.env.ENDPOINT, "--agent", "mock"], {
  stdio: ["pipe", "pipe", "inherit"],
});
const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));

const withTimeout = (p, ms, what) =>
  Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`timeout: ${what}`)), ms).unref())]);

const chunks = [];
let permissionAsked = 0;

const app = acp.client({ name: "bridge-e2e" })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    permissionAsked++;
    return { outcome: { outcome: "selected", optionId: params.options[0].optionId } };
  })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    if (params.update.sessionUpdate === "agent_message_chunk") chunks.push(params.update.content.text);
  });

const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const take = () => chunks.splice(0, chunks.length);

await app.connectWith(stream, async (agent) => {
  const init = await withTimeout(agent.request(acp.methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} }), 20000, "initialize");
  assert.equal(init.protocolVersion, 1);

  const { sessionId } = await withTimeout(agent.request(acp.methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] }), 20000, "session/new");
  assert.match(sessionId, /^mock-/);
  const prompt = (text) => agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });

  let res = await withTimeout(prompt("permission"), 20000, "permission prompt");
  assert.equal(res.stopReason, "end_turn");
  assert.equal(permissionAsked, 1);
  assert.deepEqual(take(), ["mock: permission selected allow"]);

  res = await withTimeout(prompt("stream 1000"), 30000, "stream prompt");
  assert.equal(res.stopReason, "end_turn");
  const got = take();
  assert.equal(got.length, 1000, `chunks before the result: ${got.length}`);
  got.forEach((c, i) => assert.equal(c, `mock: chunk ${i + 1}`));

  const slow = prompt("slow 30000");
  let cancelled;
  slow.then((r) => { cancelled = r; }, () => {});
  // A cancel that races ahead of the prompt is repeated until the turn ends.
  for (let i = 0; i < 100 && cancelled === undefined; i++) {
    await agent.notify(acp.methods.agent.session.cancel, { sessionId });
    await new Promise((r) => setTimeout(r, 100));
  }
  res = await withTimeout(slow, 10000, "cancelled prompt");
  assert.equal(res.stopReason, "cancelled");
});

// Closing stdin ends the bridge cleanly: exit 0.
child.stdin.end();
const { code, signal } = await withTimeout(exited, 15000, "bridge exit");
assert.equal(signal, null);
assert.equal(code, 0);
console.log("ok: session through sandbox-agent acp with @agentclientprotocol/sdk");
