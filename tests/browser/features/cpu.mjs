// Translation on the CPU backend (?backend=cpu): the wasm modules fetched, relaxed SIMD, the
// threads of an isolated page and the one thread of a page that is not,
// greedy and beam 4 equal to native, the example buttons, ⇄, every other listed
// translator, the noisy-channel check box, a main thread that stays responsive, and inputs
// that are empty or 10,000 characters long.
import { join } from "node:path";
import {
  CPU_WASM,
  CPU_RELAXED_WASM,
  ONE_THREAD_WASM,
  RELAXED_WASM,
  THREADED,
  artifacts,
  assertEqual,
  assertModules,
  openPage,
  skip,
  step,
  test,
  translateGreedy,
  translateWith,
  waitReady,
} from "../harness.mjs";
import * as references from "../references.mjs";

export const name = "cpu";

/** Everything up to the responsiveness test, on the session's page (backend=cpu). */
export const translate = step(name, async ({ b, page }) => {
  const expected = await references.expected();
  await test("cpu: page loads the shipped model on the CPU backend", () => waitReady(page, "cpu"));
  await test("cpu: only the CPU wasm module (and the relaxed-SIMD kernel) is fetched, not the WebGPU one", async () => {
    assertModules(page, [CPU_WASM, CPU_RELAXED_WASM]);
  });
  await test("cpu: Chromium has relaxed SIMD, and the int8 products use it", async () => {
    const device = await page.getAttribute("#badge", "data-device");
    if (!/int8, relaxed SIMD/.test(device)) throw new Error(`device: ${device}`);
  });
  const threadsTest = "cpu: a cross-origin isolated page decodes on navigator.hardwareConcurrency threads (the threaded module)";
  const cores = await page.evaluate(() => navigator.hardwareConcurrency);
  if (!THREADED) skip(threadsTest, "dist/ has no threaded module: no nightly toolchain with rust-src built it");
  else if (cores < 2) skip(threadsTest, `the browser reports ${cores} core`);
  else {
    await test(threadsTest, async () => {
      assertEqual(await page.evaluate(() => self.crossOriginIsolated), true, "crossOriginIsolated");
      const device = await page.getAttribute("#badge", "data-device");
      if (!device.endsWith(`, ${cores} threads)`)) throw new Error(`device: ${device}`);
      const text = await page.textContent("#badge");
      if (!text.includes(`${cores} threads`)) throw new Error(`badge: ${text}`);
    });
  }
  await test("cpu: greedy translation equals native `transduce translate`", async () => {
    assertEqual(await translateGreedy(page, expected.sentence), expected.greedy, "translation");
    await page.waitForSelector("#heatmap svg rect");
    await page.screenshot({ path: join(artifacts, "cpu-translate.png"), fullPage: true });
  });
  await test("cpu: the example buttons are in the source language and translate as native does", async () => {
    const examples = await page.$$eval("#examples button", (bs) => bs.map((b) => b.textContent));
    if (examples.length < 3) throw new Error(`only ${examples.length} example buttons`);
    const fresh = await openPage(b.context, "backend=cpu");
    await waitReady(fresh, "cpu");
    assertEqual(await fresh.inputValue("#source"), examples[0], "a fresh page's text box");
    await fresh.close();
    await page.fill("#beam", "1");
    await page.evaluate(() => delete document.getElementById("target").dataset.done);
    await page.click("#examples button >> nth=0");
    await page.waitForSelector('#target[data-done="true"]');
    assertEqual((await page.textContent("#target")).trim(), expected.nativeGreedy(examples[0]), examples[0]);
  });
  if (expected.reverse) {
    await test(`cpu: ⇄ switches to ${expected.reverse.id} and translates the output back as native does`, async () => {
      const german = expected.nativeGreedy(expected.sentence);
      assertEqual(await translateGreedy(page, expected.sentence), german, "forward translation");
      // ⇄ moves a finished translation only; it clears the output before loading, so the
      // next finished output is the back-translation.
      const swapped = (id) =>
        page.waitForFunction(
          (id) => document.getElementById("model").value === id && document.getElementById("target").dataset.done === "true",
          id,
        );
      await page.click("#swap");
      await swapped(expected.reverse.id);
      assertEqual(await page.inputValue("#model"), expected.reverse.id, "model after ⇄");
      assertEqual(await page.inputValue("#source"), german, "the output moved into the input");
      // The page translates with the beam box, which the reverse bundle's default now fills.
      const beam = await page.inputValue("#beam");
      assertEqual((await page.textContent("#target")).trim(), expected.reverse.translate(german, beam), "back-translation");
      const examples = await page.$$eval("#examples button", (bs) => bs.map((b) => b.textContent));
      assertEqual(await page.$eval("#source", (e) => e.lang), expected.reverse.source, "source language");
      if (!examples.length) throw new Error(`no example sentences for ${expected.reverse.source}`);
      await page.click("#swap");
      await swapped(expected.model);
      await waitReady(page, "cpu");
      assertEqual(await page.inputValue("#model"), expected.model, "model after ⇄ twice");
    });
  } else {
    console.log(`SKIP: web/models/index.json lists no translator the other way from ${expected.model}; ⇄ was not tested`);
  }
  await test("cpu: a paragraph decoded as one batch equals native, sentence by sentence", async () => {
    for (const beam of [1, 4]) {
      assertEqual(await translateWith(page, expected.longText, beam), expected[`longText${beam}`], `beam ${beam}`);
    }
  });
  await test("cpu: a page that is not cross-origin isolated decodes on one thread, says why, and gives the same paragraph", async () => {
    const p = await openPage(b.context, "backend=cpu&isolate=0");
    await waitReady(p, "cpu");
    assertEqual(await p.evaluate(() => self.crossOriginIsolated), false, "crossOriginIsolated");
    const text = await p.textContent("#badge");
    if (!text.includes("one thread: the page is not cross-origin isolated")) throw new Error(`badge: ${text}`);
    assertModules(p, [ONE_THREAD_WASM, RELAXED_WASM]);
    for (const beam of [1, 4]) {
      assertEqual(await translateWith(p, expected.longText, beam), expected[`longText${beam}`], `beam ${beam}`);
    }
    await p.close();
  }, { needsTestServer: true });
  await test("cpu: without relaxed SIMD (?relaxed=0) the SIMD128 kernel gives the same paragraph", async () => {
    const p = await openPage(b.context, "backend=cpu&relaxed=0");
    await waitReady(p, "cpu");
    const device = await p.getAttribute("#badge", "data-device");
    if (!/\(int8(, \d+ threads)?\)$/.test(device)) throw new Error(`device: ${device}`);
    for (const beam of [1, 4]) {
      assertEqual(await translateWith(p, expected.longText, beam), expected[`longText${beam}`], `beam ${beam}`);
    }
    await p.close();
  });
  for (const other of expected.others) {
    await test(`cpu: ${other.id} (?model=${other.id}) decodes a paragraph as native does, greedy and beam 4`, async () => {
      const p = await openPage(b.context, `backend=cpu&model=${other.id}`);
      await waitReady(p, "cpu");
      assertEqual(await p.inputValue("#model"), other.id, "the model chosen by ?model=");
      for (const beam of [1, 4]) {
        assertEqual(await translateWith(p, other.text, beam), other[`beam${beam}`], `${other.id}, beam ${beam}`);
      }
      await p.close();
    });
  }
  if (expected.channel) {
    await test(`cpu: ?channel=1 checks with ${expected.channel.id} and translates as native \`translate --channel\` does`, async () => {
      if (!expected.channel.changed) throw new Error("the check changed none of 60 native outputs; pick other sentences");
      const p = await openPage(b.context, "backend=cpu&channel=1");
      await waitReady(p, "cpu");
      assertEqual(await p.isChecked("#channel"), true, "the check box");
      assertEqual(await p.isVisible("#channel-box"), true, "the check box shown");
      const beam = await p.inputValue("#beam");
      assertEqual(await translateWith(p, expected.channel.text, beam), expected.channel.want, "checked translation");
      const time = await p.textContent("#time");
      if (!time.includes(`checked by ${expected.channel.id}`)) throw new Error(`time: ${time}`);
      // Unticked: the page reloads without the reverse model and decodes as plain native.
      await p.uncheck("#channel");
      await waitReady(p, "cpu");
      await p.waitForFunction(() => window.transduceDemo.translator?.channel === null);
      assertEqual(await translateWith(p, expected.channel.text, beam), expected.channel.plain, "plain translation");
      await p.close();
    });
  } else {
    console.log(`SKIP: ${expected.model} records no listed channel model; the page's check was not tested`);
  }
  await test("cpu: the main thread stays responsive while translating", async () => {
    // Timer gaps on the page while the worker decodes a long text with beam 4.
    await page.fill("#beam", "4");
    // Eight times the long text: most of a second of decoding, so that a main thread blocked
    // for the whole translation stands out from a busy machine's late timers.
    await page.fill("#source", Array.from({ length: 8 }, () => expected.longText).join(" "));
    await page.evaluate(() => {
      delete document.getElementById("target").dataset.done;
      window.__gaps = { last: performance.now(), max: 0 };
      window.__tick = setInterval(() => {
        const now = performance.now();
        window.__gaps.max = Math.max(window.__gaps.max, now - window.__gaps.last);
        window.__gaps.last = now;
      }, 10);
    });
    const started = Date.now();
    await page.click("#translate");
    await page.waitForSelector('#target[data-done="true"]');
    const took = Date.now() - started;
    const gap = await page.evaluate(() => (clearInterval(window.__tick), window.__gaps.max));
    const lines = (await page.textContent("#target")).trim();
    if (!lines) throw new Error("empty translation of the long text");
    // Decoding on the main thread would block it for most of the translation; a busy
    // machine (a build beside the browser) delays single timers by a few hundred ms.
    if (gap > took / 2) {
      throw new Error(`main thread blocked for ${gap.toFixed(0)} ms during a ${took} ms translation`);
    }
    console.log(`    longest main-thread gap ${gap.toFixed(0)} ms during ${took} ms of translation`);
  });
});

