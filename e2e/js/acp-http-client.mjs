// Drives the daemon with the official acp-http-client@0.4.2, as users do.
// Env: BASE_URL, TOKEN (optional). Exits non-zero on any mismatch.
import assert from "node:assert/strict";
import { AcpHttpClient } from "acp-http-client";

const baseUrl = process.env.BASE_URL;
const serverId = `compat-${process.pid}`;
const updates = [];
let permissionAsked = 0;

const client = new AcpHttpClient({
  baseUrl,
  token: process.env.TOKEN || undefined,
  transport: { path: `/v1/acp/${serverId}`, bootstrapQuery: { agent: "mock" } },
  client: {
    sessionUpdate: async (n) => { updates.push(n); },
    requestPermission: async (req) => {
      permissionAsked++;
      assert.equal(req.options[0].optionId, "allow");
      return { outcome: { outcome: "selected", optionId: "allow" } };
    },
  },
});

// Timers are unref'd so a finished script exits at once.
const withTimeout = (p, ms, what) =>
  Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`timeout: ${what}`)), ms).unref())]);

const texts = (sessionId) => updates
  .filter((u) => u.sessionId === sessionId && u.update.sessionUpdate === "agent_message_chunk")
  .map((u) => u.update.content.text);

const init = await withTimeout(client.initialize({ protocolVersion: 1, clientCapabilities: {} }), 10000, "initialize");
assert.equal(init.protocolVersion, 1);

const { sessionId } = await withTimeout(client.newSession({ cwd: process.cwd(), mcpServers: [] }), 10000, "session/new");
assert.match(sessionId, /^mock-/);

// A prompt: its updates arrive on the stream before the turn ends.
let res = await withTimeout(client.prompt({ sessionId, prompt: [{ type: "text", text: "hello there" }] }), 10000, "prompt");
assert.equal(res.stopReason, "end_turn");
assert.deepEqual(texts(sessionId), ["mock: hello there"]);

// Streamed updates, in order, none lost, none duplicated.
res = await withTimeout(client.prompt({ sessionId, prompt: [{ type: "text", text: "stream 200" }] }), 20000, "stream prompt");
assert.equal(res.stopReason, "end_turn");
const chunks = texts(sessionId).filter((t) => t.startsWith("mock: chunk "));
assert.equal(chunks.length, 200);
chunks.forEach((t, i) => assert.equal(t, `mock: chunk ${i + 1}`));

// The agent asks for permission; the client's answer reaches it.
res = await withTimeout(client.prompt({ sessionId, prompt: [{ type: "text", text: "permission please" }] }), 10000, "permission prompt");
assert.equal(res.stopReason, "end_turn");
assert.equal(permissionAsked, 1);
assert.ok(texts(sessionId).includes("mock: permission selected allow"), JSON.stringify(texts(sessionId)));

// Cancel a slow turn.
const slow = client.prompt({ sessionId, prompt: [{ type: "text", text: "slow 30000" }] });
await new Promise((r) => setTimeout(r, 300));
await client.cancel({ sessionId });
res = await withTimeout(slow, 10000, "cancelled prompt");
assert.equal(res.stopReason, "cancelled");

// Any other request is echoed by the mock.
const ext = await withTimeout(client.extMethod("_mock/echo", { x: 1 }), 10000, "ext method");
assert.equal(ext.echoedMethod, "_mock/echo");

await client.disconnect();

// After disconnect the instance is gone.
const list = await (await fetch(`${baseUrl}/v1/acp`, { headers: process.env.TOKEN ? { Authorization: `Bearer ${process.env.TOKEN}` } : {} })).json();
assert.ok(!list.servers.some((s) => s.serverId === serverId), JSON.stringify(list));
console.log("acp-http-client compat: ok", { updates: updates.length });
