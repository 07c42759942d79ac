// Adaptation: the visitor's sentence pairs, learned in the page's worker (the Adapt
// panel): the term learned, the adapted model kept across reloads and reset, Cancel, a
// closed tab and bad pairs changing nothing, wasm and native `transduce adapt` agreeing,
// and the npm README's snippet adapting through the package.
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  CPU_WASM,
  CPU_RELAXED_WASM,
  TIMEOUT,
  artifacts,
  assertEqual,
  assertModules,
  base,
  openPage,
  repo,
  step,
  test,
  translateWith,
  waitReady,
} from "../harness.mjs";
import * as references from "../references.mjs";

export const name = "adapt";

/** The npm README's adaptation snippet, as a page of its own at /npm-adapt/ over the package in pkg/. */
export async function mount(scratch) {
  const npmAdapt = join(scratch, "npm-adapt");
  const text = await readFile(join(repo, "web", "NPM-README.md"), "utf8");
  const snippet = text.slice(text.indexOf("Teach a translator your own words")).match(/```js\n([\s\S]*?)```/)?.[1];
  if (!snippet) throw new Error("web/NPM-README.md: no js snippet after \"Teach a translator your own words\"");
  const code = snippet.replaceAll('"/models/', '"/repo/web/models/').replace('"/wien.pairs.tsv"', '"/repo/tests/fixtures/adapt/wien.pairs.tsv"');
  await mkdir(npmAdapt, { recursive: true });
  await writeFile(
    join(npmAdapt, "index.html"),
    `<!doctype html>\n<meta charset="utf-8">\n<script type="module">\nimport { Transduce } from "/repo/pkg/transduce.js";\ntry {\n${code}\n} catch (e) { console.log("error: " + e.message); }\nconsole.log("done");\n</script>\n`,
  );
  return { "/npm-adapt/": npmAdapt };
}

