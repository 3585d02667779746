// Drives a daemon's /opencode with OpenCode's own TypeScript SDK, as
// OpenCode's clients do, and reports what each flow did and how the shapes
// it saw differ from native OpenCode's (opencode-shapes.mjs). It asserts
// nothing itself: the Go test (e2e/opencode_test.go) holds what each
// target must do, so the same flows run against this daemon and the
// reference binary.
//
// Env: BASE_URL (the daemon, without /opencode), TOKEN (optional, sent as
// OpenCode's --password: HTTP Basic), SDK ("1.2" or "latest"), API ("v1"
// or "v2"), AGENT (the provider of the flows that need more than the mock:
// tool states with input and output, questions), PERMISSION_AGENT (the
// permission flow's, default MOCK), MOCK (the provider of the others). Prints one line "RESULT <json>" and exits 0 unless the SDK
// itself failed to load.
import { diffShape } from "./opencode-shapes.mjs";

const base = process.env.BASE_URL + "/opencode";
const api = process.env.API || "v1";
const agent = process.env.AGENT || "mock";
const mock = process.env.MOCK || "mock";
const permissionAgent = process.env.PERMISSION_AGENT || mock;
const pkg = process.env.SDK === "latest" ? "opencode-sdk-latest" : "@opencode-ai/sdk";
const mod = await import(api === "v2" ? `${pkg}/v2` : pkg);
const headers = process.env.TOKEN ? { Authorization: "Basic " + Buffer.from("opencode:" + process.env.TOKEN).toString("base64") } : undefined;
const client = mod.createOpencodeClient({ baseUrl: base, headers });

const result = { flows: {}, diffs: [] };
const diff = (kind, value) => {
  for (const d of diffShape(kind, value)) {
    if (!result.diffs.includes(d)) result.diffs.push(d);
  }
};
const flow = async (name, fn) => {
  try {
    result.flows[name] = { ok: true, ...(await fn()) };
  } catch (e) {
    result.flows[name] = { ok: false, error: String(e && e.stack || e).split("\n").slice(0, 3).join(" | ") };
  }
};
const timeout = (ms, what) => new Promise((_, rej) => setTimeout(() => rej(new Error("timeout: " + what)), ms).unref());
const data = (r) => {
  if (r.error) throw new Error("error answer: " + JSON.stringify(r.error));
  return r.data;
};

// The SDK's two generations name their parameters differently.
const call = {
  create: () => api === "v2" ? client.session.create({}) : client.session.create({ body: {} }),
  promptAsync: (id, text, provider) => {
    const body = { parts: [{ type: "text", text }], model: { providerID: provider, modelID: provider === "mock" ? "mock" : "default" } };
    if (!provider) delete body.model;
    return api === "v2" ? client.session.promptAsync({ sessionID: id, ...body }) : client.session.promptAsync({ path: { id }, body });
  },
  messages: (id) => api === "v2" ? client.session.messages({ sessionID: id }) : client.session.messages({ path: { id } }),
  abort: (id) => api === "v2" ? client.session.abort({ sessionID: id }) : client.session.abort({ path: { id } }),
  permissionReply: (sessionID, requestID, reply) => api === "v2"
    ? client.permission.reply({ requestID, reply })
    : client.postSessionIdPermissionsPermissionId({ path: { id: sessionID, permissionID: requestID }, body: { response: reply } }),
};

// One event stream for the whole run; each flow reads the events of its
// own session.
const events = [];
let wake = () => {};
const sub = await client.event.subscribe();
(async () => {
  try {
    for await (const e of sub.stream) {
      events.push(e);
      wake();
    }
  } catch {}
})();
const sessionOf = (e) => {
  const p = e.properties || {};
  return p.sessionID || p.info?.sessionID || p.part?.sessionID || (e.type?.startsWith("session.") ? p.info?.id : undefined);
};
// waitFor returns the session's events up to the first that pred accepts.
const waitFor = async (id, pred, ms, what) => {
  const deadline = Date.now() + ms;
  for (;;) {
    const mine = events.filter((e) => sessionOf(e) === id);
    const i = mine.findIndex(pred);
    if (i >= 0) return mine.slice(0, i + 1);
    if (Date.now() > deadline) throw new Error(`timeout: ${what} (saw ${mine.map((e) => e.type).join(",")})`);
    await Promise.race([new Promise((r) => { wake = r; }), new Promise((r) => setTimeout(r, 100))]);
  }
};
const idle = (e) => e.type === "session.idle" || (e.type === "session.status" && e.properties.status?.type === "idle");
const parts = (evs, type) => evs.filter((e) => e.type === "message.part.updated" && e.properties.part.type === type).map((e) => e.properties);
const assistantText = (msgs) => {
  const a = msgs.filter((m) => m.info.role === "assistant").pop();
  return a ? a.parts.filter((p) => p.type === "text").map((p) => p.text).join("") : undefined;
};

