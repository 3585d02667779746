// Drives the daemon's filesystem and config routes with the official
// TypeScript SDK, sandbox-agent@0.4.2, as users do.
// Env: BASE_URL, TOKEN (optional), HOME_DIR (the daemon's $HOME).
// Exits non-zero on any mismatch.
import assert from "node:assert/strict";
import { SandboxAgent, SandboxAgentError } from "sandbox-agent";

const home = process.env.HOME_DIR;
assert.ok(home, "HOME_DIR is required");

// Timers are unref'd so a finished script exits at once.
const withTimeout = (p, ms, what) =>
  Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`timeout: ${what}`)), ms).unref())]);

const sdk = await withTimeout(
  SandboxAgent.connect({ baseUrl: process.env.BASE_URL, token: process.env.TOKEN || undefined }),
  10000, "connect");

// expectError runs fn and checks it fails with a SandboxAgentError.
async function expectError(fn, status, detailPart) {
  try {
    await fn();
  } catch (err) {
    assert.ok(err instanceof SandboxAgentError, `not a SandboxAgentError: ${err}`);
    assert.equal(err.status, status, JSON.stringify(err.problem));
    if (detailPart) assert.ok(err.problem.detail.includes(detailPart), err.problem.detail);
    return err;
  }
  assert.fail(`expected a ${status} error`);
}

// writeFsFile / readFsFile, text and every byte value.
const w = await sdk.writeFsFile({ path: "sdk/hello.txt" }, "hello from the sdk");
assert.deepEqual(w, { path: `${home}/sdk/hello.txt`, bytesWritten: 18 });
assert.equal(new TextDecoder().decode(await sdk.readFsFile({ path: "sdk/hello.txt" })), "hello from the sdk");

const all = new Uint8Array(256 * 64).map((_, i) => i % 256);
await sdk.writeFsFile({ path: `${home}/sdk/bytes.bin` }, all);
assert.deepEqual(await sdk.readFsFile({ path: `${home}/sdk/bytes.bin` }), all);

// statFs follows the contract's shape.
const st = await sdk.statFs({ path: "sdk/hello.txt" });
assert.equal(st.path, `${home}/sdk/hello.txt`);
assert.equal(st.entryType, "file");
assert.equal(st.size, 18);
assert.match(st.modified, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00$/);

// mkdirFs / listFsEntries.
assert.deepEqual(await sdk.mkdirFs({ path: "sdk/dir/sub" }), { path: `${home}/sdk/dir/sub` });
const entries = await sdk.listFsEntries({ path: "sdk" });
assert.deepEqual(entries.map((e) => [e.name, e.entryType]), [["bytes.bin", "file"], ["dir", "directory"], ["hello.txt", "file"]]);
assert.equal(entries[2].path, `${home}/sdk/hello.txt`);
assert.equal(entries[2].size, 18);

// moveFs, with and without overwrite.
assert.deepEqual(await sdk.moveFs({ from: "sdk/hello.txt", to: "sdk/dir/moved.txt" }),
  { from: `${home}/sdk/hello.txt`, to: `${home}/sdk/dir/moved.txt` });
await expectError(() => sdk.moveFs({ from: "sdk/bytes.bin", to: "sdk/dir/moved.txt" }), 400, "destination already exists");
await sdk.moveFs({ from: "sdk/bytes.bin", to: "sdk/dir/moved.txt", overwrite: true });
assert.deepEqual(await sdk.readFsFile({ path: "sdk/dir/moved.txt" }), all);

// Errors are problems the SDK surfaces.
await expectError(() => sdk.readFsFile({ path: "sdk/nope" }), 404, `path not found: ${home}/sdk/nope`);
await expectError(() => sdk.listFsEntries({ path: "sdk/dir/moved.txt" }), 400, "path is not a directory");
await expectError(() => sdk.deleteFsEntry({ path: "sdk/dir" }), 400, "not empty");

// uploadFsBatch with a tar built here (ustar, as `tar` writes it).
const upload = await sdk.uploadFsBatch(makeTar([
  { name: "pkg/", dir: true },
  { name: "pkg/index.js", body: "export default 42;\n" },
  { name: "pkg/data/x.json", body: "{}" },
]), { path: "sdk/up" });
assert.deepEqual(upload, {
  paths: [`${home}/sdk/up/pkg`, `${home}/sdk/up/pkg/index.js`, `${home}/sdk/up/pkg/data/x.json`],
  truncated: false,
});
assert.equal(new TextDecoder().decode(await sdk.readFsFile({ path: "sdk/up/pkg/index.js" })), "export default 42;\n");
await expectError(() => sdk.uploadFsBatch(makeTar([{ name: "../escape.txt", body: "x" }]), { path: "sdk/up" }), 400, "tar entry");

