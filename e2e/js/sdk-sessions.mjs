// Sessions as teams run them, with the official TypeScript SDK
// sandbox-agent@0.4.2 (and its acp-http-client) against one daemon: many
// clients at once, each with its own server id and interleaved prompts;
// the event stream cut mid-turn and resumed with Last-Event-ID; a client
// that restarts and resumes its session; cancel during a prompt;
// permission requests answered late or never; an agent that exits
// mid-turn; an instance deleted while a prompt runs.
//
// Env: BASE_URL; SCENARIOS, a comma-separated list of the scenarios below
// (the reference 0.4.2 passes many, shared, cancel, permission-late,
// permission-never and resume; it loses events on reconnect, waits its
// request timeout when the agent exits, and its DELETE leaves the turn
// running). Exits non-zero on any mismatch.
import assert from "node:assert/strict";
import { SandboxAgent, InMemorySessionPersistDriver } from "sandbox-agent";

const baseUrl = process.env.BASE_URL;
const scenarios = (process.env.SCENARIOS || "").split(",").filter(Boolean);
assert.ok(baseUrl && scenarios.length, "BASE_URL and SCENARIOS are required");

// acp-http-client fails its whole connection on any non-2xx answer and
// leaves that rejection unhandled, which ends a Node process: no scenario
// here may meet one.
process.on("unhandledRejection", (err) => {
  console.error("unhandled rejection (a POST was answered non-2xx):", err?.status, err?.problem ?? err);
  process.exit(1);
});

// The timers keep the process alive, so a hang is reported by name (not as
// Node's silent exit 13 on an unsettled top-level await); the script
// exits explicitly at the end.
const withTimeout = (p, ms, what) =>
  Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`timeout: ${what}`)), ms))]);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function servers() {
  const res = await fetch(`${baseUrl}/v1/acp`);
  assert.equal(res.status, 200);
  return (await res.json()).servers.map((s) => s.serverId);
}

// serverIdOf is the server id of a client's connection to the mock
// (sdk-mock-<uuid>), read from the client's own transport; scenarios run
// at once, so the daemon's listing cannot tell whose an instance is.
function serverIdOf(sdk) {
  const path = sdk.liveConnections.get("mock")?.acp?.transport?.path;
  assert.ok(path?.startsWith("/v1/acp/"), `no connection to the mock: ${path}`);
  return decodeURIComponent(path.slice("/v1/acp/".length));
}

// createSession, and the server id of the client's connection.
async function newSession(sdk, request = { agent: "mock" }) {
  const session = await withTimeout(sdk.createSession(request), 20000, "createSession");
  const serverId = serverIdOf(sdk);
  assert.ok((await servers()).includes(serverId), `${serverId} is listed`);
  return { session, serverId };
}

// texts collects a session's agent_message_chunk texts, in arrival order.
function texts(session) {
  const got = [];
  session.onEvent((ev) => {
    const u = ev.payload?.params?.update;
    if (ev.payload?.method === "session/update" && u?.sessionUpdate === "agent_message_chunk") got.push(u.content.text);
  });
  return got;
}

// eventually polls until fn() is truthy (the last updates of a turn may
// be dispatched just after its answer).
async function eventually(fn, what, ms = 5000) {
  const deadline = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > deadline) throw new Error(`timeout: ${what}`);
    await sleep(10);
  }
}

const chunksOf = (n) => Array.from({ length: n }, (_, k) => `mock: chunk ${k + 1}`);

