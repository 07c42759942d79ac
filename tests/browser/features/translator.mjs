// The Translator API as browsers without one get it: the polyfill (pkg/translator.js)
// that install() defines when the browser has no Translator of its own (Chromium's,
// with Google's on-device models, is switched off by run.mjs for these sessions, so the
// page is what Firefox and Safari users get). The example page, the README's snippet, the
// spec's availability, progress, streaming, abort and error names, `channel: true`, and
// install() beside a browser's own Translator.
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { TIMEOUT, assertEqual, base, repo, skip, step, test } from "../harness.mjs";
import * as references from "../references.mjs";

export const name = "translator";

/** The README's Translator API snippet, as a page of its own at /readme/. */
export async function mount(scratch) {
  const readme = join(scratch, "readme");
  const text = await readFile(join(repo, "README.md"), "utf8");
  const section = text.slice(text.indexOf("## The Translator API"));
  const snippet = section.match(/```html\n([\s\S]*?)```/)?.[1];
  if (!snippet) throw new Error("README.md: no html snippet under \"## The Translator API\"");
  await mkdir(readme, { recursive: true });
  await writeFile(join(readme, "index.html"), `<!doctype html>\n<meta charset="utf-8">\n${snippet}`);
  return { "/readme/": readme };
}

/** examples/translator, in a browser without its own Translator. */
export const example = step(name, async ({ b }) => {
  const expected = await references.expected();
  await test("translator: a page using only Translator.create().translate() gets native's translation", async () => {
    const page = await b.context.newPage();
    const logs = [];
    page.on("console", (m) => logs.push(m.text()));
    await page.goto(`${base}/repo/examples/translator/index.html`);
    try {
      await page.waitForSelector("#out[data-done]", { timeout: TIMEOUT });
    } catch (e) {
      throw new Error(`${e.message}\n${logs.join("\n")}`);
    }
    const input = (await page.textContent("#in")).trim();
    assertEqual((await page.textContent("#out")).trim(), expected.nativeFree(input), "translation");
    assertEqual((await page.textContent("#how")).trim(), "(available)", "availability after create");
  }, { needsTestServer: true });
}, { ownPage: true });

