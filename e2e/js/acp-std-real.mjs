// Drives a real ACP agent (gemini-cli on a fake model, see
// acpstd_real_test.go) through /acp/gemini-fake with the official
// @agentclientprotocol/sdk 2.4.0 client.
// Env: BASE_URL, TRANSPORT (http | ws), WORK_DIR. Exits non-zero on any mismatch.
import assert from "node:assert/strict";
import { client, methods } from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import { WebSocket } from "ws";

const url = `${process.env.BASE_URL}/acp/gemini-fake`;
const stream = process.env.TRANSPORT === "ws"
  ? createWebSocketStream(url.replace(/^http/, "ws"), { WebSocket })
  : createHttpStream(url);

const updates = [];
const permissions = [];
const withTimeout = (p, ms, what) =>
  Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`timeout: ${what}`)), ms).unref())]);

const app = client({ name: "sandbox-agent-go compat" })
  .onNotification(methods.client.session.update, ({ params }) => { updates.push(params); })
  .onRequest(methods.client.session.requestPermission, ({ params }) => {
    permissions.push(params);
    const once = params.options.find((o) => o.kind === "allow_once");
    assert.ok(once, JSON.stringify(params.options));
    return { outcome: { outcome: "selected", optionId: once.optionId } };
  });

await withTimeout(app.connectWith(stream, async (ctx) => {
  const init = await withTimeout(ctx.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: { fs: { readTextFile: false, writeTextFile: false } } }), 60000, "initialize");
  assert.equal(init.protocolVersion, 1);
  const { sessionId } = await withTimeout(ctx.request(methods.agent.session.new, { cwd: process.env.WORK_DIR, mcpServers: [] }), 60000, "session/new");
  const text = () => updates
    .filter((u) => u.sessionId === sessionId && u.update.sessionUpdate === "agent_message_chunk")
    .map((u) => u.update.content.text).join("");
  const prompt = (t) => ctx.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: t }] });
  let mark = 0;
  const since = () => { const s = text().slice(mark); mark = text().length; return s; };

  let res = await withTimeout(prompt("say hi"), 60000, "prompt");
  assert.equal(res.stopReason, "end_turn");
  assert.equal(since(), "hello from fake model");

  res = await withTimeout(prompt("write it"), 60000, "permission prompt");
  assert.equal(res.stopReason, "end_turn");
  assert.equal(permissions.length, 1);
  assert.equal(since(), "written");

  res = await withTimeout(prompt("stream 1000"), 60000, "stream prompt");
  assert.equal(res.stopReason, "end_turn");
  assert.equal(since(), Array.from({ length: 1000 }, (_, i) => `c${i + 1};`).join(""));

  const slow = prompt("slow");
  await new Promise((r) => setTimeout(r, 1000));
  await ctx.notify(methods.agent.session.cancel, { sessionId });
  res = await withTimeout(slow, 30000, "cancelled prompt");
  assert.equal(res.stopReason, "cancelled");
}), 170000, "connectWith");
console.log(`acp-std real agent ${process.env.TRANSPORT}: ok`, { updates: updates.length, permissions: permissions.length });
