// The filesystem through the official TypeScript SDK, sandbox-agent@0.4.2,
// at its edges: every byte value, empty files, odd and unicode names
// (spaces, newlines, #, ?, %), mkdir -p, upload-batch tars as `tar -C dir .`
// writes them, directories of thousands of entries, move and delete edge
// cases, and (this daemon only) files of 128 MiB both ways.
//
// Env: BASE_URL, HOME_DIR (the server's $HOME), TARGET (ours|reference:
// what the reference does differently is checked on ours only, and said).
// Exits non-zero on any mismatch.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { SandboxAgent, SandboxAgentError } from "sandbox-agent";

const home = process.env.HOME_DIR;
const ours = process.env.TARGET !== "reference";
assert.ok(home, "HOME_DIR is required");

const withTimeout = (p, ms, what) =>
  Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`timeout: ${what}`)), ms))]);
const sdk = await withTimeout(SandboxAgent.connect({ baseUrl: process.env.BASE_URL }), 10000, "connect");
const enc = new TextEncoder();
const dec = new TextDecoder();

async function expectError(fn, status, detailPart) {
  try {
    await fn();
  } catch (err) {
    assert.ok(err instanceof SandboxAgentError, `not a SandboxAgentError: ${err}`);
    assert.equal(err.status, status, JSON.stringify(err.problem));
    if (detailPart) assert.ok(err.problem?.detail?.includes(detailPart), JSON.stringify(err.problem));
    return err;
  }
  assert.fail(`expected a ${status} error`);
}

// --- bytes and sizes -----------------------------------------------------
const every = new Uint8Array(256 * 4).map((_, i) => (i * 7) % 256);
assert.deepEqual(await sdk.writeFsFile({ path: "edge/every.bin" }, every), { path: `${home}/edge/every.bin`, bytesWritten: every.length });
assert.deepEqual(await sdk.readFsFile({ path: "edge/every.bin" }), every);

assert.deepEqual(await sdk.writeFsFile({ path: "edge/empty" }, new Uint8Array(0)), { path: `${home}/edge/empty`, bytesWritten: 0 });
assert.equal((await sdk.readFsFile({ path: "edge/empty" })).length, 0);
const emptyStat = await sdk.statFs({ path: "edge/empty" });
assert.equal(emptyStat.entryType, "file");
assert.equal(emptyStat.size, 0);
// A Blob body, as browsers hand files over.
await sdk.writeFsFile({ path: "edge/blob.bin" }, new Blob([every]));
assert.deepEqual(await sdk.readFsFile({ path: "edge/blob.bin" }), every);

if (ours) {
  // 128 MiB up and down (the reference refuses bodies past its cap: 413).
  const big = new Uint8Array(128 << 20);
  for (let i = 0; i < big.length; i += 4093) big[i] = i & 255;
  const sum = createHash("sha256").update(big).digest("hex");
  assert.deepEqual(await withTimeout(sdk.writeFsFile({ path: "edge/big.bin" }, big), 60000, "128 MiB write"),
    { path: `${home}/edge/big.bin`, bytesWritten: big.length });
  const back = await withTimeout(sdk.readFsFile({ path: "edge/big.bin" }), 60000, "128 MiB read");
  assert.equal(back.length, big.length);
  assert.equal(createHash("sha256").update(back).digest("hex"), sum);
  assert.equal((await sdk.statFs({ path: "edge/big.bin" })).size, big.length);
  await sdk.deleteFsEntry({ path: "edge/big.bin" });
}

// --- names -----------------------------------------------------------------
const names = ["a b.txt", "new\nline", "hash#x", "q?x", "pct%20x", "pct%zz", "plus+x", "amp&x=1", "uni-é✓😀", "tab\tx",
  "back\\slash", " lead", "semi;x", "..x", "x..", "CR\rx"];
for (const name of names) {
  const w = await sdk.writeFsFile({ path: `edge/names/${name}` }, enc.encode(name));
  assert.equal(w.path, `${home}/edge/names/${name}`, JSON.stringify(name));
  assert.equal(dec.decode(await sdk.readFsFile({ path: `edge/names/${name}` })), name, JSON.stringify(name));
  assert.equal((await sdk.statFs({ path: `${home}/edge/names/${name}` })).size, enc.encode(name).length);
}
const listed = await sdk.listFsEntries({ path: "edge/names" });
assert.deepEqual(listed.map((e) => e.name).sort(), [...names].sort());
for (const e of listed) {
  assert.equal(e.path, `${home}/edge/names/${e.name}`);
  assert.equal(e.entryType, "file");
}
// A name moved to another odd name, and deleted.
await sdk.moveFs({ from: "edge/names/hash#x", to: "edge/names/q?x#2 %41" });
assert.equal(dec.decode(await sdk.readFsFile({ path: "edge/names/q?x#2 %41" })), "hash#x");
await sdk.deleteFsEntry({ path: "edge/names/q?x#2 %41" });