// cuttingFetch ends every event stream cleanly after `every` events, as a
// proxy or a load balancer does, so the client reconnects (150 ms later)
// with the Last-Event-ID it saw. It records the ids it was sent.
function cuttingFetch(every) {
  const resumedFrom = [];
  const f = async (url, init = {}) => {
    const res = await fetch(url, init);
    const accept = new Headers(init.headers).get("accept") || "";
    if ((init.method ?? "GET") !== "GET" || !accept.includes("text/event-stream") || !res.ok || !res.body) return res;
    resumedFrom.push(new Headers(init.headers).get("last-event-id"));
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    const enc = new TextEncoder();
    let buf = "";
    let seen = 0;
    const body = new ReadableStream({
      async pull(c) {
        const { done, value } = await reader.read();
        if (done) return c.close();
        buf += dec.decode(value, { stream: true });
        let out = "";
        for (let i; (i = buf.indexOf("\n\n")) !== -1;) {
          const ev = buf.slice(0, i + 2);
          buf = buf.slice(i + 2);
          out += ev;
          if (/^id:/m.test(ev) && ++seen >= every) {
            c.enqueue(enc.encode(out));
            reader.cancel().catch(() => {});
            return c.close();
          }
        }
        if (out) c.enqueue(enc.encode(out));
      },
      cancel() { reader.cancel().catch(() => {}); },
    });
    return new Response(body, { status: res.status, headers: res.headers });
  };
  return { fetch: f, resumedFrom };
}

// failingFetch breaks the first event stream with a network error after
// `after` events (a reset connection, not an end): acp-http-client then
// stops reading until its next POST, which reconnects with Last-Event-ID.
function failingFetch(after) {
  const resumedFrom = [];
  let failed = false;
  const f = async (url, init = {}) => {
    const res = await fetch(url, init);
    const accept = new Headers(init.headers).get("accept") || "";
    if ((init.method ?? "GET") !== "GET" || !accept.includes("text/event-stream") || !res.ok || !res.body) return res;
    resumedFrom.push(new Headers(init.headers).get("last-event-id"));
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    const enc = new TextEncoder();
    let buf = "";
    let seen = 0;
    let failNext = false;
    const body = new ReadableStream({
      async pull(c) {
        // The error comes once the client has read what came before it.
        if (failNext) return c.error(new TypeError("network error"));
        const { done, value } = await reader.read();
        if (done) return c.close();
        buf += dec.decode(value, { stream: true });
        let out = "";
        for (let i; (i = buf.indexOf("\n\n")) !== -1;) {
          const ev = buf.slice(0, i + 2);
          buf = buf.slice(i + 2);
          out += ev;
          if (!failed && /^id:/m.test(ev) && ++seen >= after) {
            failed = failNext = true;
            reader.cancel().catch(() => {});
            break;
          }
        }
        if (out) c.enqueue(enc.encode(out));
      },
      cancel() { reader.cancel().catch(() => {}); },
    });
    return new Response(body, { status: res.status, headers: res.headers });
  };
  return { fetch: f, resumedFrom, failed: () => failed };
}