/** The README's snippet, in a browser without its own Translator. */
export const readme = step(name, async ({ b }) => {
  const expected = await references.expected();
  await test("translator: the README's snippet logs availability, progress, native's translation and the streamed sentences", async () => {
    const page = await b.context.newPage();
    const logs = [];
    page.on("console", (m) => m.type() === "log" && logs.push(m.text()));
    page.on("pageerror", (e) => logs.push(`pageerror: ${e.message}`));
    await page.goto(`${base}/readme/index.html`);
    const streamed = ["A man rides a bike.", "A dog runs."].map(expected.nativeFree);
    const want = [expected.nativeFree("Two dogs are running through the snow."), streamed[0], ` ${streamed[1]}`];
    // The snippet ends with the last streamed sentence (or an error).
    const deadline = Date.now() + TIMEOUT;
    while (!logs.includes(want[2]) && !logs.some((l) => l.startsWith("pageerror")) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    const percents = logs.filter((l) => /^\d+%$/.test(l));
    const rest = logs.filter((l) => !/^\d+%$/.test(l));
    assertEqual(JSON.stringify(rest), JSON.stringify(["downloadable", ...want]), "console output");
    if (percents[0] !== "0%" || percents.at(-1) !== "100%") throw new Error(`progress: ${percents.join(" ")}`);
  }, { needsTestServer: true });
}, { ownPage: true });

/** The spec's behaviour, in a browser without its own Translator and with a fresh profile (nothing in the Cache API yet). */
export const spec = step(name, async ({ b }) => {
  const expected = await references.expected();
  await test("translator: availability, progress, streaming in order, abort, errors by the spec's names", async () => {
    const page = await b.context.newPage();
    await page.goto(`${base}/models/index.json`);
    const found = await page.evaluate(async ({ sources }) => {
      const hadNative = typeof globalThis.Translator !== "undefined";
      const { install } = await import("/repo/pkg/translator.js");
      const installed = install({ models: { "en-de": "/repo/web/models/en-de/" }, backend: "cpu" });
      const T = globalThis.Translator;
      const en_de = { sourceLanguage: "en", targetLanguage: "de" };
      const name = async (promise) => {
        try {
          await promise;
          return "resolved";
        } catch (e) {
          return e.name;
        }
      };
      const out = { hadNative, installed };
      out.unknownPair = await T.availability({ sourceLanguage: "en", targetLanguage: "fr" });
      out.regional = await T.availability({ sourceLanguage: "en-GB", targetLanguage: "de-AT" });
      out.before = await T.availability(en_de);
      out.createUnknown = await name(T.create({ sourceLanguage: "en", targetLanguage: "fr" }));
      const aborted = new AbortController();
      aborted.abort();
      out.createAborted = await name(T.create({ ...en_de, signal: aborted.signal }));
      const progress = [];
      const creating = T.create({ ...en_de, monitor: (m) => m.addEventListener("downloadprogress", (e) => progress.push(e.loaded)) });
      out.during = await T.availability(en_de);
      const translator = await creating;
      out.progress = progress;
      out.after = await T.availability(en_de);
      out.quota = translator.inputQuota;
      out.usage = await translator.measureInputUsage("Zwei Hunde 🐕");
      const text = sources.join(" ");
      out.translated = await translator.translate(text);
      const chunks = [];
      const reader = translator.translateStreaming(text).getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        chunks.push(value);
      }
      out.chunks = chunks;
      const stop = new AbortController();
      const pending = translator.translate(text, { signal: stop.signal });
      stop.abort();
      out.abortTranslate = await name(pending);
      out.afterAbort = await translator.translate(sources[0]);
      out.tooLong = await name(translator.translate("x".repeat(100_001)));
      translator.destroy();
      out.destroyed = await name(translator.translate(sources[0]));
      return out;
    }, { sources: expected.eight });
    assertEqual(found.hadNative, false, "a native Translator with the feature switched off");
    assertEqual(found.installed, true, "install() defined globalThis.Translator");
    assertEqual(found.unknownPair, "unavailable", "availability of en→fr");
    assertEqual(found.regional, "downloadable", "availability of en-GB→de-AT (the en→de model)");
    assertEqual(found.before, "downloadable", "availability before create");
    assertEqual(found.createUnknown, "NotSupportedError", "create for en→fr");
    assertEqual(found.createAborted, "AbortError", "create with an aborted signal");
    assertEqual(found.during, "downloading", "availability while create downloads");
    assertEqual(found.after, "available", "availability after create");
    const p = found.progress;
    if (p.length < 3 || p[0] !== 0 || p.at(-1) !== 1 || p.some((x, i) => i && x < p[i - 1])) {
      throw new Error(`downloadprogress must run 0 … 1, rising: ${JSON.stringify(p)}`);
    }
    console.log(`    downloadprogress: ${p.length} events, ${p.map((x) => x.toFixed(2)).join(" ")}`);
    assertEqual(found.quota, 100_000, "inputQuota");
    assertEqual(found.usage, 12, "measureInputUsage (code points)");
    assertEqual(found.translated, expected.eightBeam4.join(" "), "translate() of eight sentences");
    assertEqual(found.chunks.length, 8, "streamed chunks, one a sentence");
    assertEqual(JSON.stringify(found.chunks.map((c) => c.trim())), JSON.stringify(expected.eightBeam4), "chunks in order");
    assertEqual(found.chunks.join(""), found.translated, "chunks joined");
    assertEqual(found.abortTranslate, "AbortError", "translate() aborted");
    assertEqual(found.afterAbort, expected.eightBeam4[0], "translation after an abort");
    assertEqual(found.tooLong, "QuotaExceededError", "input over inputQuota");
    assertEqual(found.destroyed, "InvalidStateError", "translate() after destroy()");
  }, { needsTestServer: true });
}, { ownPage: true });

