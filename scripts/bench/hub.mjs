// An OPUS-MT model by name in the browser, at opus-mt-en-de's size: the page's files (dist/,
// from the page's build) and the test hub (tests/support/test-hub.mjs) serving a model of that
// shape (scripts/fixtures/marian.py --opus-size DIR) on the loopback, in headless Chromium.
//
//   node scripts/bench/hub.mjs --opus-size DIR [--rounds 3] [--webgpu 1]
//
// With --webgpu 1 the second load is on WebGPU (Chromium's SwiftShader here: its times are
// not a GPU's, its wasm memory is what any GPU's would be).
//
// Prints, per round (a fresh browser profile each: an empty cache):
//   first load by name: download from the loopback, convert, first translation (one sentence, greedy);
//   peak wasm memory of the conversion (its own module) against the f32 weights;
//   wasm memory afterwards (the translating module) against the bundle;
//   second load (a new page, the hub stopped): from the cache to the first translation.
import { statSync } from "node:fs";
import { join, resolve } from "node:path";
import { launchChromium } from "../../tests/support/chromium.mjs";
import { serve } from "../serve.mjs";
import { startHub } from "../../tests/support/test-hub.mjs";

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const repo = resolve(new URL("../..", import.meta.url).pathname);
const opusSize = arg("opus-size");
if (!opusSize) throw new Error("--opus-size DIR (scripts/fixtures/marian.py --opus-size DIR) is required");
const rounds = Number(arg("rounds", 3));
const webgpu = arg("webgpu", "0") === "1";
const f32Bytes = statSync(join(opusSize, "model.safetensors")).size;
const server = await serve({ mounts: { "/": join(repo, "dist") }, port: 0 });
const base = `http://127.0.0.1:${server.address().port}`;
const reference = "hf:opus-size/opus-mt-en-de";
const sentence = "Where is the nearest train station?";
const MB = (b) => (b / 1e6).toFixed(1);

for (let round = 1; round <= rounds; round++) {
  const hub = await startHub({ opusSize });
  const chromium = await launchChromium({ extraFlags: webgpu ? ["--enable-unsafe-webgpu"] : [], timeout: 600_000 });
  const { context } = chromium;
  const load = async (backend = "cpu") => {
    const page = await context.newPage();
    await page.goto(`${base}/index.html?backend=cpu`);
    const out = await page.evaluate(async ({ reference, hub, sentence, backend }) => {
      const started = performance.now();
      const { Transduce } = await import("/transduce.js");
      const t = await Transduce.load(reference, { hub, backend });
      const loaded = performance.now() - started;
      await t.translate(sentence, { beam: 1 });
      const total = performance.now() - started;
      const memory = await t.memory();
      const { readCachedBundle } = await import("/hub.js");
      const b = await readCachedBundle(reference, hub);
      const bundleBytes = b ? b.config.length + b.tokenizer.length + b.weights.length : NaN;
      const info = { loaded, total, wasmBytes: memory.wasmBytes, bundleBytes, hub: t.hub, backend: t.backend };
      t.free();
      return info;
    }, { reference, hub: hub.url, sentence, backend });
    await page.close();
    return out;
  };
  const first = await load();
  await hub.close();
  const second = await load(webgpu ? "webgpu" : "cpu");
  const peak = first.hub.conversion?.peakWasmBytes ?? NaN;
  console.log(
    `round ${round}: first load by name ${(first.total / 1000).toFixed(2)} s (ready ${(first.loaded / 1000).toFixed(2)} s); ` +
      `conversion ${(first.hub.conversion?.ms / 1000).toFixed(2)} s, peak wasm ${MB(peak)} MB = ${(peak / f32Bytes).toFixed(2)} × the f32 weights (${MB(f32Bytes)} MB); ` +
      `wasm afterwards ${MB(first.wasmBytes)} MB for a ${MB(first.bundleBytes)} MB bundle (${((first.wasmBytes - 64e6) / first.bundleBytes).toFixed(2)} × bundle + 64 MB); second load (hub stopped, ${second.backend}) ${(second.total / 1000).toFixed(2)} s, offline ${second.hub.offline}, wasm ${MB(second.wasmBytes)} MB (${((second.wasmBytes - 64e6) / first.bundleBytes).toFixed(2)} × bundle + 64 MB)`,
  );
  await chromium.close();
}
server.close();
