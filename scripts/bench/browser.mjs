// Decoding speed in the browser against the native CLI, on the same bundle and sentences:
// the npm package (pkg/, from scripts/build-npm.sh) in headless Chromium on the CPU backend
// (wasm SIMD, one thread; with --isolate 1 a cross-origin isolated page, which decodes on
// navigator.hardwareConcurrency threads), and `transduce translate` at one thread.
//
//   node scripts/bench/browser.mjs --bin $CARGO_TARGET_DIR/debug/transduce [--sentences 100] [--rounds 3]
//       [--model web/models/en-de] [--relaxed 0]   (0: the SIMD128 kernel, not relaxed SIMD)
//       [--isolate 1]                              (1: the threaded module, every core)
//
// Prints, per setting, source words per second (best and median of the rounds, browser and
// native interleaved) and the browser/native ratio, plus load + first translation with
// the bundle in the Cache API. Sentences: the first N of Multi30k test2016 (English).
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { launchChromium } from "../../tests/support/chromium.mjs";
import { serve } from "../serve.mjs";

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const repo = resolve(new URL("../..", import.meta.url).pathname);
const bin = arg("bin");
if (!bin) throw new Error("--bin (the native transduce binary) is required");
const count = Number(arg("sentences", 100));
const rounds = Number(arg("rounds", 3));
const model = arg("model", "web/models/en-de");
const relaxedSimd = arg("relaxed", "1") !== "0";
const isolate = arg("isolate", "0") === "1";
const data = join(repo, "..", "shared", "data", "multi30k", "test2016.en.gz");
const sentences = gunzipSync(await readFile(data)).toString("utf8").split("\n").slice(0, count).map((l) => l.trim());
const words = sentences.reduce((n, s) => n + s.split(/\s+/).length, 0);

const scratch = await mkdtemp(join(tmpdir(), "transduce-bench-"));
await writeFile(join(scratch, "index.html"), "<!doctype html><title>bench</title>");
const input = join(scratch, "input.en");
await writeFile(input, sentences.join("\n") + "\n");
const server = await serve({ mounts: { "/": repo, "/bench/": scratch }, port: 0 });
const base = `http://127.0.0.1:${server.address().port}`;

const chromium = await launchChromium({ timeout: 600_000 });
const { context, userDataDir } = chromium;

/** Opens a page with the package loaded on the CPU; returns the load + first translation time. */
async function open() {
  const page = await context.newPage();
  await page.goto(`${base}/bench/${isolate ? "" : "?isolate=0"}`);
  const ms = await page.evaluate(async ({ model, first, relaxedSimd }) => {
    const started = performance.now();
    const { Transduce } = await import("/pkg/transduce.js");
    window.t = await Transduce.load(`/${model}/`, { backend: "cpu", relaxedSimd });
    await window.t.translate(first, { beam: 1 });
    return performance.now() - started;
  }, { model, first: sentences[0], relaxedSimd });
  return { page, ms };
}

async function browserRun(page, beam, oneText) {
  return page.evaluate(async ({ sentences, beam, oneText }) => {
    const started = performance.now();
    if (oneText) {
      await window.t.translate(sentences.join(" "), { beam });
    } else {
      for (const s of sentences) await window.t.translate(s, { beam });
    }
    return performance.now() - started;
  }, { sentences, beam, oneText });
}

function nativeRun(beam, batch) {
  const started = performance.now();
  const r = spawnSync(bin, ["translate", "--model", join(repo, model), "--input", input, "--beam", String(beam),
    "--batch-size", String(batch), "--threads", "1", "--quiet"], { encoding: "utf8", env: { ...process.env, RAYON_NUM_THREADS: "1" } });
  if (r.status !== 0) throw new Error(r.stderr);
  return performance.now() - started;
}

const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return { best: s[0], median: s[Math.floor(s.length / 2)] };
};
const wps = (ms) => (words / (ms / 1000)).toFixed(0);

/** Resident memory (MB) of this Chromium's processes (its profile folder is in their command lines). */
function chromiumResidentMb() {
  let kb = 0;
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(userDataDir)) continue;
      kb += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
    } catch {
      // The process ended meanwhile.
    }
  }
  return kb / 1024;
}

// Memory: Chromium with a blank page, then with the model loaded (the worker's wasm memory
// is most of the difference).
const blank = await context.newPage();
await blank.goto(`${base}/bench/`);
const residentBefore = chromiumResidentMb();
await blank.close();

// Load + first translation: the first page fills the Cache API, the later ones read it.
const loads = [];
let { page } = await open();
for (let i = 0; i < rounds; i++) {
  await page.close();
  ({ page, ms: loads[i] } = await open());
}

const settings = [
  { name: "greedy, one call per sentence", beam: 1, oneText: false, batch: 1 },
  { name: "greedy, as one text", beam: 1, oneText: true, batch: 16 },
  { name: "beam 4, one call per sentence", beam: 4, oneText: false, batch: 1 },
  { name: "beam 4, as one text", beam: 4, oneText: true, batch: 16 },
];
const device = await page.evaluate(() => {
  const { threads, reason } = window.t.threads ?? { threads: 1 };
  return `${window.t.device}, ${threads > 1 ? `${threads} threads` : reason ?? "one thread"}`;
});
console.log(`${model} on ${device}: ${count} test2016 sentences, ${words} source words; ${rounds} rounds, interleaved\n`);
console.log("| setting | browser words/s (best / median) | native 1 thread, batch | native words/s (best / median) | browser/native (medians) |");
console.log("|---|---|---|---|---|");
for (const s of settings) {
  const b = [];
  const n = [];
  for (let i = 0; i < rounds; i++) {
    b.push(await browserRun(page, s.beam, s.oneText));
    n.push(nativeRun(s.beam, s.batch));
  }
  const [bs, ns] = [stats(b), stats(n)];
  console.log(`| ${s.name} | ${wps(bs.best)} / ${wps(bs.median)} | ${s.batch} | ${wps(ns.best)} / ${wps(ns.median)} | ${(ns.median / bs.median).toFixed(2)} |`);
}
const residentLoaded = chromiumResidentMb();
const { wasmBytes } = await page.evaluate(() => window.t.memory());
const bundleMb = ["config.json", "tokenizer.json", "model.safetensors"]
  .map((f) => statSync(join(repo, model, f)).size)
  .reduce((a, b) => a + b, 0) / 1e6;
console.log(`\nwasm memory after the runs: ${(wasmBytes / 1e6).toFixed(1)} MB (the bundle is ${bundleMb.toFixed(1)} MB; goal for imported models ≤ 1.5 × bundle + 64 MB = ${(1.5 * bundleMb + 64).toFixed(0)} MB)`);
console.log(`\nChromium resident memory: ${residentBefore.toFixed(0)} MB with a blank page, ${residentLoaded.toFixed(0)} MB with the model loaded (+${(residentLoaded - residentBefore).toFixed(0)} MB; the bundle is ${bundleMb.toFixed(1)} MB)`);
const l = stats(loads);
console.log(`\nload + first translation (bundle in the Cache API): best ${l.best.toFixed(0)} ms, median ${l.median.toFixed(0)} ms`);
console.log("(native times include process start and model load)");

await chromium.close();
server.close();
await rm(scratch, { recursive: true, force: true });
