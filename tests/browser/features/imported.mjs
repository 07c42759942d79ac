// An OPUS-MT model brought by its user: tests/fixtures/marian's swish model, imported by the
// native binary (`transduce import`), loads through the npm package's API and translates
// every reference sentence exactly as transformers' `generate` did (beam 4 with the
// bundle's own |Y|^α defaults, and greedy), on the CPU and on WebGPU.
import { execFileSync } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { arg, assertEqual, repo, step, test } from "../harness.mjs";

export const name = "imported";

const fixture = join(repo, "tests/fixtures/marian/swish");

/** The imported bundles (f32 and int8), served at /imported/ and /imported-int8/. */
export async function mount(scratch) {
  const bundles = {};
  for (const [path, weights] of [["imported", "f32"], ["imported-int8", "int8"]]) {
    const out = join(scratch, path);
    execFileSync(arg("bin"), ["import", fixture, "--out", out, "--weights", weights, "--source", "en", "--target", "de"], {
      stdio: ["ignore", "ignore", "inherit"],
    });
    bundles[`/${path}/`] = out;
  }
  return bundles;
}

async function references() {
  const reference = JSON.parse(await readFile(join(fixture, "reference.json"), "utf8"));
  return reference.generate.map((c) => ({ text: c.text, beam4: c.beam4.text, greedy: c.greedy.text }));
}

/** Every reference sentence, beam 4 and greedy, through `backend`; the outputs. */
async function translateAll(page, url, backend, cases) {
  return page.evaluate(
    async ({ url, backend, cases }) => {
      const { Transduce } = await import("/transduce.js");
      const t = await Transduce.load(url, { backend });
      const out = { backend: t.backend, beam4: [], greedy: [] };
      for (const c of cases) {
        out.beam4.push((await t.translate(c.text)).text);
        out.greedy.push((await t.translate(c.text, { beam: 1 })).text);
      }
      t.free();
      return out;
    },
    { url, backend, cases },
  );
}

function compare(found, cases, what) {
  const wrong = [];
  cases.forEach((c, i) => {
    if (found.beam4[i] !== c.beam4) wrong.push(`beam 4, ${JSON.stringify(c.text)}: ${JSON.stringify(found.beam4[i])}, want ${JSON.stringify(c.beam4)}`);
    if (found.greedy[i] !== c.greedy) wrong.push(`greedy, ${JSON.stringify(c.text)}: ${JSON.stringify(found.greedy[i])}, want ${JSON.stringify(c.greedy)}`);
  });
  if (wrong.length) throw new Error(`${what}:\n${wrong.join("\n")}`);
}

/** On the CPU session's page: the f32 import, and the int8 one (the swish model keeps every output in int8). */
export const onCpu = step(name, async ({ page }) => {
  const cases = await references();
  await test("imported: an OPUS-MT model imported by the CLI translates as transformers on the CPU", async () => {
    for (const url of ["/imported/", "/imported-int8/"]) {
      const found = await translateAll(page, url, "cpu", cases);
      assertEqual(found.backend, "cpu", `${url} backend`);
      compare(found, cases, url);
    }
  }, { needsTestServer: true });
});

/** On the WebGPU session's page (SwiftShader): the GPU decoder. */
export const onWebgpu = step(name, async ({ page }) => {
  const cases = await references();
  await test("imported: an OPUS-MT model imported by the CLI translates as transformers on WebGPU", async () => {
    // Six sentences (a language code, an emoji, German through the English model, three
    // Tatoeba ones): SwiftShader takes about 4 s a sentence for both searches.
    const few = cases.slice(0, 6);
    const found = await translateAll(page, "/imported/", "webgpu", few);
    assertEqual(found.backend, "webgpu", "backend");
    compare(found, few, "webgpu");
  }, { needsTestServer: true });
});
