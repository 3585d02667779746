// Drives /acp/{agent} (ACP's standard "Streamable HTTP & WebSocket" transport)
// with the official @agentclientprotocol/sdk 2.4.0 client, as users do.
// Env: BASE_URL, TRANSPORT (http | ws), TOKEN (optional), AGENT (default mock).
// Exits non-zero on any mismatch.
import assert from "node:assert/strict";
import { client, methods } from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import { WebSocket } from "ws";

const baseUrl = process.env.BASE_URL;
const transport = process.env.TRANSPORT;
const agent = process.env.AGENT || "mock";
const headers = process.env.TOKEN ? { Authorization: `Bearer ${process.env.TOKEN}` } : {};
const url = `${baseUrl}/acp/${agent}`;

const updates = [];
let permissionAsked = 0;

// Timers are unref'd so a finished script exits at once.
const withTimeout = (p, ms, what) =>
  Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`timeout: ${what}`)), ms).unref())]);

const texts = (sessionId) => updates
  .filter((u) => u.sessionId === sessionId && u.update.sessionUpdate === "agent_message_chunk")
  .map((u) => u.update.content.text);

const listServers = async () => (await (await fetch(`${baseUrl}/v1/acp`, { headers })).json()).servers;
const before = new Set((await listServers()).map((s) => s.serverId));
let connectionId;

// A WebSocket connection exists from the upgrade, before initialize.
const stream = transport === "ws"
  ? createWebSocketStream(url.replace(/^http/, "ws"), { WebSocket, headers })
  : createHttpStream(url, { headers });

const app = client({ name: "sandbox-agent-go compat" })
  .onNotification(methods.client.session.update, ({ params }) => { updates.push(params); })
  .onRequest(methods.client.session.requestPermission, ({ params }) => {
    permissionAsked++;
    assert.equal(params.options[0].optionId, "allow");
    return { outcome: { outcome: "selected", optionId: "allow" } };
  });

await withTimeout(app.connectWith(stream, async (ctx) => {
  const init = await withTimeout(ctx.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} }), 10000, "initialize");
  assert.equal(init.protocolVersion, 1);

  // The connection is an instance of the agent, listed under /v1/acp.
  const added = (await listServers()).filter((s) => !before.has(s.serverId));
  assert.equal(added.length, 1, JSON.stringify(added));
  assert.equal(added[0].agent, agent);
  connectionId = added[0].serverId;

  const { sessionId } = await withTimeout(ctx.request(methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] }), 10000, "session/new");
  assert.match(sessionId, /^mock-/);
  const prompt = (text) => ctx.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });

  let res = await withTimeout(prompt("hello there"), 10000, "prompt");
  assert.equal(res.stopReason, "end_turn");
  assert.deepEqual(texts(sessionId), ["mock: hello there"]);

  // The agent asks for permission; the client's answer reaches it.
  res = await withTimeout(prompt("permission please"), 10000, "permission prompt");
  assert.equal(res.stopReason, "end_turn");
  assert.equal(permissionAsked, 1);
  assert.ok(texts(sessionId).includes("mock: permission selected allow"), JSON.stringify(texts(sessionId)));

  // Streamed updates, in order, none lost, none duplicated, all before the
  // turn's end.
  res = await withTimeout(prompt("stream 1000"), 30000, "stream prompt");
  assert.equal(res.stopReason, "end_turn");
  const chunks = texts(sessionId).filter((t) => t.startsWith("mock: chunk "));
  assert.equal(chunks.length, 1000);
  chunks.forEach((t, i) => assert.equal(t, `mock: chunk ${i + 1}`));

  // Cancel a slow turn.
  const slow = prompt("slow 30000");
  await new Promise((r) => setTimeout(r, 300));
  await ctx.notify(methods.agent.session.cancel, { sessionId });
  res = await withTimeout(slow, 10000, "cancelled prompt");
  assert.equal(res.stopReason, "cancelled");
}), 90000, "connectWith");

// connectWith closed the stream: the connection (the instance) is gone.
for (let i = 0; i < 50 && (await listServers()).some((s) => s.serverId === connectionId); i++) {
  await new Promise((r) => setTimeout(r, 100));
}
assert.ok(!(await listServers()).some((s) => s.serverId === connectionId), `connection ${connectionId} still listed after close`);
console.log(`acp-std ${transport} compat: ok`, { updates: updates.length, connectionId });