// --- mkdir -p ----------------------------------------------------------------
assert.deepEqual(await sdk.mkdirFs({ path: "edge/m/a/b/c" }), { path: `${home}/edge/m/a/b/c` });
assert.deepEqual(await sdk.mkdirFs({ path: "edge/m/a/b/c" }), { path: `${home}/edge/m/a/b/c` }, "again: no error");
assert.deepEqual(await sdk.mkdirFs({ path: "edge/m/a/" }), { path: `${home}/edge/m/a` });
assert.equal((await sdk.statFs({ path: "edge/m/a/b/c" })).entryType, "directory");
// Writes create their parents.
await sdk.writeFsFile({ path: "edge/p/q/r/file" }, enc.encode("x"));
assert.equal((await sdk.statFs({ path: "edge/p/q/r" })).entryType, "directory");
if (ours) {
  // Over or under a file: 400 naming the path (the reference: 502 with an
  // OS error string).
  await expectError(() => sdk.mkdirFs({ path: "edge/every.bin" }), 400, "path is not a directory");
  await expectError(() => sdk.mkdirFs({ path: "edge/every.bin/x" }), 400, "is not a directory");
  await expectError(() => sdk.writeFsFile({ path: "edge/every.bin/x" }, enc.encode("x")), 400, "is not a directory");
  await expectError(() => sdk.writeFsFile({ path: "edge/m" }, enc.encode("x")), 400, "path is not a file");
  // An empty path is refused, never read as $HOME (the reference stats,
  // creates and deletes "" as the home directory itself).
  for (const call of [() => sdk.statFs({ path: "" }), () => sdk.mkdirFs({ path: "" }), () => sdk.deleteFsEntry({ path: "", recursive: true })]) {
    await expectError(call, 400, "'path'");
  }
}

// --- moves and deletes ------------------------------------------------------
await sdk.mkdirFs({ path: "edge/mv/d1/sub" });
await sdk.mkdirFs({ path: "edge/mv/d2" });
await sdk.writeFsFile({ path: "edge/mv/d1/sub/f" }, enc.encode("f"));
await expectError(() => sdk.moveFs({ from: "edge/mv/d1", to: "edge/mv/d2" }), 400, "destination already exists");
if (ours) {
  // Moved into a parent that does not exist yet, created on the way (the
  // reference: 400 path not found).
  assert.deepEqual(await sdk.moveFs({ from: "edge/mv/d1", to: "edge/mv/new/deep/d1" }),
    { from: `${home}/edge/mv/d1`, to: `${home}/edge/mv/new/deep/d1` });
  assert.equal(dec.decode(await sdk.readFsFile({ path: "edge/mv/new/deep/d1/sub/f" })), "f");
  // Onto itself with overwrite: refused, the file kept (the reference
  // removes the destination first: the file is gone).
  await expectError(() => sdk.moveFs({ from: "edge/every.bin", to: "edge/every.bin", overwrite: true }), 400, "source and destination are the same");
  assert.deepEqual(await sdk.readFsFile({ path: "edge/every.bin" }), every);
  // A directory into itself: 400 (the reference: 502 Invalid argument).
  await expectError(() => sdk.moveFs({ from: "edge/mv/new", to: "edge/mv/new/inside" }), 400, "into itself");
  // A directory over a directory with overwrite replaces it.
  assert.deepEqual(await sdk.moveFs({ from: "edge/mv/new", to: "edge/mv/d2", overwrite: true }), { from: `${home}/edge/mv/new`, to: `${home}/edge/mv/d2` });
  assert.deepEqual((await sdk.listFsEntries({ path: "edge/mv/d2" })).map((e) => e.name), ["deep"]);
  // Missing paths: 404 (the reference: 400).
  await expectError(() => sdk.moveFs({ from: "edge/mv/nope", to: "edge/mv/x" }), 404, "path not found");
  await expectError(() => sdk.deleteFsEntry({ path: "edge/mv/nope" }), 404, "path not found");
  await expectError(() => sdk.deleteFsEntry({ path: "edge/mv/d2" }), 400, "recursive");
}
assert.deepEqual(await sdk.deleteFsEntry({ path: "edge/mv", recursive: true }), { path: `${home}/edge/mv` });
// recursive on a file deletes the file.
assert.deepEqual(await sdk.deleteFsEntry({ path: "edge/empty", recursive: true }), { path: `${home}/edge/empty` });