/** Empty and huge inputs, last on the page: the module must survive them. */
export const stress = step(name, async ({ page }) => {
  const expected = await references.expected();
  await test("cpu: empty and 10,000-character inputs give results or errors, never a dead module", async () => {
    await page.fill("#source", "   ");
    await page.click("#translate");
    await page.waitForSelector("#error:not([hidden])");
    const empty = await page.textContent("#error");
    if (!/empty/.test(empty)) throw new Error(`empty text: ${empty}`);
    await page.waitForSelector("#translate:not([disabled])");
    // 10,000 characters without a sentence end: translated in pieces, streamed.
    const words = expected.longText.split(/\s+/);
    const huge = Array.from({ length: 2000 }, (_, i) => words[i % words.length]).join(" ").slice(0, 10_000);
    await page.fill("#beam", "1");
    await page.fill("#source", huge);
    await page.evaluate(() => {
      delete document.getElementById("target").dataset.done;
      document.getElementById("error").hidden = true;
    });
    const started = Date.now();
    await page.click("#translate");
    await page.waitForFunction(
      () => document.getElementById("target").dataset.done || !document.getElementById("error").hidden,
      null,
      { timeout: 600_000 },
    );
    const error = await page.evaluate(() => {
      const e = document.getElementById("error");
      return e.hidden ? "" : e.textContent;
    });
    const out = (await page.textContent("#target")).trim();
    if (!error && out.length < 1000) throw new Error(`10,000 characters gave only ${out.length} characters`);
    console.log(`    10,000 characters: ${error ? `error "${error}"` : `${out.length} characters out`} in ${Date.now() - started} ms`);
    // The module must still work afterwards.
    assertEqual(await translateGreedy(page, expected.sentence), expected.greedy, "translation after stress");
  });
});
