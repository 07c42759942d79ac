// The WebGPU backend (SwiftShader here): the page loads its own wasm module, translates as
// native `--compute f32` does (greedy and the GPU decoder's beam 4; a paragraph on one other
// translator, the other direction), comes back whole on the CPU when the GPU is lost mid-paragraph, and, forced
// where there is no WebGPU, says so instead of falling back.
import { join } from "node:path";
import {
  RELAXED_WASM,
  WEBGPU_WASM,
  artifacts,
  assertEqual,
  assertModules,
  openPage,
  step,
  test,
  translateGreedy,
  translateWith,
  waitReady,
} from "../harness.mjs";
import * as references from "../references.mjs";

export const name = "webgpu";

/** On the WebGPU session's page (backend=webgpu). */
export const translate = step(name, async ({ b, page }) => {
  const expectedF32 = await references.expectedF32();
  await test("webgpu: page loads the model on WebGPU, from the WebGPU wasm module", async () => {
    await waitReady(page, "webgpu");
    assertModules(page, [WEBGPU_WASM, RELAXED_WASM]);
  });
  await test("webgpu: greedy translation equals the CPU's and native", async () => {
    assertEqual(await translateGreedy(page, expectedF32.sentence), expectedF32.greedy, "translation");
    await page.screenshot({ path: join(artifacts, "webgpu-translate.png"), fullPage: true });
  });
  await test("webgpu: eight sentences as one text, beam 4, equal native beam 4 (GPU decoder's beam search)", async () => {
    assertEqual(await translateWith(page, expectedF32.eight.join(" "), 4), expectedF32.longText4, "beam 4 paragraph");
    const badge = await page.getAttribute("#badge", "data-backend");
    assertEqual(badge, "webgpu", "backend after the paragraph");
  });
  // One other translator (another vocabulary and direction), not all of them: on
  // SwiftShader each paragraph costs about a minute, and the GPU decoder has no path that
  // depends on which translator it runs (the CPU tests decode every listed one).
  const other = expectedF32.others.find((o) => o.id === expectedF32.reverse?.id) ?? expectedF32.others[0];
  if (other) {
    await test(`webgpu: ${other.id} decodes a paragraph on the GPU as native does, greedy`, async () => {
      const p = await openPage(b.context, `backend=webgpu&model=${other.id}`);
      await waitReady(p, "webgpu");
      assertEqual(await translateWith(p, other.text, 1), other.beam1, `${other.id}, greedy`);
      await p.close();
    });
  }
});

/** On the WebGPU session's page, after the parse. */
export const deviceLost = step(name, async ({ page }) => {
  const expectedF32 = await references.expectedF32();
  await test("webgpu: the GPU lost mid-paragraph: the paragraph comes back whole, equal to the CPU's, badge on CPU", async () => {
    await page.fill("#beam", "1");
    const text = Array.from({ length: 3 }, () => expectedF32.eight.join(" ")).join(" ");
    const { result, before } = await page.evaluate(async (text) => {
      const engine = window.transduceDemo.translator.engine;
      const before = engine.backend;
      const translating = engine.translate(text, { beam: 1 });
      // The worker takes this between two batches of the paragraph (16 sentences each).
      await engine.loseDevice();
      return { result: await translating, before };
    }, text);
    assertEqual(before, "webgpu", "backend before the loss");
    assertEqual(result.text, Array.from({ length: 3 }, () => expectedF32.longText1).join(" "), "paragraph");
    assertEqual(result.backend, "cpu", "backend after the loss");
    if (!/GPU failed/.test(result.why ?? "")) throw new Error(`no reason given: ${result.why}`);
    // The page's own next request shows the change on the badge.
    await translateGreedy(page, expectedF32.sentence);
    const badge = await page.textContent("#badge");
    if (!/^CPU · the GPU failed/.test(badge)) throw new Error(`badge: ${badge}`);
  });
});

/** In the browser without WebGPU, on a page of its own. */
export const forcedWithoutWebgpu = step(name, async ({ b }) => {
  await test("webgpu forced without WebGPU: a clear error, no silent fallback", async () => {
    const forced = await openPage(b.context, "backend=webgpu");
    await forced.waitForSelector("#error:not([hidden])");
    const text = await forced.textContent("#error");
    if (!/WebGPU/.test(text)) throw new Error(`unclear error: ${text}`);
    const backend = await forced.getAttribute("#badge", "data-backend");
    if (backend) throw new Error(`a model was loaded on ${backend}`);
  });
}, { ownPage: true });
