// Starts headless Chromium for the browser tests, with one set of flags.
//
// Which Chromium: $CHROMIUM when set (the Go tests always set it, see
// e2e/browser_test.go), else Debian's /usr/bin/chromium when installed, else
// the Chromium shipped inside the npm package @sparticuz/chromium (pinned in
// package.json), unpacked on first use. So `npm ci` is all a fresh machine
// needs; nothing is downloaded at run time.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

// flags keep the browser off the network except for the pages it is sent
// to (no background services, no component updates) and work as root.
export const flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];

export async function executablePath() {
  if (process.env.CHROMIUM) return process.env.CHROMIUM;
  if (existsSync("/usr/bin/chromium")) return "/usr/bin/chromium";
  const { default: packaged } = await import("@sparticuz/chromium");
  return packaged.executablePath();
}

// launch returns a persistent context in a fresh profile directory and a
// close function that also removes the profile.
export async function launch(options = {}) {
  const userDataDir = mkdtempSync(join(tmpdir(), "e2e-chromium-"));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: await executablePath(),
    headless: true,
    args: flags,
    viewport: { width: 1280, height: 800 },
    ...options,
  });
  const close = async () => {
    await context.close();
    rmSync(userDataDir, { recursive: true, force: true });
  };
  return { context, close };
}
