// The backend chosen by ?backend=auto: measured on SwiftShader (?calibrate=1) the CPU
// wins; a software WebGPU adapter alone, or no WebGPU at all, means the CPU, and the badge
// says why.
import { CPU_WASM, CPU_RELAXED_WASM, assertEqual, assertModules, openPage, step, test, translateGreedy, waitReady } from "../harness.mjs";
import * as references from "../references.mjs";

export const name = "auto";

/** In the WebGPU session's browser (SwiftShader), each on a page of its own. */
export const onSwiftShader = step(name, async ({ b }) => {
  const expectedF32 = await references.expectedF32();
  // Measured on one sentence: the paragraph's size takes SwiftShader another minute and
  // tests no other path (the sizes are one list, timed alike). SwiftShader is hundreds of
  // times slower than the CPU (22 s against 71 ms), so the choice holds on a loaded machine.
  await test("auto, measured on SwiftShader (?calibrate=1, one sentence): the CPU is faster there and is chosen, the badge says so", async () => {
    const auto = await openPage(b.context, "backend=auto&calibrate=1&calibrate-sizes=1");
    await waitReady(auto, "cpu");
    const badge = await auto.textContent("#badge");
    if (!/measured/.test(badge)) throw new Error(`badge: ${badge}`);
    const calibration = await auto.evaluate(() => window.transduceDemo.translator.engine.calibration);
    assertEqual(Object.keys(calibration.ms).join(), "1", "request sizes measured");
    for (const [n, ms] of Object.entries(calibration.ms)) {
      if (!(ms.cpu < ms.webgpu)) throw new Error(`${n} sentence(s): CPU ${ms.cpu} ms, WebGPU ${ms.webgpu} ms`);
    }
    console.log(`    calibration: ${calibration.reason}`);
    assertEqual(await translateGreedy(auto, expectedF32.sentence), expectedF32.greedy, "translation");
  });
  await test("auto with only a software WebGPU adapter: the CPU is used, and the page says why", async () => {
    const auto = await openPage(b.context, "backend=auto");
    await waitReady(auto, "cpu");
    const badge = await auto.textContent("#badge");
    if (!/software fallback/.test(badge)) throw new Error(`badge: ${badge}`);
    assertModules(auto, [CPU_WASM, CPU_RELAXED_WASM]);
  });
}, { ownPage: true });

/** On the session's page (backend=auto) in a browser without WebGPU. */
export const withoutWebgpu = step(name, async ({ page }) => {
  await test("auto: without WebGPU the page falls back to the CPU and says so", async () => {
    await waitReady(page, "cpu");
    const badge = await page.textContent("#badge");
    if (!/CPU · ./.test(badge)) throw new Error(`badge gives no reason: ${badge}`);
  });
});