/** `channel: true`, and install() beside the browser's own Translator (this browser keeps it). */
export const channelAndNative = step(name, async ({ b }) => {
  const expected = await references.expected();
  await test("translator: channel: true checks with the reverse pair's model, as native `translate --channel` does", async () => {
    const { sentences, plain, checked } = expected.channelFree;
    if (plain.join() === checked.join()) throw new Error("the check changes none of the sentences; pick others");
    const page = await b.context.newPage();
    await page.goto(`${base}/models/index.json`);
    const found = await page.evaluate(async ({ sentences }) => {
      const { configure, Translator } = await import("/repo/pkg/translator.js");
      const name = (call) => {
        try {
          call();
          return "returned";
        } catch (e) {
          return `${e.name}: ${e.message}`;
        }
      };
      const out = { bad: name(() => configure({ channel: "yes" })) };
      configure({ models: { "en-de": "/repo/web/models/en-de-free/", "de-en": "/repo/web/models/de-en-free/" }, backend: "cpu", channel: true });
      const pair = { sourceLanguage: "en", targetLanguage: "de" };
      const progress = [];
      const t = await Translator.create({ ...pair, monitor: (m) => m.addEventListener("downloadprogress", (e) => progress.push(e.loaded)) });
      out.progress = progress;
      out.after = await Translator.availability(pair);
      out.text = await t.translate(sentences.join("\n"));
      t.destroy();
      return out;
    }, { sentences });
    assertEqual(found.bad, "TypeError: Translator: channel must be true or false, not string", "configure({ channel: \"yes\" })");
    assertEqual(found.text, checked.join("\n"), "checked translation");
    assertEqual(found.after, "available", "availability after create");
    const p = found.progress;
    if (p.length < 3 || p[0] !== 0 || p.at(-1) !== 1 || p.some((x, i) => i && x < p[i - 1])) {
      throw new Error(`downloadprogress must run 0 … 1, rising: ${JSON.stringify(p)}`);
    }
    await page.close();
  }, { needsTestServer: true });
  // Only where this Chromium has a Translator of its own (Debian's does): else a skip.
  const probe = await b.context.newPage();
  await probe.goto(`${base}/models/index.json`);
  const hasNative = await probe.evaluate(() => typeof globalThis.Translator !== "undefined");
  await probe.close();
  const name = "translator: install() leaves the browser's own Translator in place; with replaceNative it puts ours there";
  if (!hasNative) {
    skip(name, "this Chromium has no Translator of its own; install() was checked without one above");
  } else {
    await test(name, async () => {
      const page = await b.context.newPage();
      await page.goto(`${base}/models/index.json`);
      const found = await page.evaluate(async () => {
        const native = globalThis.Translator;
        const { install, Translator } = await import("/repo/pkg/translator.js");
        const installed = install({ models: { "en-de": "/repo/web/models/en-de/" } });
        const kept = globalThis.Translator === native;
        const replaced = install({ replaceNative: true });
        const ours = globalThis.Translator === Translator;
        const refused = (() => {
          try {
            install({ replaceNative: "yes" });
            return null;
          } catch (e) {
            return e.name;
          }
        })();
        return { installed, kept, replaced, ours, refused };
      });
      assertEqual(found.installed, false, "install() with a native Translator");
      assertEqual(found.kept, true, "globalThis.Translator kept");
      assertEqual(found.replaced, true, "install({ replaceNative: true })");
      assertEqual(found.ours, true, "globalThis.Translator is the polyfill");
      assertEqual(found.refused, "TypeError", "replaceNative not a boolean");
      await page.close();
    }, { needsTestServer: true });
  }
}, { ownPage: true });
