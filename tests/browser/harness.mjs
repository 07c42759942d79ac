// The browser tests' shared harness: the command-line flags, the test server, Chromium
// (Debian's, driven by playwright-core), the page helpers, and the count of passes and
// failures that run.mjs prints at the end ("browser: N passed, N failed", which
// scripts/test.sh reads).
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { CHROMIUM_PATH, launchChromium } from "../support/chromium.mjs";
import { serve } from "../../scripts/serve.mjs";

/** The value after `--name` on the command line, or `fallback`. */
export const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
export const repo = resolve(new URL("../..", import.meta.url).pathname);
export const dist = resolve(arg("dist", join(repo, "dist")));
export const artifacts = resolve(arg("artifacts", join(repo, "test-artifacts", "browser")));
/** A page someone already serves (--url), or undefined: then the tests serve dist/ themselves. */
export const external = arg("url");
export const chromiumPath = CHROMIUM_PATH;
export const TIMEOUT = Number(process.env.BROWSER_TIMEOUT ?? 480_000);

/**
 * dist/ holds the threaded CPU module (scripts/build/threads-wasm.sh, where a nightly
 * toolchain with rust-src is installed): the test server's pages are cross-origin isolated,
 * so their CPU backend loads it, with its own relaxed kernel, and decodes on every core.
 */
export const THREADED = !external && existsSync(join(dist, "transduce-web-threads_bg.wasm"));
/** The one-thread CPU module (a page served with ?isolate=0, or without the threaded build). */
export const ONE_THREAD_WASM = "transduce-web_bg.wasm";
export const CPU_WASM = THREADED ? "transduce-web-threads_bg.wasm" : ONE_THREAD_WASM;
export const WEBGPU_WASM = "transduce-web-webgpu_bg.wasm";
// The int8 products' relaxed-SIMD kernel, which the worker fetches beside the WebGPU module
// and the one-thread CPU module; the threaded one has its own (over a shared memory).
export const RELAXED_WASM = "transduce-relaxed.wasm";
export const CPU_RELAXED_WASM = THREADED ? "transduce-relaxed-threads.wasm" : RELAXED_WASM;

/** The page's origin, set by `startServer` (an ES module binding: importers see it change). */
export let base;
let server = null;

/** Serves dist/ at / and `mounts` beside it (unless --url names a page already served). */
export async function startServer(mounts) {
  server = external ? null : await serve({ mounts: { "/": dist, ...mounts }, port: 0 });
  base = external ? external.replace(/\/$/, "") : `http://127.0.0.1:${server.address().port}`;
}

export function stopServer() {
  server?.close();
}

/**
 * One test of a page feature: `run({ b, page })` runs in the browser `b` of a run.mjs
 * session, with that session's shared `page` (none for a step marked `ownPage`, which opens
 * its own pages). `feature` is the name `--only` selects it by.
 */
export const step = (feature, run, { ownPage = false } = {}) => ({ feature, run, ownPage });

let passed = 0;
let failed = 0;

/** Chromium with a fresh profile (tests/support/chromium.mjs's flags); `close()` removes the profile. */
export function browser(extraFlags = []) {
  return launchChromium({ extraFlags, timeout: TIMEOUT, viewport: { width: 1100, height: 1400 } });
}

/** Runs one test: prints "ok - NAME (T s)" or "not ok - NAME: why" and counts it. */
export async function test(name, body, { needsTestServer = false } = {}) {
  if (process.env.ONLY && !new RegExp(process.env.ONLY).test(name)) return;
  if (needsTestServer && external) {
    console.log(`SKIP: ${name} (needs the test server's files; --url ${external} was given)`);
    return;
  }
  const started = Date.now();
  try {
    await body();
    passed++;
    console.log(`ok - ${name} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  } catch (e) {
    failed++;
    console.log(`not ok - ${name}: ${e.message.split("\n").slice(0, 6).join("\n    ")}`);
  }
}

/** A test that cannot run here: one "SKIP: NAME (why)" line, which scripts/test.sh counts. */
export function skip(name, why) {
  if (process.env.ONLY && !new RegExp(process.env.ONLY).test(name)) return;
  console.log(`SKIP: ${name} (${why})`);
}

/** The final line scripts/test.sh reads; the number of failures. */
export function summary() {
  console.log(`browser: ${passed} passed, ${failed} failed`);
  return failed;
}

export function assertEqual(found, want, what) {
  if (found !== want) throw new Error(`${what}: expected ${JSON.stringify(want)}, found ${JSON.stringify(found)}`);
}

/** The page at `?query`, with its console (`page.logs`) and the wasm modules it fetched (`page.wasm`). */
export async function openPage(context, query) {
  const page = await context.newPage();
  const logs = [];
  page.on("console", (m) => logs.push(`${m.type()}: ${m.text()}`));
  page.on("pageerror", (e) => logs.push(`pageerror: ${e.message}`));
  // The wasm modules the page (its worker included) fetched.
  const wasm = [];
  page.on("request", (r) => {
    const file = new URL(r.url()).pathname.split("/").pop();
    if (file.endsWith(".wasm")) wasm.push(file);
  });
  page.wasm = wasm;
  await page.goto(`${base}/?${query}`);
  page.logs = logs;
  return page;
}

/** Checks that the page fetched exactly the wasm modules `want`. */
export function assertModules(page, want) {
  const found = [...new Set(page.wasm)].sort().join(", ");
  assertEqual(found, [...want].sort().join(", "), "wasm modules fetched");
}

export async function waitReady(page, backend) {
  try {
    await page.waitForSelector(`#badge[data-backend="${backend}"]`, { timeout: TIMEOUT });
  } catch (e) {
    const error = await page.textContent("#error");
    throw new Error(`model did not load on ${backend}: ${error || e.message}\n${page.logs.join("\n")}`);
  }
  await page.waitForSelector("#translate:not([disabled])");
}

export async function translateGreedy(page, text) {
  return translateWith(page, text, 1);
}

export async function translateWith(page, text, beam) {
  await page.fill("#beam", String(beam));
  await page.fill("#source", text);
  await page.evaluate(() => delete document.getElementById("target").dataset.done);
  await page.click("#translate");
  await page.waitForSelector('#target[data-done="true"]');
  const error = await page.textContent("#error");
  if (error) throw new Error(error);
  return (await page.textContent("#target")).trim();
}
