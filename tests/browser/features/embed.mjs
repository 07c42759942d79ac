// The npm package embedded by a third-party page: examples/embed loads it and translates
// as native does.
import { join } from "node:path";
import { TIMEOUT, artifacts, assertEqual, base, step, test } from "../harness.mjs";
import * as references from "../references.mjs";

export const name = "embed";

export const example = step(name, async ({ b }) => {
  const expected = await references.expected();
  await test("embed: examples/embed loads the npm package and translates", async () => {
    const page = await b.context.newPage();
    const logs = [];
    page.on("console", (m) => logs.push(m.text()));
    await page.goto(`${base}/repo/examples/embed/index.html?beam=1`);
    try {
      await page.waitForSelector("#out[data-done]", { timeout: TIMEOUT });
    } catch (e) {
      throw new Error(`${e.message}\n${logs.join("\n")}`);
    }
    const input = (await page.textContent("#in")).trim();
    assertEqual((await page.textContent("#out")).trim(), expected.nativeGreedy(input), "embedded translation");
    await page.screenshot({ path: join(artifacts, "embed.png") });
  }, { needsTestServer: true });
}, { ownPage: true });
