// Bundles the page cannot load: a corrupt copy of the shipped one (same config.json, the
// weights cut in half) and a URL with nothing there each give a clear error.
import { cp, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { artifacts, dist, external, openPage, step, test } from "../harness.mjs";
import { MODEL } from "../references.mjs";

export const name = "bundles";

/** The corrupt bundle, served at /corrupt/ (only by the test server: not with --url). */
export async function mount(scratch) {
  const corrupt = join(scratch, "corrupt");
  if (!external) {
    await cp(join(dist, "models", MODEL), corrupt, { recursive: true });
    const weights = await readFile(join(corrupt, "model.safetensors"));
    await writeFile(join(corrupt, "model.safetensors"), weights.subarray(0, weights.length >> 1));
  }
  return { "/corrupt/": corrupt };
}

/** In the CPU session's browser, each on a page of its own. */
export const pageErrors = step(name, async ({ b }) => {
  await test("cpu: a corrupt bundle shows a clear error", async () => {
    const bad = await openPage(b.context, "backend=cpu&model=/corrupt/");
    await bad.waitForSelector("#error:not([hidden])");
    const text = await bad.textContent("#error");
    if (!/sha256|corrupt|truncated/.test(text)) throw new Error(`unclear error: ${text}`);
    await bad.screenshot({ path: join(artifacts, "corrupt-bundle.png") });
  }, { needsTestServer: true });
  await test("cpu: a bundle URL that does not exist shows a clear error", async () => {
    const bad = await openPage(b.context, "backend=cpu&model=/no-such-model/");
    await bad.waitForSelector("#error:not([hidden])");
    const text = await bad.textContent("#error");
    if (!/no-such-model\/config\.json.*404/.test(text)) throw new Error(`unclear error: ${text}`);
  });
}, { ownPage: true });
