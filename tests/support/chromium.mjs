// Debian's Chromium, headless, driven by playwright-core: the flags the browser tests and
// the browser benchmarks launch it with (written here once), and a fresh profile per launch.
import { chromium } from "playwright-core";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const CHROMIUM_PATH = process.env.CHROMIUM ?? "/usr/bin/chromium";

/** No background traffic, no first-run work, no QUIC to the loopback. */
export const CHROMIUM_FLAGS = [
  "--headless=new",
  "--no-sandbox",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
  "--disable-quic",
];

/**
 * Chromium with a fresh profile and `extraFlags` (e.g. "--enable-unsafe-webgpu"), each call
 * waiting at most `timeout` ms. Resolves to { context, userDataDir, close() }; `close()`
 * removes the profile.
 */
export async function launchChromium({ extraFlags = [], timeout, viewport } = {}) {
  const userDataDir = await mkdtemp(join(tmpdir(), "transduce-chromium-"));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [...CHROMIUM_FLAGS, ...extraFlags],
    ...(viewport ? { viewport } : {}),
  });
  if (timeout) context.setDefaultTimeout(timeout);
  return {
    context,
    userDataDir,
    async close() {
      await context.close();
      await rm(userDataDir, { recursive: true, force: true });
    },
  };
}
