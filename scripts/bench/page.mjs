// A 2,000-word page translated in place (element.js) against the package's own paragraph
// rate, in headless Chromium on the CPU backend, with the npm package (pkg/, from
// scripts/build-npm.sh) and a shipped bundle.
//
//   node scripts/bench/page.mjs [--model web/models/en-de] [--words 2000] [--rounds 2] [--isolate 0|1]
//
// The page: Multi30k test2016's English sentences, five a paragraph, until the words run
// out; every other paragraph has a link and an <em> around words of its first sentence.
// Prints, per round: the model's load; after it, the first block translated (the first
// onProgress) and all blocks in view (translateElement's `ready`); the whole page (lazy:
// false); and the same paragraphs
// through `translate()` one after another (the package's paragraph rate), in source words
// per second, with the ratio page / paragraphs.
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
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
const model = arg("model", "web/models/en-de");
const target = Number(arg("words", 2000));
const rounds = Number(arg("rounds", 2));
const isolate = arg("isolate", "0") === "1";
const data = join(repo, "..", "shared", "data", "multi30k", "test2016.en.gz");
const sentences = gunzipSync(await readFile(data)).toString("utf8").split("\n").map((l) => l.trim()).filter(Boolean);

// Paragraphs of five sentences up to `target` words; markup on every other one.
const paragraphs = [];
let words = 0;
for (let i = 0; words < target && i + 5 <= sentences.length; i += 5) {
  const group = sentences.slice(i, i + 5);
  words += group.join(" ").split(/\s+/).length;
  paragraphs.push(group);
}
const escape = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;");
const html = paragraphs
  .map((group, p) => {
    if (p % 2) return `<p>${escape(group.join(" "))}</p>`;
    const [first, ...rest] = group;
    const w = first.split(" ");
    const marked = [...w.slice(0, 1), `<a href="#p${p}">${escape(w.slice(1, 3).join(" "))}</a>`, ...w.slice(3, 4), `<em>${escape(w.slice(4, 5).join(" "))}</em>`, ...w.slice(5)].join(" ");
    return `<p>${marked} ${escape(rest.join(" "))}</p>`;
  })
  .join("\n");

const scratch = await mkdtemp(join(tmpdir(), "transduce-bench-page-"));
await writeFile(join(scratch, "index.html"), `<!doctype html><html lang="en"><meta charset="utf-8"><title>bench</title><body><article>${html}</article></body></html>`);
const server = await serve({ mounts: { "/": repo, "/bench/": scratch }, port: 0 });
const base = `http://127.0.0.1:${server.address().port}`;
const chromium = await launchChromium({ timeout: 900_000, viewport: { width: 1100, height: 1400 } });

console.log(`page: ${paragraphs.length} paragraphs, ${words} words (${paragraphs.flat().length} sentences); model ${model}; ${isolate ? "every core" : "one thread"}`);
for (let round = 1; round <= rounds; round++) {
  const page = await chromium.context.newPage();
  await page.goto(`${base}/bench/${isolate ? "" : "?isolate=0"}`);
  const r = await page.evaluate(async ({ model, texts }) => {
    const { Transduce } = await import("/pkg/transduce.js");
    const { translateElement } = await import("/pkg/element.js");
    let started = performance.now();
    const t = await Transduce.load(`/${model}/`, { backend: "cpu" });
    const load = performance.now() - started;
    // The paragraph rate: one translate() a paragraph.
    started = performance.now();
    for (const text of texts) await t.translate(text);
    const paragraphs = performance.now() - started;
    // The page in place.
    started = performance.now();
    let first = null;
    const onProgress = () => (first ??= performance.now() - started);
    const page = translateElement(document.querySelector("article"), { to: "de", translator: t, lazy: false, onProgress });
    await page.ready;
    const ready = performance.now() - started;
    await page.idle();
    const whole = performance.now() - started;
    const done = page.progress;
    page.restore();
    t.free();
    return { load, paragraphs, first, ready, whole, done };
  }, { model, texts: paragraphs.map((g) => g.join(" ")) });
  const rate = (ms) => (words / (ms / 1000)).toFixed(1);
  console.log(
    `round ${round}: load ${r.load.toFixed(0)} ms; after it, the first block ${r.first.toFixed(0)} ms, all blocks in view ${r.ready.toFixed(0)} ms; ` +
      `whole page ${(r.whole / 1000).toFixed(2)} s (${rate(r.whole)} words/s, ${r.done.translated}/${r.done.total} blocks); ` +
      `paragraphs ${(r.paragraphs / 1000).toFixed(2)} s (${rate(r.paragraphs)} words/s); page / paragraphs ${(r.paragraphs / r.whole).toFixed(2)}×`,
  );
  await page.close();
}
await chromium.close();
server.close();
await rm(scratch, { recursive: true, force: true });