// deleteFsEntry.
assert.deepEqual(await sdk.deleteFsEntry({ path: "sdk/dir", recursive: true }), { path: `${home}/sdk/dir` });
await expectError(() => sdk.statFs({ path: "sdk/dir" }), 404, "path not found");

// MCP config: set, get (normalised), delete, then the 404.
const q = { directory: `${home}/proj`, mcpName: "github" };
await expectError(() => sdk.getMcpConfig(q), 404, "session not found: mcp:github");
assert.equal(await sdk.setMcpConfig(q, { type: "remote", url: "https://mcp.example/gh", headers: { b: "2", a: "1" }, transport: "sse" }), undefined);
assert.deepEqual(await sdk.getMcpConfig(q), { type: "remote", url: "https://mcp.example/gh", headers: { a: "1", b: "2" }, transport: "sse" });
await sdk.setMcpConfig({ directory: `${home}/proj`, mcpName: "local" }, { type: "local", command: "npx", args: ["-y", "server"], env: { K: "V" } });
assert.deepEqual(await sdk.getMcpConfig({ directory: `${home}/proj`, mcpName: "local" }),
  { type: "local", command: "npx", args: ["-y", "server"], env: { K: "V" } });
assert.equal(await sdk.deleteMcpConfig(q), undefined);
const notFound = await expectError(() => sdk.getMcpConfig(q), 404);
assert.equal(notFound.problem.type, "urn:sandbox-agent:error:session_not_found");
assert.equal(notFound.problem.sessionId, "mcp:github");
await sdk.deleteMcpConfig(q); // deleting again is fine
const bad = await expectError(() => sdk.setMcpConfig(q, { type: "grpc" }), 422);
assert.equal(bad.problem.type, "urn:sandbox-agent:error:invalid_request");

// Skills config.
const sq = { directory: `${home}/proj`, skillName: "mine" };
await expectError(() => sdk.getSkillsConfig(sq), 404, "skills:mine");
await sdk.setSkillsConfig(sq, { sources: [{ type: "github", source: "owner/repo", skills: ["a"], ref: "main" }] });
assert.deepEqual(await sdk.getSkillsConfig(sq), { sources: [{ type: "github", source: "owner/repo", skills: ["a"], ref: "main" }] });
await sdk.deleteSkillsConfig(sq);
await expectError(() => sdk.getSkillsConfig(sq), 404, "session not found: skills:mine");

// The stored file is what the contract says.
const stored = new TextDecoder().decode(await sdk.readFsFile({ path: `${home}/proj/.sandbox-agent/config/mcp.json` }));
assert.equal(stored, '{\n  "local": {\n    "type": "local",\n    "command": "npx",\n    "args": [\n      "-y",\n      "server"\n    ],\n    "env": {\n      "K": "V"\n    }\n  }\n}');

await sdk.dispose();
console.log("sdk fs/config ok");

// makeTar writes a ustar archive of files and directories.
function makeTar(entries) {
  const blocks = [];
  const enc = new TextEncoder();
  for (const e of entries) {
    const body = enc.encode(e.body ?? "");
    const h = new Uint8Array(512);
    const put = (off, len, s) => h.set(enc.encode(s).subarray(0, len), off);
    const octal = (off, len, n) => put(off, len, n.toString(8).padStart(len - 1, "0") + "\0");
    put(0, 100, e.name);
    octal(100, 8, e.dir ? 0o755 : 0o644);
    octal(108, 8, 0);
    octal(116, 8, 0);
    octal(124, 12, e.dir ? 0 : body.length);
    octal(136, 12, Math.floor(Date.now() / 1000));
    h.fill(0x20, 148, 156); // checksum field counts as spaces
    put(156, 1, e.dir ? "5" : "0");
    put(257, 6, "ustar\0");
    put(263, 2, "00");
    const sum = h.reduce((a, b) => a + b, 0);
    put(148, 8, sum.toString(8).padStart(6, "0") + "\0 ");
    blocks.push(h);
    if (!e.dir && body.length) {
      const padded = new Uint8Array(Math.ceil(body.length / 512) * 512);
      padded.set(body);
      blocks.push(padded);
    }
  }
  blocks.push(new Uint8Array(1024));
  const out = new Uint8Array(blocks.reduce((n, b) => n + b.length, 0));
  let off = 0;
  for (const b of blocks) { out.set(b, off); off += b.length; }
  return out;
}
