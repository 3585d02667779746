// The official SDK starts the daemon itself, as most users run it:
// SandboxAgent.start({ sandbox: local({ binaryPath }) }) spawns
// `<binary> server --host 127.0.0.1 --port <free> --token <48 hex>`, waits
// for /v1/health, runs a session, and stops it with SIGTERM.
// Env: BINARY. Prints "agent pid N" and "daemon port N" for the Go side.
import assert from "node:assert/strict";
import { SandboxAgent } from "sandbox-agent";
import { local } from "sandbox-agent/local";

const withTimeout = (p, ms, what) =>
  Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`timeout: ${what}`)), ms).unref())]);

const sdk = await withTimeout(SandboxAgent.start({ sandbox: local({ binaryPath: process.env.BINARY, log: "silent" }) }), 20000, "start");

const session = await withTimeout(sdk.createSession({ agent: "mock" }), 20000, "createSession");
const texts = [];
session.onEvent((ev) => {
  const u = ev.payload?.params?.update;
  if (u?.sessionUpdate === "agent_message_chunk") texts.push(u.content.text);
});
const out = await withTimeout(session.prompt([{ type: "text", text: "stream 50" }]), 20000, "prompt");
assert.equal(out.stopReason, "end_turn");
for (let i = 0; i < 50 && texts.length < 50; i++) await new Promise((r) => setTimeout(r, 20));
assert.deepEqual(texts, Array.from({ length: 50 }, (_, i) => `mock: chunk ${i + 1}`));

const { servers } = await sdk.listAcpServers();
assert.equal(servers.length, 1);
assert.match(servers[0].serverId, /^sdk-mock-/);
console.log(`agent pid ${servers[0].pid}`);

await withTimeout(sdk.destroySandbox(), 15000, "destroySandbox");
console.log("sdk local launcher compat: ok");