const run = {
  // Twelve clients, each its own server id, three rounds of prompts
  // interleaved across them: streams of different lengths, a permission
  // asked and answered after a delay, a thought. Every client gets its
  // own updates, all of them, in order, and no other client's.
  async many() {
    const N = 12;
    const clients = await Promise.all(Array.from({ length: N }, () => SandboxAgent.connect({ baseUrl })));
    const sessions = await withTimeout(Promise.all(clients.map((c) => c.createSession({ agent: "mock" }))), 30000, "12 sessions");
    const ids = clients.map(serverIdOf);
    assert.equal(new Set(ids).size, N, `each client has its own server id: ${ids}`);
    const listed = await servers();
    assert.ok(ids.every((id) => listed.includes(id)), "every client's instance is listed");
    const got = sessions.map(texts);
    sessions.forEach((s, i) => s.onPermissionRequest((req) => {
      setTimeout(() => s.respondPermission(req.id, i % 2 ? "once" : "reject").catch((e) => got[i].push(`respond failed: ${e}`)), 20 * i).unref();
    }));
    const want = sessions.map(() => []);
    const rounds = [(i) => `stream ${10 + 3 * i}`, () => "permission", (i) => `think ${i}`];
    for (const round of rounds) {
      const answers = await withTimeout(Promise.all(sessions.map((s, i) => s.prompt([{ type: "text", text: round(i) }]))), 30000, "a round of prompts");
      answers.forEach((a) => assert.equal(a.stopReason, "end_turn"));
      sessions.forEach((_, i) => {
        const text = round(i);
        if (text.startsWith("stream ")) want[i].push(...chunksOf(10 + 3 * i));
        else if (text === "permission") want[i].push(`mock: permission selected ${i % 2 ? "allow" : "reject"}`);
        else want[i].push(`mock: think ${i}`);
      });
    }
    await eventually(() => got.every((g, i) => g.length >= want[i].length), "every update delivered");
    got.forEach((g, i) => assert.deepEqual(g, want[i], `client ${i}`));
    await Promise.all(clients.map((c) => withTimeout(c.dispose(), 10000, "dispose")));
    const left = (await servers()).filter((id) => ids.includes(id));
    assert.deepEqual(left, [], "dispose deleted every instance");
  },

  // Ten sessions on one client, so on one connection and one agent
  // process: prompts run at once, each session gets its own updates.
  async shared() {
    const sdk = await SandboxAgent.connect({ baseUrl });
    const sessions = await withTimeout(Promise.all(Array.from({ length: 10 }, () => sdk.createSession({ agent: "mock" }))), 30000, "10 sessions");
    assert.equal(new Set(sessions.map((s) => s.lastConnectionId)).size, 1, "one connection for the client");
    assert.equal(new Set(sessions.map((s) => s.agentSessionId)).size, 10);
    const got = sessions.map(texts);
    const answers = await withTimeout(Promise.all(sessions.map((s, i) => s.prompt([{ type: "text", text: `stream ${5 + i}` }]))), 30000, "prompts");
    answers.forEach((a) => assert.equal(a.stopReason, "end_turn"));
    await eventually(() => got.every((g, i) => g.length >= 5 + i), "every update delivered");
    got.forEach((g, i) => assert.deepEqual(g, chunksOf(5 + i), `session ${i}`));
    await withTimeout(sdk.dispose(), 10000, "dispose");
  },

  // The event stream is cut mid-turn again and again, differently for
  // each of ten clients at once: each resumes with Last-Event-ID and gets
  // every update once, in order.
  async reconnect() {
    const N = 10;
    const cutters = Array.from({ length: N }, (_, i) => cuttingFetch(3 + i));
    const clients = await Promise.all(cutters.map((c) => SandboxAgent.connect({ baseUrl, fetch: c.fetch })));
    const sessions = await withTimeout(Promise.all(clients.map((c) => c.createSession({ agent: "mock" }))), 30000, "sessions");
    const got = sessions.map(texts);
    for (const n of [60, 1]) {
      const answers = await withTimeout(Promise.all(sessions.map((s) => s.prompt([{ type: "text", text: `stream ${n}` }]))), 30000, "prompts");
      answers.forEach((a) => assert.equal(a.stopReason, "end_turn"));
    }
    const want = [...chunksOf(60), "mock: chunk 1"];
    await eventually(() => got.every((g) => g.length >= want.length), "every update delivered");
    got.forEach((g, i) => assert.deepEqual(g, want, `client ${i}`));
    cutters.forEach((c, i) => {
      const resumed = c.resumedFrom.filter(Boolean);
      assert.ok(resumed.length >= 3, `client ${i} reconnected with Last-Event-ID: ${c.resumedFrom}`);
    });
    await Promise.all(clients.map((c) => withTimeout(c.dispose(), 10000, "dispose")));
  },

  // The event stream fails (a network error) mid-turn: the client reads
  // nothing more until it posts again; then it resumes with Last-Event-ID
  // and gets the rest of the turn, its answer included, nothing twice.
  // (The reference answers a prompt in its POST, so its prompt ends
  // without the stream; the updates of the break are lost there.)
  async "stream-error"() {
    const broken = failingFetch(6);
    const sdk = await SandboxAgent.connect({ baseUrl, fetch: broken.fetch });
    const { session } = await newSession(sdk);
    const { session: other } = await newSession(sdk);
    const got = texts(session);
    let answer;
    const prompt = session.prompt([{ type: "text", text: "stream 40" }]).then((a) => { answer = a; });
    await eventually(() => broken.failed() && got.length > 0, "the stream failed mid-turn");
    await sleep(300);
    assert.equal(answer, undefined, "no answer while the stream is down");
    assert.ok(got.length < 40, `${got.length} updates before the break`);
    // Any POST brings the stream back.
    assert.equal((await withTimeout(other.prompt([{ type: "text", text: "hello" }]), 10000, "another prompt")).stopReason, "end_turn");
    await withTimeout(prompt, 10000, "the broken turn's answer after the reconnect");
    assert.equal(answer.stopReason, "end_turn");
    await eventually(() => got.length >= 40, "every update of the broken turn");
    assert.deepEqual(got, chunksOf(40));
    assert.equal(broken.resumedFrom.length, 2, JSON.stringify(broken.resumedFrom));
    assert.ok(Number(broken.resumedFrom[1]) >= 6, `resumed with Last-Event-ID ${broken.resumedFrom[1]}`);
    await withTimeout(sdk.dispose(), 10000, "dispose");
  },

  // Cancel during a prompt: destroySession sends session/cancel and the
  // running prompt answers cancelled; a second prompt on a session ends
  // the first (cancelled) and runs; the connection goes on working.
  async cancel() {
    const sdk = await SandboxAgent.connect({ baseUrl });
    const { session } = await newSession(sdk);
    const got = texts(session);
    const waiting = session.prompt([{ type: "text", text: "wait" }]);
    await eventually(() => got.includes("mock: waiting"), "the turn started");
    await sdk.destroySession(session.id);
    assert.equal((await withTimeout(waiting, 10000, "cancelled prompt")).stopReason, "cancelled");

    const { session: s2 } = await newSession(sdk);
    const got2 = texts(s2);
    const first = s2.prompt([{ type: "text", text: "wait" }]);
    await eventually(() => got2.includes("mock: waiting"), "the second session's turn started");
    const second = s2.prompt([{ type: "text", text: "after" }]);
    const [a, b] = await withTimeout(Promise.all([first, second]), 10000, "two prompts");
    assert.deepEqual([a.stopReason, b.stopReason], ["cancelled", "end_turn"]);
    await eventually(() => got2.includes("mock: after"), "the second prompt's update");
    await withTimeout(sdk.dispose(), 10000, "dispose");
  },

  // A permission answered seconds late still reaches the agent.
  async "permission-late"() {
    const sdk = await SandboxAgent.connect({ baseUrl });
    const { session } = await newSession(sdk);
    const got = texts(session);
    const delay = Number(process.env.PERMISSION_DELAY_MS || 1500);
    let asked = 0;
    session.onPermissionRequest((req) => {
      asked++;
      setTimeout(() => session.respondPermission(req.id, "always").catch((e) => got.push(`respond failed: ${e}`)), delay).unref();
    });
    const started = Date.now();
    const answer = await withTimeout(session.prompt([{ type: "text", text: "permission" }]), delay + 15000, "prompt with a late permission");
    assert.equal(answer.stopReason, "end_turn");
    assert.ok(Date.now() - started >= delay, "the turn waited for the answer");
    assert.equal(asked, 1);
    await eventually(() => got.length > 0, "the agent's answer");
    assert.deepEqual(got, ["mock: permission selected allow"]);
    await withTimeout(sdk.dispose(), 10000, "dispose");
  },

  // A permission never answered: the turn waits; destroySession resolves
  // the pending request as cancelled and sends session/cancel, and the
  // prompt ends: cancelled, or, when the permission's answer reached the
  // agent first (the client posts the two at once), the turn the mock
  // ends after a cancelled permission.
  async "permission-never"() {
    const sdk = await SandboxAgent.connect({ baseUrl });
    const { session } = await newSession(sdk);
    const got = texts(session);
    let asked = 0;
    session.onPermissionRequest(() => { asked++; });
    let settled = false;
    const prompt = session.prompt([{ type: "text", text: "permission" }]).finally(() => { settled = true; });
    await eventually(() => asked === 1, "the permission request");
    await sleep(500);
    assert.equal(settled, false, "the turn waits for the answer");
    await sdk.destroySession(session.id);
    const { stopReason } = await withTimeout(prompt, 10000, "prompt after destroySession");
    if (stopReason === "end_turn") await eventually(() => got.length > 0, "the turn's update");
    assert.ok(stopReason === "cancelled" || (stopReason === "end_turn" && got.includes("mock: permission cancelled")),
      `${stopReason} ${JSON.stringify(got)}`);
    await withTimeout(sdk.dispose(), 10000, "dispose");
    assert.ok(!got.some((t) => t.startsWith("mock: permission selected")), JSON.stringify(got));
  },

  // A client that restarts: a new SandboxAgent on the same persisted
  // sessions resumes its session (a new connection, the history replayed
  // into the next prompt) and prompts on.
  async resume() {
    const persist = new InMemorySessionPersistDriver();
    const first = await SandboxAgent.connect({ baseUrl, persist });
    const { session, serverId } = await newSession(first, { agent: "mock", id: "resumed-session" });
    await withTimeout(session.prompt([{ type: "text", text: "remember me" }]), 10000, "first prompt");
    await withTimeout(first.dispose(), 10000, "dispose");
    assert.ok(!(await servers()).includes(serverId), "the first client's instance is gone");

    const second = await SandboxAgent.connect({ baseUrl, persist });
    const resumed = await withTimeout(second.resumeSession("resumed-session"), 20000, "resumeSession");
    const got = texts(resumed);
    const answer = await withTimeout(resumed.prompt([{ type: "text", text: "again" }]), 10000, "resumed prompt");
    assert.equal(answer.stopReason, "end_turn");
    await eventually(() => got.length > 0, "the resumed prompt's update");
    // The mock echoes the prompt's first block: the SDK's replay of the
    // history, which holds the first prompt.
    assert.match(got[0], /^mock: Previous session history is replayed/);
    const events = await second.getEvents({ sessionId: "resumed-session", limit: 1000 });
    assert.ok(JSON.stringify(events.items).includes("remember me"), "the persisted history holds the first turn");
    await withTimeout(second.dispose(), 10000, "dispose");
  },

  // The agent exits mid-turn: the prompt fails at once with the JSON-RPC
  // error the daemon answers for it (no request timeout to wait), and the
  // exit notice reaches the client.
  async "agent-exit"() {
    const sdk = await SandboxAgent.connect({ baseUrl });
    const { session, serverId } = await newSession(sdk);
    const methods = [];
    session.onEvent((ev) => methods.push(ev.payload?.method));
    const started = Date.now();
    await assert.rejects(withTimeout(session.prompt([{ type: "text", text: "exit 3" }]), 10000, "prompt of an exiting agent"), (err) => {
      assert.equal(err.name, "AcpRpcError", String(err));
      assert.equal(err.code, -32603);
      assert.match(err.message, /agent process stopped before responding/);
      return true;
    });
    assert.ok(Date.now() - started < 5000, "failed at once");
    const listed = await (await fetch(`${baseUrl}/v1/acp`)).json();
    const info = listed.servers.find((s) => s.serverId === serverId);
    assert.equal(info?.state, "exited");
    assert.equal(info?.exitCode, 3);
    await withTimeout(sdk.dispose(), 10000, "dispose");
  },

  // The instance is deleted (by someone else) while a prompt runs: the
  // prompt settles (the mock ends its turn cancelled when stdin closes)
  // instead of waiting forever, and the DELETE returns promptly.
  async delete() {
    const sdk = await SandboxAgent.connect({ baseUrl });
    const { session, serverId } = await newSession(sdk);
    const got = texts(session);
    let outcome;
    const prompt = session.prompt([{ type: "text", text: "wait" }]).then(
      (a) => { outcome = a.stopReason; },
      (e) => { outcome = `${e.name} ${e.code}`; });
    await eventually(() => got.includes("mock: waiting"), "the turn started");
    const started = Date.now();
    const res = await fetch(`${baseUrl}/v1/acp/${encodeURIComponent(serverId)}`, { method: "DELETE" });
    assert.equal(res.status, 204);
    assert.ok(Date.now() - started < 5000, "DELETE returned promptly");
    await withTimeout(prompt, 5000, "the prompt settles after the DELETE");
    assert.ok(outcome === "cancelled" || outcome === "AcpRpcError -32603", outcome);
    assert.ok(!(await servers()).includes(serverId));
    await withTimeout(sdk.dispose(), 10000, "dispose");
  },
};

for (const name of scenarios) {
  assert.ok(run[name], `unknown scenario ${name}`);
  const started = Date.now();
  await run[name]();
  console.log(`${name}: ok (${Date.now() - started} ms)`);
}
process.exit(0);
