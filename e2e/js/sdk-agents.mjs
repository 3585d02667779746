// Drives /v1/agents and a mock session with the official TypeScript SDK
// sandbox-agent@0.4.2. Env: BASE_URL, INSTALL_AGENT (an agent the test's
// local ACP registry lists), TOKEN (optional). Exits non-zero on mismatch.
import assert from "node:assert/strict";
import { SandboxAgent } from "sandbox-agent";

const baseUrl = process.env.BASE_URL;
const installAgent = process.env.INSTALL_AGENT;

// Timers are unref'd so a finished script exits at once.
const withTimeout = (p, ms, what) =>
  Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`timeout: ${what}`)), ms).unref())]);

const sdk = await withTimeout(SandboxAgent.connect({ baseUrl, token: process.env.TOKEN || undefined }), 10000, "connect");

// The listing: known agents first, in the reference's order.
const listed = await withTimeout(sdk.listAgents(), 10000, "listAgents");
assert.deepEqual(listed.agents.slice(0, 7).map((a) => a.id), ["claude", "codex", "opencode", "amp", "pi", "cursor", "mock"]);
for (const a of listed.agents) {
  assert.equal(typeof a.installed, "boolean");
  assert.equal(typeof a.credentialsAvailable, "boolean");
  assert.equal(Object.keys(a.capabilities).length, 18, a.id);
  assert.equal(a.configOptions, undefined);
}

const withConfig = await withTimeout(sdk.listAgents({ config: true, noCache: true }), 20000, "listAgents config");
const mock = withConfig.agents.find((a) => a.id === "mock");
assert.equal(mock.version, "builtin");
assert.ok(Array.isArray(mock.configOptions) && mock.configOptions.length === 3, JSON.stringify(mock));

const claude = await withTimeout(sdk.getAgent("claude", { config: true }), 10000, "getAgent");
assert.equal(claude.id, "claude");
assert.equal(claude.capabilities.permissions, true);
assert.ok(claude.configOptions.some((o) => o.id === "model"));

// Unknown agents are a 400 problem.
await assert.rejects(sdk.getAgent("no-such-agent"), (err) => err.status === 400);

// Install from the (local) ACP registry, then again: idempotent.
let res = await withTimeout(sdk.installAgent(installAgent), 120000, "installAgent");
assert.equal(res.already_installed, false);
assert.equal(res.artifacts.length, 1);
assert.equal(res.artifacts[0].kind, "agent_process");
assert.equal(res.artifacts[0].source, "registry");
assert.match(res.artifacts[0].path, new RegExp(`/agent_processes/${installAgent}-acp$`));
res = await withTimeout(sdk.installAgent(installAgent, {}), 30000, "installAgent again");
assert.deepEqual(res, { already_installed: true, artifacts: [] });
const installed = await sdk.getAgent(installAgent);
assert.equal(installed.installed, true);

// A session with the mock: the prompt's updates arrive, the turn ends.
const session = await withTimeout(sdk.createSession({ agent: "mock" }), 20000, "createSession");
const texts = [];
session.onEvent((ev) => {
  const u = ev.payload?.params?.update;
  if (u?.sessionUpdate === "agent_message_chunk") texts.push(u.content.text);
});
const out = await withTimeout(session.prompt([{ type: "text", text: "hello sdk" }]), 20000, "prompt");
assert.equal(out.stopReason, "end_turn");
for (let i = 0; i < 50 && !texts.includes("mock: hello sdk"); i++) await new Promise((r) => setTimeout(r, 20));
assert.ok(texts.includes("mock: hello sdk"), JSON.stringify(texts));

// While the session lives, the mock reports a running server.
const running = await sdk.getAgent("mock");
assert.equal(running.serverStatus?.status, "running");
assert.equal(typeof running.serverStatus.uptimeMs, "number");

await sdk.dispose();
console.log("sdk agents compat: ok", { agents: listed.agents.length });
