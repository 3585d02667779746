// Opens the API documentation (/docs) in headless Chromium with every
// request to anything but loopback blocked, as on an air-gapped host, and
// checks that the page renders the daemon's operations from files the
// daemon serves itself, under its Content-Security-Policy. Also follows the
// inspector's link to it. Env: BASE_URL, CHROMIUM (see browser.mjs),
// ARTIFACTS (directory for screenshots). Exits non-zero on failure.
import assert from "node:assert/strict";
import { join } from "node:path";
import { launch } from "./browser.mjs";

const base = process.env.BASE_URL;
const artifacts = process.env.ARTIFACTS || ".";
const loopback = new Set(["127.0.0.1", "localhost", "[::1]"]);

const { context, close } = await launch();
const blocked = [];
const problems = [];
await context.route("**/*", (route) => {
  const url = new URL(route.request().url());
  if (loopback.has(url.hostname) || url.protocol === "data:" || url.protocol === "blob:") return route.continue();
  blocked.push(url.href);
  return route.abort("blockedbyclient");
});
const page = context.pages()[0] || await context.newPage();
page.setDefaultTimeout(30_000);
page.on("pageerror", (e) => problems.push(`page error: ${e}`));
page.on("console", (m) => { if (m.type() === "error") problems.push(`console: ${m.text()}`); });

let failed = null;
try {
  // The inspector links to the docs.
  await page.goto(`${base}/ui/`);
  await page.click("#docs-link");
  await page.waitForURL(`${base}/docs`);
  const res = await page.reload();
  assert.match(res.headers()["content-security-policy"] || "", /script-src 'self'/);

  // Swagger UI renders the document: the ACP operations are there.
  for (const id of ["post_v1_acp", "get_v1_acp", "delete_v1_acp", "get_v1_acp_servers", "get_v1_agents"]) {
    await page.getByText(id, { exact: true }).first().waitFor();
  }
  await page.getByText("Sandbox Agent", { exact: false }).first().waitFor();
  // Expanding one operation shows its parameters: the page is live, not a shell.
  await page.getByText("post_v1_acp", { exact: true }).first().click();
  await page.locator(".parameter__name", { hasText: "server_id" }).first().waitFor();
  await page.screenshot({ path: join(artifacts, "docs.png") });

  assert.deepEqual(blocked, [], "requests that left loopback");
  assert.deepEqual(problems, [], "errors in the page (a CSP violation is one)");
  console.log("ok: docs offline");
} catch (e) {
  failed = e;
  await page.screenshot({ path: join(artifacts, "docs-failure.png") }).catch(() => {});
  console.error(`FAILED: ${e.stack || e}`);
  if (blocked.length) console.error(`blocked: ${blocked.join("\n")}`);
  if (problems.length) console.error(problems.join("\n"));
} finally {
  await close();
}
process.exit(failed ? 1 : 0);