// Connected in time for the first flow's events.
await Promise.race([new Promise((r) => setTimeout(r, 300)), timeout(10000, "subscribe")]);

await flow("providers", async () => {
  const r = data(await client.config.providers(api === "v2" ? {} : undefined));
  for (const p of r.providers) for (const m of Object.values(p.models)) diff("model", m);
  const ids = r.providers.map((p) => p.id);
  const list = data(await client.provider.list(api === "v2" ? {} : undefined));
  return { providers: ids, defaults: r.default, listed: list.all.map((p) => p.id), connected: list.connected };
});

let session;
await flow("create", async () => {
  session = data(await call.create());
  diff("session", session);
  return { id: session.id };
});

await flow("prompt", async () => {
  const s = data(await call.create());
  const before = events.length;
  data(await call.promptAsync(s.id, "hello", mock));
  const evs = await waitFor(s.id, (e) => e.type === "session.idle", 20000, "session.idle");
  for (const e of evs) diff("event:" + e.type, e.properties);
  const asst = evs.find((e) => e.type === "message.updated" && e.properties.info.role === "assistant")?.properties.info.id;
  const text = parts(evs, "text").filter((p) => p.part.messageID === asst);
  const deltas = text.filter((p) => p.delta !== undefined).map((p) => p.delta).join("");
  const last = text[text.length - 1]?.part;
  const msgs = data(await call.messages(s.id));
  for (const m of msgs) {
    diff(m.info.role === "user" ? "userMessage" : "assistantMessage", m.info);
    for (const p of m.parts) diff("part:" + p.type, p);
  }
  return {
    order: evs.map((e) => e.type),
    deltas,
    final: last?.text,
    finalHasEnd: Boolean(last?.time?.end),
    reply: assistantText(msgs),
    messages: msgs.map((m) => m.info.role),
    sawBefore: before,
  };
});

await flow("tool", async () => {
  const s = data(await call.create());
  data(await call.promptAsync(s.id, "tool", agent));
  const evs = await waitFor(s.id, (e) => e.type === "session.idle", 20000, "session.idle");
  const tools = parts(evs, "tool").map((p) => p.part);
  for (const t of tools) diff("part:tool", t);
  return {
    states: tools.map((t) => t.state.status),
    names: [...new Set(tools.map((t) => t.tool))],
    inputs: [...new Set(tools.map((t) => JSON.stringify(t.state.input)))],
    output: tools.map((t) => t.state.output).filter(Boolean).pop(),
  };
});

await flow("permission", async () => {
  const s = data(await call.create());
  data(await call.promptAsync(s.id, "permission", permissionAgent));
  const evs = await waitFor(s.id, (e) => e.type === "permission.asked" || e.type === "permission.updated", 20000, "permission event");
  const asked = evs[evs.length - 1];
  diff("event:" + asked.type, asked.properties);
  data(await call.permissionReply(s.id, asked.properties.id, "once"));
  await waitFor(s.id, (e) => e.type === "session.idle", 20000, "session.idle");
  return { event: asked.type, reply: assistantText(data(await call.messages(s.id))) };
});

await flow("question", async () => {
  if (api !== "v2") throw new Error("the v1 SDK has no question API");
  const s = data(await call.create());
  data(await call.promptAsync(s.id, "question", agent));
  const evs = await waitFor(s.id, (e) => e.type === "question.asked", 20000, "question.asked");
  const q = evs[evs.length - 1].properties;
  diff("event:question.asked", q);
  const listed = data(await client.question.list({}));
  data(await client.question.reply({ requestID: q.id, answers: [[q.questions[0].options[1].label]] }));
  await waitFor(s.id, (e) => e.type === "session.idle", 20000, "session.idle");
  return { options: q.questions[0].options.map((o) => o.label), listed: listed.length, reply: assistantText(data(await call.messages(s.id))) };
});

await flow("abort", async () => {
  const s = data(await call.create());
  data(await call.promptAsync(s.id, "slow 30000", mock));
  await waitFor(s.id, (e) => e.type === "message.updated" && e.properties.info.role === "assistant", 20000, "the assistant message");
  const t0 = Date.now();
  data(await call.abort(s.id));
  await waitFor(s.id, idle, 20000, "idle after abort");
  const msgs = data(await call.messages(s.id));
  const a = msgs.filter((m) => m.info.role === "assistant").pop();
  return { ms: Date.now() - t0, error: a?.info.error?.name };
});

console.log("RESULT " + JSON.stringify(result));
process.exit(0);