// --- upload-batch -----------------------------------------------------------
// As `tar -cf - -C src .` writes it: "./" first, a symbolic link, an
// executable, a name longer than ustar's 100 bytes (prefix field), odd
// names, and (ours) a hard link: the reference looks for a link's target
// relative to its own working directory and fails every hard link, 502.
const long = `${"d".repeat(60)}/${"L".repeat(80)}`; // 149 bytes with its directory
const entries = [
  { name: "./", dir: true },
  { name: "./run.sh", body: "#!/bin/sh\necho run\n", mode: 0o755 },
  { name: "./sub/", dir: true },
  { name: `./sub/${long}.txt`, body: "deep" },
  { name: "./odd dir/#q?%41 é.txt", body: "odd" },
  { name: "./link.txt", link: "run.sh", type: "2" },
  { name: "./plain.txt", body: "plain" },
];
if (ours) entries.push({ name: "./hard.txt", link: "./plain.txt", type: "1" });
const up = await sdk.uploadFsBatch(makeTar(entries), { path: "edge/up" });
assert.equal(up.truncated, false);
// The entries of the archive, without the parents made on the way.
const want = [`${home}/edge/up/run.sh`, `${home}/edge/up/sub`, `${home}/edge/up/sub/${long}.txt`, `${home}/edge/up/odd dir/#q?%41 é.txt`, `${home}/edge/up/link.txt`, `${home}/edge/up/plain.txt`];
if (ours) want.push(`${home}/edge/up/hard.txt`);
for (const p of want) assert.ok(up.paths.includes(p), `${p} in ${JSON.stringify(up.paths)}`);
assert.equal(dec.decode(await sdk.readFsFile({ path: `edge/up/sub/${long}.txt` })), "deep");
assert.equal(dec.decode(await sdk.readFsFile({ path: "edge/up/odd dir/#q?%41 é.txt" })), "odd");
const ran = await sdk.runProcess({ command: "sh", args: ["-c", "cd \"$HOME/edge/up\" && ./run.sh && readlink link.txt"] });
assert.equal(ran.stdout, "run\nrun.sh\n", ran.stderr);
if (ours) {
  const links = await sdk.runProcess({ command: "stat", args: ["-c", "%h", `${home}/edge/up/hard.txt`] });
  assert.equal(links.stdout, "2\n", "a hard link, not a copy");
}
// Thousands of entries: the answer lists 1024 paths and says so; the
// directory lists them all. (1500 on the reference: past 2 MiB, its cap,
// it answers 413.)
const many = Array.from({ length: ours ? 3000 : 1500 }, (_, i) => ({ name: `many/f${String(i).padStart(5, "0")}`, body: String(i) }));
const upMany = await withTimeout(sdk.uploadFsBatch(makeTar(many), { path: "edge" }), 60000, "thousands of entries");
assert.equal(upMany.paths.length, 1024);
assert.equal(upMany.truncated, true);
const big = await sdk.listFsEntries({ path: "edge/many" });
assert.equal(big.length, many.length);
assert.deepEqual(big.map((e) => e.name).sort(), many.map((e) => e.name.slice(5)).sort());
assert.ok(big.every((e) => e.entryType === "file" && e.size === enc.encode(e.name.slice(1).replace(/^0+(?=\d)/, "")).length), "sizes");
// An empty archive (two zero blocks) writes nothing.
assert.deepEqual(await sdk.uploadFsBatch(new Uint8Array(1024), { path: "edge/none" }), { paths: [], truncated: false });
if (ours) {
  // Not a tar: 400 saying so (the reference: 502 "failed to read entire block").
  await expectError(() => sdk.uploadFsBatch(enc.encode("not a tar at all"), { path: "edge/bad" }), 400, "invalid tar archive");
  // A link out of the target is refused, nothing written (the reference
  // writes the link).
  await expectError(() => sdk.uploadFsBatch(makeTar([{ name: "ln", link: "/etc/passwd", type: "2" }]), { path: "edge/bad" }), 400, "link target");
  await expectError(() => sdk.statFs({ path: "edge/bad/ln" }), 404);
}

await sdk.deleteFsEntry({ path: "edge", recursive: true });
await sdk.dispose();
console.log("sdk fs edges: ok");
process.exit(0);

// makeTar writes a ustar archive: files, directories, links (type "1"
// hard, "2" symbolic), names past 100 bytes split into the prefix field.
function makeTar(list) {
  const blocks = [];
  for (const e of list) {
    const body = enc.encode(e.body ?? "");
    const h = new Uint8Array(512);
    const put = (off, len, s) => h.set(enc.encode(s).subarray(0, len), off);
    const octal = (off, len, n) => put(off, len, n.toString(8).padStart(len - 1, "0") + "\0");
    const nameBytes = enc.encode(e.name);
    if (nameBytes.length > 100) {
      const cut = e.name.lastIndexOf("/");
      put(345, 155, e.name.slice(0, cut));
      put(0, 100, e.name.slice(cut + 1));
    } else {
      h.set(nameBytes, 0);
    }
    octal(100, 8, e.mode ?? (e.dir ? 0o755 : 0o644));
    octal(108, 8, 0);
    octal(116, 8, 0);
    octal(124, 12, e.dir || e.link ? 0 : body.length);
    octal(136, 12, Math.floor(Date.now() / 1000));
    h.fill(0x20, 148, 156); // the checksum field counts as spaces
    put(156, 1, e.type ?? (e.dir ? "5" : "0"));
    if (e.link) put(157, 100, e.link);
    put(257, 6, "ustar\0");
    put(263, 2, "00");
    const sum = h.reduce((a, b) => a + b, 0);
    put(148, 8, sum.toString(8).padStart(6, "0") + "\0 ");
    blocks.push(h);
    if (!e.dir && !e.link && body.length) {
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