/** On the session's page (backend=cpu&model=de-en), in order: each test starts where the last left the page. */
export const panel = step(name, async ({ b, page }) => {
  const adaptation = await references.adaptation();
  const beam = () => page.inputValue("#beam").then(Number);
  const translateAll = async (lines) => (await translateWith(page, lines.join("\n"), await beam())).split("\n");
  const vienna = (lines) => lines.filter((l) => l.includes("Vienna")).length;
  let adapted = null;
  await test("adapt: the Adapt panel teaches de-en a term; unseen sentences now say it, in under a minute", async () => {
    await waitReady(page, "cpu");
    assertEqual((await translateAll(adaptation.unseen)).join("\n"), adaptation.shipped.join("\n"), "shipped translations");
    assertEqual(vienna(adaptation.shipped), 0, "sentences saying Vienna before adapting");
    await page.fill("#adapt-pairs", adaptation.pairs);
    assertEqual(await page.textContent("#adapt-count"), "40 pairs", "the pair count");
    const started = Date.now();
    await page.click("#adapt");
    await page.waitForSelector("#adapt-progress:not([hidden])");
    await page.waitForSelector("#adapted:not([hidden])");
    const seconds = (Date.now() - started) / 1000;
    const status = await page.textContent("#adapt-status");
    if (!/^Adapted on 40 pairs in [0-9.]+ s; kept in this browser for this model/.test(status)) throw new Error(`status: ${status}`);
    assertEqual(await page.textContent("#adapted"), "adapted · 40 pairs", "badge");
    adapted = await translateAll(adaptation.unseen);
    const hits = vienna(adapted);
    console.log(`adapt: ${seconds.toFixed(1)} s in the page; ${hits} of ${adapted.length} unseen sentences say Vienna`);
    if (hits * 10 < adapted.length * 9) throw new Error(`${hits} of ${adapted.length} say Vienna:\n${adapted.join("\n")}`);
    if (seconds > 120) throw new Error(`adapting took ${seconds} s`);
    await page.screenshot({ path: join(artifacts, "adapt.png"), fullPage: true });
    assertModules(page, [CPU_WASM, CPU_RELAXED_WASM, "transduce-adapt_bg.wasm"]);
  });
  await test("adapt: the adapted model survives a reload; Reset restores the shipped outputs exactly, and that survives too", async () => {
    if (!adapted) throw new Error("the adaptation test failed");
    await page.reload();
    await waitReady(page, "cpu");
    await page.waitForSelector("#adapted:not([hidden])");
    assertEqual((await translateAll(adaptation.unseen)).join("\n"), adapted.join("\n"), "translations after a reload");
    await page.click("#adapt-reset");
    await page.waitForSelector("#adapted", { state: "hidden" });
    assertEqual((await translateAll(adaptation.unseen)).join("\n"), adaptation.shipped.join("\n"), "translations after Reset");
    await page.reload();
    await waitReady(page, "cpu");
    assertEqual(await page.isHidden("#adapted"), true, "badge hidden after Reset and a reload");
    assertEqual((await translateAll(adaptation.unseen.slice(0, 3))).join("\n"), adaptation.shipped.slice(0, 3).join("\n"), "shipped after a reload");
  });
  await test("adapt: Cancel, a closed tab and bad pairs leave the model and the store as they were; bad pairs get one error naming the line", async () => {
    await page.fill("#adapt-pairs", adaptation.pairs);
    await page.click("#adapt");
    await page.waitForFunction(() => /^Step [1-9]/.test(document.getElementById("adapt-status").textContent));
    await page.click("#adapt-cancel");
    await page.waitForFunction(() => document.getElementById("adapt-status").textContent.startsWith("Cancelled"));
    assertEqual(await page.isHidden("#adapted"), true, "badge after Cancel");
    assertEqual((await translateAll(adaptation.unseen.slice(0, 3))).join("\n"), adaptation.shipped.slice(0, 3).join("\n"), "after Cancel");
    await page.fill("#adapt-pairs", "Wo ist Wien?\tWhere is Vienna?\nIch wohne in Wien. I live in Vienna.\n");
    await page.click("#adapt");
    await page.waitForSelector("#error:not([hidden])");
    const error = await page.textContent("#error");
    assertEqual(error, "Adaptation failed: your pairs, line 2: no tab: write the source sentence, a tab, then its translation", "error");
    await page.reload();
    await waitReady(page, "cpu");
    assertEqual(await page.isHidden("#adapted"), true, "nothing stored by a cancelled or refused adaptation");
    // A tab closed mid-adaptation stores nothing either.
    const closing = await openPage(b.context, "backend=cpu&model=de-en");
    await waitReady(closing, "cpu");
    await closing.fill("#adapt-pairs", adaptation.pairs);
    await closing.click("#adapt");
    await closing.waitForFunction(() => /^Step [2-9]/.test(document.getElementById("adapt-status").textContent));
    await closing.close();
    await page.reload();
    await waitReady(page, "cpu");
    assertEqual(await page.isHidden("#adapted"), true, "nothing stored by a tab closed mid-adaptation");
    // "Add this pair": the text being translated and its corrected translation, as one line.
    await page.fill("#adapt-pairs", "");
    await page.fill("#source", "Tom arbeitet in Wien.");
    await page.fill("#adapt-correct", "Tom works in Vienna.");
    await page.click("#adapt-add");
    assertEqual(await page.inputValue("#adapt-pairs"), "Tom arbeitet in Wien.\tTom works in Vienna.\n", "the added pair");
    assertEqual(await page.textContent("#adapt-count"), "1 pair", "the pair count");
  });
  await test("adapt: wasm and native `transduce adapt` agree over 10 steps: losses within 5e-4 at every step, the same f32 model's translations", async () => {
    const found = await page.evaluate(async ({ pairs, sentences }) => {
      const m = await import("/transduce-adapt.js");
      await m.default();
      const get = async (file) => new Uint8Array(await (await fetch(`/models/de-en/${file}`)).arrayBuffer());
      const [config, tokenizer, weights, replay] = await Promise.all(["config.json", "tokenizer.json", "model.safetensors", "replay.tsv"].map(get));
      const a = new m.Adaptation(config, tokenizer, weights, new TextEncoder().encode(pairs), "pairs", replay, "replay.tsv", { steps: 10 });
      const losses = [];
      for (let i = 0; i < a.steps; i++) losses.push(a.step().loss);
      const out = a.finish("f32");
      a.free();
      const cpu = await import("/transduce-web.js");
      await cpu.default();
      const engine = await cpu.Engine.load(out.config, out.tokenizer, out.weights, "cpu");
      const results = await engine.translateBatch(sentences, undefined);
      engine.free();
      return { losses, translations: results.map((r) => r.target) };
    }, { pairs: adaptation.pairs, sentences: adaptation.sentences });
    assertEqual(found.losses.length, adaptation.losses.length, "steps");
    const gaps = found.losses.map((loss, i) => Math.abs(loss - adaptation.losses[i]) / adaptation.losses[i]);
    console.log(`adapt: wasm against native loss, relative gap by step: ${gaps.map((g) => g.toExponential(1)).join(" ")}`);
    // Not bit-identical (docs/RESULTS.md, "Adaptation"): native's matrix products fuse each
    // multiply-add (one rounding) over 16 lanes, wasm SIMD128's round twice over 4, and Adam
    // turns last-bit differences in near-zero gradients into whole steps of the learning rate.
    // Measured gaps: below 3.5e-5 of the loss over the recipe's 30 steps (2.3e-4 under an earlier
    // recipe).
    gaps.forEach((gap, i) => {
      if (gap > 5e-4) throw new Error(`step ${i + 1}: wasm ${found.losses[i]}, native ${adaptation.losses[i]}`);
    });
    assertEqual(found.translations.join("\n"), adaptation.f32.join("\n"), "translations of the f32 models");
  });
  await test("adapt: the npm README's snippet adapts through the package, translates the term, and resets", async () => {
    const page = await b.context.newPage();
    const logs = [];
    page.on("console", (m) => logs.push(m.text()));
    await page.goto(`${base}/npm-adapt/`);
    await page.waitForFunction(() => true);
    for (let waited = 0; !logs.includes("done") && waited < TIMEOUT; waited += 250) await new Promise((r) => setTimeout(r, 250));
    const lines = logs.filter((l) => !/^\d+ 30 /.test(l));
    const steps = logs.filter((l) => /^\d+ 30 /.test(l)).length;
    assertEqual(lines.join("\n"), "Tom works in mires.\n40 Tom works in Vienna.\ndone", "console");
    assertEqual(steps, 30, "progress reports");
  }, { needsTestServer: true });
});
