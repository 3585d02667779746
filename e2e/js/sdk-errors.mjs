// What the official TypeScript SDK, sandbox-agent@0.4.2, surfaces for a
// server's errors: a SandboxAgentError whose status, problem and message
// (the problem's title) must be the reference's wherever the reference
// answers a problem; where it answers text/plain (err.problem undefined),
// the status must still match and this daemon adds a problem.
//
// Env: BASE_URL, HOME_DIR, TARGET (ours|reference). Exits non-zero on any
// mismatch.
import assert from "node:assert/strict";
import { SandboxAgent, SandboxAgentError } from "sandbox-agent";

const home = process.env.HOME_DIR;
const ours = process.env.TARGET !== "reference";
const withTimeout = (p, ms, what) =>
  Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`timeout: ${what}`)), ms))]);
const sdk = await withTimeout(SandboxAgent.connect({ baseUrl: process.env.BASE_URL }), 10000, "connect");

// fails runs fn and returns its SandboxAgentError, checking the status, and
// the problem: exactly `problem` when given (on both servers), else (on
// this daemon, where the reference answers no problem) an invalid_request
// problem of that status.
async function fails(what, fn, status, problem) {
  let err;
  try {
    await withTimeout(fn(), 10000, what);
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof SandboxAgentError, `${what}: not a SandboxAgentError: ${err}`);
  assert.equal(err.status, status, `${what}: ${JSON.stringify(err.problem)}`);
  if (problem) {
    assert.deepEqual(err.problem, problem, what);
    assert.equal(err.message, problem.title, `${what}: the SDK's message is the title`);
  } else if (ours) {
    assert.equal(err.problem?.type, "urn:sandbox-agent:error:invalid_request", `${what}: ${JSON.stringify(err.problem)}`);
    assert.equal(err.problem.status, status);
  }
  return err;
}

// An unknown route (getAgent("") asks for /v1/agents/): the reference's
// 404, title "Not Found" (getAgent then looks the id up in the listing,
// finds nothing, and throws the 404).
await fails("unknown route", () => sdk.getAgent(""), 404,
  { type: "urn:sandbox-agent:error:invalid_request", title: "Not Found", status: 404, detail: "endpoint not found" });
await fails("unknown agent", () => sdk.getAgent("no-such-agent"), 400,
  { type: "urn:sandbox-agent:error:unsupported_agent", title: "Unsupported Agent", status: 400, detail: "unsupported agent: no-such-agent", agent: "no-such-agent" });

// A query parameter that does not parse: 400.
await fails("config=maybe", () => sdk.listAgents({ config: "maybe" }), 400);
await fails("owner=bogus", () => sdk.listProcesses({ owner: "bogus" }), 400);
await fails("recursive=maybe", () => sdk.deleteFsEntry({ path: "nope", recursive: "maybe" }), 400);
await fails("waitMs=soon", () => sdk.stopProcess("proc_1", { waitMs: "soon" }), 400);

// A JSON body of the wrong shape: 422.
await fails("reinstall as a string", () => sdk.installAgent("mock", { reinstall: "yes" }), 422);
await fails("a move without to", () => sdk.moveFs({ from: "x" }), 422);
const limits = { maxConcurrentProcesses: 64, defaultRunTimeoutMs: 30000, maxRunTimeoutMs: 300000, maxOutputBytes: 1 << 20, maxLogBytesPerProcess: 10 << 20, maxInputBytesPerRequest: 64 << 10 };
await fails("a negative limit", () => sdk.setProcessConfig({ ...limits, defaultRunTimeoutMs: -1 }), 422);
await fails("a partial config", () => sdk.setProcessConfig({ maxConcurrentProcesses: 5 }), 422);
await fails("a local MCP server without command", () => sdk.setMcpConfig({ directory: `${home}/errs`, mcpName: "x" }, { type: "local" }), 422);
// Values the schema allows and the service refuses: 400 problems.
await fails("zero processes", () => sdk.setProcessConfig({ ...limits, maxConcurrentProcesses: 0 }), 400,
  { type: "urn:sandbox-agent:error:invalid_request", title: "Invalid Request", status: 400, detail: "invalid request: maxConcurrentProcesses must be greater than 0" });
await fails("an empty command", () => sdk.createProcess({ command: "" }), 400,
  { type: "urn:sandbox-agent:error:invalid_request", title: "Invalid Request", status: 400, detail: "invalid request: command must not be empty" });
await fails("input encoding", async () => {
  const p = await sdk.createProcess({ command: "cat", interactive: true });
  try {
    await sdk.sendProcessInput(p.id, { data: "x", encoding: "latin1" });
  } finally {
    await sdk.killProcess(p.id, { waitMs: 5000 });
    await sdk.deleteProcess(p.id);
  }
}, 400, { type: "urn:sandbox-agent:error:invalid_request", title: "Invalid Request", status: 400, detail: "invalid request: encoding must be one of: base64, utf8, text" });

// Missing config entries: session_not_found, as the reference names them.
await fails("no MCP entry", () => sdk.getMcpConfig({ directory: `${home}/errs`, mcpName: "gh" }), 404,
  { type: "urn:sandbox-agent:error:session_not_found", title: "Session Not Found", status: 404, detail: "session not found: mcp:gh", sessionId: "mcp:gh" });
await fails("no skills entry", () => sdk.getSkillsConfig({ directory: `${home}/errs`, skillName: "s" }), 404,
  { type: "urn:sandbox-agent:error:session_not_found", title: "Session Not Found", status: 404, detail: "session not found: skills:s", sessionId: "skills:s" });
// A missing required query parameter: 400.
await fails("no directory", () => sdk.getMcpConfig({ mcpName: "gh" }), 400);
await fails("no path", () => sdk.readFsFile({}), 400);

await sdk.dispose();
console.log("sdk errors: ok");
process.exit(0);
