// The parser's tree view: the parse box draws the tree native `transduce parse` gives, on
// the CPU and on WebGPU (constrained decoding, beam 21, on the GPU).
import { join } from "node:path";
import { TIMEOUT, artifacts, assertEqual, step, test } from "../harness.mjs";
import * as references from "../references.mjs";

export const name = "parse";

/** On the CPU session's page, after its translation tests. */
export const onCpu = step(name, async ({ page }) => {
  const expected = await references.expected();
  if (expected.parseNodes) {
    await test("cpu: parse draws the tree native `transduce parse` gives", async () => {
      await page.fill("#parse-input", expected.parseSentence);
      await page.click("#parse");
      await page.waitForSelector("#tree svg", { timeout: TIMEOUT });
      const nodes = await page.locator("#tree svg g.node").count();
      const bracketed = (await page.textContent("#bracketed")).trim();
      assertEqual(bracketed, expected.parseBracketed, "bracketed tree");
      assertEqual(nodes, expected.parseNodes, "SVG tree nodes");
      await page.screenshot({ path: join(artifacts, "cpu-parse.png"), fullPage: true });
    });
  } else {
    console.log("SKIP: no parser bundle in web/models; the parse view was not tested");
  }
});

/** On the WebGPU session's page, after its translation tests. */
export const onWebgpu = step(name, async ({ page }) => {
  const expectedF32 = await references.expectedF32();
  if (expectedF32.parseNodes) {
    await test("webgpu: parse (constrained, beam 21 on the GPU) draws the tree native gives", async () => {
      await page.fill("#parse-input", expectedF32.parseSentence);
      await page.click("#parse");
      await page.waitForSelector("#tree svg", { timeout: TIMEOUT });
      assertEqual((await page.textContent("#bracketed")).trim(), expectedF32.parseBracketed, "bracketed tree");
      const time = await page.textContent("#parse-time");
      if (!/WebGPU/.test(time)) throw new Error(`the parse did not run on WebGPU: ${time}`);
    });
  }
});
