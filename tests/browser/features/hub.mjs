// OPUS-MT models by name: the page (?model=hf:ORG/NAME&hub=URL) and the package
// (Transduce.load("hf:…", { hub })) against the test hub on the loopback
// (tests/support/test-hub.mjs: the committed Marian fixtures in the Hugging Face hub's layout, on
// a port of its own, so every request is cross-origin as the real hub's are). Outputs are
// the native CLI's (`transduce import hf:…` with the same hub, then `transduce translate`);
// the bundle the browser converted is byte for byte the CLI's; a second load works with the
// hub stopped; a pivot through English equals two chained native translations; and every
// bad input is one error with `code` and `file`, nothing cached, the model
// loaded before still translating.
import { execFile, spawnSync } from "node:child_process";
import { promisify } from "node:util";
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { TIMEOUT, arg, assertEqual, base, openPage, repo, step, test, translateWith, waitReady } from "../harness.mjs";
import { GRANTED_TOKEN, startHub } from "../../support/test-hub.mjs";

export const name = "hub";

let hub = null;
let hubPort = 0;
let native = null;

const EN_DE = "hf:Helsinki-NLP/opus-mt-en-de";

/** The families published since 2021, each by a name of its family and its fixture. */
const FAMILIES = [
  ["Helsinki-NLP/opus-mt-tc-big-en-de", "tc"],
  ["Helsinki-NLP/opus-mt_tiny_eng-deu", "student"],
  ["Helsinki-NLP/opus-mt-tc-bible-big-en-deu_nld", "bible"],
];

/** Starts the test hub and computes the native references (imports into the scratch folder). */
export async function mount(scratch) {
  hub = await startHub();
  hubPort = hub.port;
  const bin = arg("bin");
  const env = { ...process.env, TRANSDUCE_HUB_CACHE: join(scratch, "hub-cache") };
  // Asynchronously: the hub answers from this process's event loop.
  const imported = async (reference, out) => {
    await promisify(execFile)(bin, ["import", reference, "--hub", hub.url, "--out", join(scratch, out), "--weights", "int8", "--source", "en", "--target", "de"], { env });
    return join(scratch, out);
  };
  const reference = JSON.parse(await readFile(join(repo, "tests/fixtures/marian/swish/reference.json"), "utf8"));
  const sentences = reference.generate.slice(2, 10).map((c) => c.text);
  const translate = (bundle, lines, flags = []) => {
    const r = spawnSync(bin, ["translate", "--model", bundle, "--quiet", ...flags], { input: `${lines.join("\n")}\n`, encoding: "utf8" });
    if (r.status !== 0) throw new Error(`translate failed: ${r.stderr}`);
    return r.stdout.trimEnd().split("\n");
  };
  const enDe = await imported(EN_DE, "en-de");
  const frEn = await imported("hf:Helsinki-NLP/opus-mt-fr-en", "fr-en");
  const romance = await imported("hf:Helsinki-NLP/opus-mt-en-ROMANCE", "romance");
  const deEn = await imported("hf:Helsinki-NLP/opus-mt-de-en", "de-en");
  // The pair's other families on the test hub: the 6/2 student (the smallest: what a
  // route picks by default) and tc-big (what `prefer: "quality"` picks).
  const tiny = await imported("hf:Helsinki-NLP/opus-mt_tiny_eng-deu", "tiny");
  const tcBig = await imported("hf:Helsinki-NLP/opus-mt-tc-big-en-de", "tc-big");
  // en → nl has only the tc-bible model of two targets: a route takes it with >>nld<<.
  const bible = await imported("hf:Helsinki-NLP/opus-mt-tc-bible-big-en-deu_nld", "bible");
  const sha = async (file) => createHash("sha256").update(await readFile(file)).digest("hex");
  native = {
    sentences,
    enDe: { beam: translate(enDe, sentences), greedy: translate(enDe, sentences, ["--beam", "1"]), f32: translate(enDe, sentences.slice(0, 3), ["--compute", "f32"]) },
    files: Object.fromEntries(await Promise.all(["config.json", "tokenizer.json", "model.safetensors"].map(async (f) => [f, await sha(join(enDe, f))]))),
    // fr → en → de: each sentence through both models, as the pivot does (en → de by the
    // smallest model of the pair, the student).
    pivot: translate(tiny, translate(frEn, sentences)),
    tcBig: translate(tcBig, sentences.slice(0, 2)),
    bibleNld: translate(bible, sentences.slice(0, 2).map((s) => `>>nld<< ${s}`)),
    // The test hub's refs/pr/1 of opus-mt-en-de holds fr-en's weights (the relu-copy fixture).
    pullRequest: translate(frEn, sentences.slice(0, 2)),
    romance: translate(romance, sentences.map((s) => `>>fra<< ${s}`)),
    deEn: translate(deEn, sentences.slice(0, 2)),
  };
  return {};
}

const hubUrl = (mode) => `http://127.0.0.1:${hubPort}${mode ? `/~${mode}` : ""}`;

/** Translates `sentences` in the page, one at a time, with the page's controls. */
async function translateAll(page, sentences, beam) {
  const out = [];
  for (const s of sentences) {
    await page.fill("#beam", String(beam));
    await page.fill("#source", s);
    await page.evaluate(() => delete document.getElementById("target").dataset.done);
    await page.click("#translate");
    await page.waitForSelector('#target[data-done="true"]');
    const error = await page.textContent("#error");
    if (error) throw new Error(error);
    out.push((await page.textContent("#target")).trim());
  }
  return out;
}

/**
 * The first `n` sentences of a Marian fixture's references, and what the model of `name`
 * (served by the test hub as that fixture) gives for them in `page` on `backend`, in f32 as
 * transformers computes: beam 4 and greedy.
 */
async function familyTranslations(page, name, fixture, backend, n) {
  const ref = JSON.parse(await readFile(join(repo, `tests/fixtures/marian/${fixture}/reference.json`), "utf8"));
  const cases = ref.generate.slice(0, n);
  const found = await page.evaluate(async ({ reference, hub, backend, texts }) => {
    const { Transduce } = await import("/transduce.js");
    const t = await Transduce.load(reference, { hub, backend, weights: "f32" });
    const out = { backend: t.backend, beam: [], greedy: [] };
    for (const s of texts) {
      out.beam.push((await t.translate(s, { beam: 4 })).text);
      out.greedy.push((await t.translate(s, { beam: 1 })).text);
    }
    t.free();
    return out;
  }, { reference: `hf:${name}`, hub: hubUrl(), backend, texts: cases.map((c) => c.text) });
  return { cases, found };
}

function same(found, want, what) {
  const wrong = found.map((f, i) => (f === want[i] ? null : `${i}: ${JSON.stringify(f)}, want ${JSON.stringify(want[i])}`)).filter(Boolean);
  if (wrong.length) throw new Error(`${what}:\n${wrong.join("\n")}`);
}

/** The page by name on the CPU, the bundle it stored, then a reload with the hub stopped. */
export const onCpu = step(name, async ({ b }) => {
  const query = `backend=cpu&model=${encodeURIComponent(EN_DE)}&hub=${encodeURIComponent(hubUrl())}`;
  let page;
  await test("hub: the page loads hf:Helsinki-NLP/opus-mt-en-de by name on the CPU and translates as the native import", async () => {
    page = await openPage(b.context, query);
    await waitReady(page, "cpu");
    same(await translateAll(page, native.sentences, 4), native.enDe.beam, "beam 4");
    same(await translateAll(page, native.sentences.slice(0, 4), 1), native.enDe.greedy.slice(0, 4), "greedy");
    assertEqual(await page.isVisible("#card"), true, "the model card is shown");
    const summary = await page.textContent("#card-summary");
    if (!summary.includes("cc-by-4.0") || !summary.includes("Helsinki-NLP/opus-mt-en-de")) throw new Error(`card: ${summary}`);
    const card = await page.textContent("#card-text");
    if (!card.includes("credit the source")) throw new Error(`card text: ${card.slice(0, 200)}`);
  }, { needsTestServer: true });

  await test("hub: from the hub as huggingface.co answers (relative 307s, gzip without a length, a CDN on another origin with Xet ETags) the page loads by name and translates as the native import", async () => {
    const real = await b.context.newPage();
    await real.goto(`${base}/index.html?backend=cpu`);
    const found = await real.evaluate(async ({ reference, hub, sentences }) => {
      const { Transduce } = await import("/transduce.js");
      const t = await Transduce.load(reference, { hub, backend: "cpu", cache: false });
      const texts = [];
      for (const s of sentences) texts.push((await t.translate(s, { beam: 1 })).text);
      t.free();
      return texts;
    }, { reference: EN_DE, hub: hubUrl("real"), sentences: native.sentences.slice(0, 4) });
    same(found, native.enDe.greedy.slice(0, 4), "greedy from the real hub's answers");
    await real.close();
  }, { needsTestServer: true });

  await test("hub: the bundle converted in the browser is byte for byte the CLI's (config, tokenizer, int8 weights)", async () => {
    const sums = await page.evaluate(async ({ reference, hub }) => {
      const { readCachedBundle } = await import("/hub.js");
      const bundle = await readCachedBundle(reference, hub, "int8");
      const hex = async (bytes) => [...new Uint8Array(await crypto.subtle.digest("SHA-256", bytes))].map((x) => x.toString(16).padStart(2, "0")).join("");
      return { "config.json": await hex(bundle.config), "tokenizer.json": await hex(bundle.tokenizer), "model.safetensors": await hex(bundle.weights) };
    }, { reference: EN_DE, hub: hubUrl() });
    for (const file of Object.keys(native.files)) assertEqual(sums[file], native.files[file], file);
  }, { needsTestServer: true });

  await test("hub: a second load, with the hub stopped, comes from the browser's cache and translates the same", async () => {
    await page?.close();
    await hub.close();
    try {
      const again = await openPage(b.context, query);
      const started = Date.now();
      await waitReady(again, "cpu");
      const ms = Date.now() - started;
      const summary = await again.textContent("#card-summary");
      if (!summary.includes("offline")) throw new Error(`the card should say it came from the cache offline: ${summary}`);
      same(await translateAll(again, native.sentences.slice(0, 3), 4), native.enDe.beam.slice(0, 3), "offline beam 4");
      console.log(`  (second load with the hub stopped: ready ${ms} ms after the page opened)`);
      await again.close();
    } finally {
      hub = await startHub({ port: hubPort });
    }
  }, { needsTestServer: true });

  await test("hub: tc-big's layout, a tiny student's and a tc-bible model's open by their family names in the page and translate as transformers", async () => {
    // In f32, as transformers computes: the student fixture copies badly on purpose (greedy
    // margins down to 0.0018), so int8 storage may change its outputs.
    for (const [name, fixture] of FAMILIES) {
      const page = await b.context.newPage();
      await page.goto(`${base}/index.html?backend=cpu`);
      const { cases, found } = await familyTranslations(page, name, fixture, "cpu", 8);
      same(found.beam, cases.map((c) => c.beam4.text), `${name}, beam 4`);
      same(found.greedy, cases.map((c) => c.greedy.text), `${name}, greedy`);
      console.log(`    ${name}: ${JSON.stringify(cases[0].text)} → ${JSON.stringify(found.beam[0])}`);
      await page.close();
    }
  }, { needsTestServer: true });

  await test("hub: a model of many targets translates into the language options.to names", async () => {
    const ref = JSON.parse(await readFile(join(repo, "tests/fixtures/marian/bible/reference.json"), "utf8"));
    const picked = (code) => ref.generate.filter((c) => c.text.startsWith(`>>${code}<< `)).slice(0, 4);
    const page = await b.context.newPage();
    await page.goto(`${base}/index.html?backend=cpu`);
    const found = await page.evaluate(async ({ reference, hub, texts }) => {
      const { Transduce } = await import("/transduce.js");
      const t = await Transduce.load(reference, { hub, backend: "cpu", weights: "f32" });
      const out = { tokens: t.languageTokens, deu: [], nld: [] };
      for (const code of ["deu", "nld"]) {
        for (const s of texts[code]) out[code].push((await t.translate(s, { beam: 1, to: code })).text);
      }
      out.refused = await t.translate("Hello.", { to: "swe" }).then(() => "translated", (e) => e.message);
      t.free();
      return out;
    }, {
      reference: "hf:Helsinki-NLP/opus-mt-tc-bible-big-en-deu_nld",
      hub: hubUrl(),
      texts: Object.fromEntries(["deu", "nld"].map((code) => [code, picked(code).map((c) => c.text.slice(code.length + 5))])),
    });
    same(found.tokens, [">>deu<<", ">>fra<<", ">>nld<<"], "languageTokens");
    for (const code of ["deu", "nld"]) same(found[code], picked(code).map((c) => c.greedy.text), `to: ${code}`);
    if (!(found.refused.includes(">>swe<<") && found.refused.includes(">>deu<< >>fra<< >>nld<<"))) {
      throw new Error(`to: "swe" should be refused naming the model's codes, got: ${found.refused}`);
    }
    console.log(`    to: "nld": ${JSON.stringify(picked("nld")[0].text)} → ${JSON.stringify(found.nld[0])}`);
    await page.close();
    // The page: ?model=hf:…&to=nld.
    const reference = "hf:Helsinki-NLP/opus-mt-tc-bible-big-en-deu_nld";
    const shown = await openPage(b.context, `backend=cpu&model=${encodeURIComponent(reference)}&hub=${encodeURIComponent(hubUrl())}&to=nld`);
    await waitReady(shown, "cpu");
    const [first] = picked("nld");
    assertEqual(await translateWith(shown, first.text.slice(">>nld<< ".length), 1), first.greedy.text, "the page with ?to=nld");
    await shown.close();
  }, { needsTestServer: true });

  await test("hub: a pull request's revision, a renamed repository, and a gated one with the token that accepted it load by name; a gated one without is one error saying what to do", async () => {
    const page = await b.context.newPage();
    await page.goto(`${base}/index.html?backend=cpu`);
    const found = await page.evaluate(async ({ hub, token, sentences }) => {
      const { Transduce } = await import("/transduce.js");
      const run = async (reference, options = {}) => {
        const t = await Transduce.load(reference, { hub, backend: "cpu", ...options });
        const texts = [];
        for (const s of sentences) texts.push((await t.translate(s)).text);
        const pinned = t.hub.reference;
        t.free();
        return { texts, pinned };
      };
      const out = {};
      out.pr = await run("hf:Helsinki-NLP/opus-mt-en-de@refs/pr/1");
      out.renamed = await run("hf:Helsinki-NLP/opus-mt-en-de-renamed-from");
      out.refused = await Transduce.load("hf:test/gated-en-de", { hub, backend: "cpu" }).then(() => null, (e) => ({ code: e.code, message: e.message }));
      out.gated = await run("hf:test/gated-en-de", { token });
      return out;
    }, { hub: hubUrl(), token: GRANTED_TOKEN, sentences: native.sentences.slice(0, 2) });
    same(found.pr.texts, native.pullRequest, "refs/pr/1: the pull request's weights");
    if (!/^hf:Helsinki-NLP\/opus-mt-en-de@[0-9a-f]{40}$/.test(found.pr.pinned)) throw new Error(`refs/pr/1 pinned as ${found.pr.pinned}`);
    same(found.renamed.texts, native.enDe.beam.slice(0, 2), "a renamed repository: the new name's model");
    assertEqual(found.refused?.code, "gated", "gated without a token");
    if (!found.refused.message.includes("options.token")) throw new Error(found.refused.message);
    same(found.gated.texts, native.enDe.beam.slice(0, 2), "gated, with the token");
    await page.close();
  }, { needsTestServer: true });

  await test("hub: a model under its author's own name whose card gives no languages is refused until they are stated (options.languages, the page's ?from=&to=)", async () => {
    const reference = "hf:someone/marian-finetuned-news";
    const page = await b.context.newPage();
    await page.goto(`${base}/index.html?backend=cpu`);
    const found = await page.evaluate(async ({ reference, hub, sentences }) => {
      const { Transduce } = await import("/transduce.js");
      const refused = await Transduce.load(reference, { hub, backend: "cpu" }).then(() => null, (e) => ({ code: e.code, message: e.message }));
      const badOption = await Transduce.load(reference, { hub, backend: "cpu", languages: { source: "en" } }).then(() => null, (e) => e.message);
      const t = await Transduce.load(reference, { hub, backend: "cpu", languages: { source: "en", target: "de" } });
      const out = { refused, badOption, task: t.config.task, texts: [] };
      for (const s of sentences) out.texts.push((await t.translate(s)).text);
      t.free();
      return out;
    }, { reference, hub: hubUrl(), sentences: native.sentences.slice(0, 2) });
    assertEqual(found.refused?.code, "no-languages", "no languages: the import's code");
    if (!found.refused.message.includes("name the source and target")) throw new Error(found.refused.message);
    if (!found.badOption?.includes("options.languages")) throw new Error(`a half-stated option: ${found.badOption}`);
    assertEqual(`${found.task.source}-${found.task.target}`, "en-de", "the stated languages in the bundle");
    // The same files as opus-mt-en-de's fixture: the same translations.
    same(found.texts, native.enDe.beam.slice(0, 2), "translations");
    await page.close();
    const shown = await openPage(b.context, `backend=cpu&model=${encodeURIComponent(reference)}&hub=${encodeURIComponent(hubUrl())}&from=en&to=de`);
    await waitReady(shown, "cpu");
    assertEqual(await translateWith(shown, native.sentences[0], 4), native.enDe.beam[0], "the page with ?from=en&to=de");
    await shown.close();
  }, { needsTestServer: true });
}, { ownPage: true });

/** The same on WebGPU (SwiftShader): the GPU decoder multiplies in f32 (native --compute f32). */
export const onWebgpu = step(name, async ({ b }) => {
  await test("hub: a model by name translates on WebGPU as the native import in f32", async () => {
    const found = await b.context.newPage().then(async (page) => {
      await page.goto(`${base}/index.html?backend=cpu`);
      return page.evaluate(async ({ reference, hub, sentences }) => {
        const { Transduce } = await import("/transduce.js");
        const t = await Transduce.load(reference, { hub, backend: "webgpu" });
        const out = { backend: t.backend, texts: [] };
        for (const s of sentences) out.texts.push((await t.translate(s)).text);
        t.free();
        return out;
      }, { reference: EN_DE, hub: hubUrl(), sentences: native.sentences.slice(0, 3) });
    });
    assertEqual(found.backend, "webgpu", "backend");
    same(found.texts, native.enDe.f32, "WebGPU beam 4");
  }, { needsTestServer: true });

  await test("hub: tc-big's layout, a tiny student's and a tc-bible model's translate on WebGPU as transformers", async () => {
    // f32 weights, as transformers computes; two sentences of each, greedy and beam 4 (on
    // SwiftShader four took 72 s for the three; the CPU test above takes eight).
    const page = await b.context.newPage();
    await page.goto(`${base}/index.html?backend=cpu`);
    for (const [name, fixture] of FAMILIES) {
      const { cases, found } = await familyTranslations(page, name, fixture, "webgpu", 2);
      assertEqual(found.backend, "webgpu", `${name}: backend`);
      same(found.beam, cases.map((c) => c.beam4.text), `${name} on WebGPU, beam 4`);
      same(found.greedy, cases.map((c) => c.greedy.text), `${name} on WebGPU, greedy`);
    }
    await page.close();
  }, { needsTestServer: true });
}, { ownPage: true });

/** The Translator API for any pair: a pivot through English, a model of many targets. */
export const translatorApi = step(name, async ({ b }) => {
  await test("hub: Translator.availability answers any pair; fr→de goes through English by the smallest models (two chained native translations), and prefer \"quality\" gives en→de tc-big", async () => {
    const page = await b.context.newPage();
    await page.goto(`${base}/index.html?backend=cpu`);
    const found = await page.evaluate(async ({ hub, sentences }) => {
      const { Translator, configure } = await import("/translator.js");
      configure({ hub, opusMt: true, backend: "cpu" });
      const before = {
        pivot: await Translator.availability({ sourceLanguage: "fr", targetLanguage: "de" }),
        direct: await Translator.availability({ sourceLanguage: "en", targetLanguage: "de" }),
        none: await Translator.availability({ sourceLanguage: "fr", targetLanguage: "ja" }),
      };
      const progress = [];
      const translator = await Translator.create({
        sourceLanguage: "fr",
        targetLanguage: "de",
        monitor: (m) => m.addEventListener("downloadprogress", (e) => progress.push(e.loaded)),
      });
      const texts = [];
      for (const s of sentences) texts.push(await translator.translate(s));
      const streamed = [];
      for await (const chunk of translator.translateStreaming(`${sentences[0]} ${sentences[1]}`)) streamed.push(chunk);
      const after = await Translator.availability({ sourceLanguage: "fr", targetLanguage: "de" });
      const models = translator.models.map((m) => m.reference);
      const choice = translator.model;
      translator.destroy();
      // The best family instead of the fewest bytes: tc-big for en → de.
      configure({ prefer: "quality" });
      const best = await Translator.create({ sourceLanguage: "en", targetLanguage: "de" });
      const quality = { model: best.model, texts: [await best.translate(sentences[0]), await best.translate(sentences[1])] };
      best.destroy();
      configure({ prefer: "small" });
      // en → nl: the model of many targets, its token put first.
      const nl = { availability: await Translator.availability({ sourceLanguage: "en", targetLanguage: "nl" }) };
      const toNl = await Translator.create({ sourceLanguage: "en", targetLanguage: "nl" });
      nl.model = toNl.model;
      nl.texts = [await toNl.translate(sentences[0]), await toNl.translate(sentences[1])];
      toNl.destroy();
      let error;
      try {
        await Translator.create({ sourceLanguage: "fr", targetLanguage: "ja" });
      } catch (e) {
        error = e.name;
      }
      return { before, after, progress, texts, streamed, models, choice, quality, nl, error };
    }, { hub: hubUrl(), sentences: native.sentences.slice(0, 4) });
    assertEqual(JSON.stringify(found.before), JSON.stringify({ pivot: "downloadable", direct: "downloadable", none: "unavailable" }), "availability before");
    assertEqual(found.after, "available", "availability after create");
    assertEqual(found.models.length, 2, "two models");
    if (!found.models[0].startsWith("hf:Helsinki-NLP/opus-mt-fr-en@") || !found.models[1].startsWith("hf:Helsinki-NLP/opus-mt_tiny_eng-deu@")) throw new Error(`models: ${found.models}`);
    // Why: no fr → de model on the test hub; en → de's smallest of three families.
    assertEqual(JSON.stringify(found.choice.names), JSON.stringify(["Helsinki-NLP/opus-mt-fr-en", "Helsinki-NLP/opus-mt_tiny_eng-deu"]), "translator.model.names");
    if (!found.choice.why.startsWith("no direct model; through English")) throw new Error(`why: ${found.choice.why}`);
    assertEqual(JSON.stringify(found.quality.model.names), JSON.stringify(["Helsinki-NLP/opus-mt-tc-big-en-de"]), "prefer quality: tc-big");
    same(found.quality.texts, native.tcBig, "prefer quality: tc-big's translations");
    assertEqual(found.nl.availability, "downloadable", "en→nl by the tc-bible model");
    assertEqual(JSON.stringify(found.nl.model.names), JSON.stringify(["Helsinki-NLP/opus-mt-tc-bible-big-en-deu_nld"]), "en→nl: the tc-bible model");
    if (!found.nl.model.why.includes(">>nld<<")) throw new Error(`en→nl why: ${found.nl.model.why}`);
    same(found.nl.texts, native.bibleNld, "en→nl with >>nld<< first");
    same(found.texts, native.pivot.slice(0, 4), "pivot");
    assertEqual(found.streamed.join(""), `${native.pivot[0]} ${native.pivot[1]}`, "streamed pivot");
    if (found.streamed.length !== 2) throw new Error(`streamed in ${found.streamed.length} chunks, expected one per sentence`);
    const p = found.progress;
    if (p[0] !== 0 || p[p.length - 1] !== 1 || p.some((x, i) => i && x < p[i - 1]) || p.length < 4) throw new Error(`progress ${p.join(", ")}`);
    assertEqual(found.error, "NotSupportedError", "create() of a pair the hub cannot do");
    await page.close();
  }, { needsTestServer: true });

  await test("hub: a model of many targets named in the site's table gets the target's token before every sentence", async () => {
    const page = await b.context.newPage();
    await page.goto(`${base}/index.html?backend=cpu`);
    const texts = await page.evaluate(async ({ hub, sentences }) => {
      const { Translator, configure } = await import("/translator.js");
      configure({ hub, models: { "en-fr": { model: "hf:Helsinki-NLP/opus-mt-en-ROMANCE", token: ">>fra<<" } }, backend: "cpu" });
      const t = await Translator.create({ sourceLanguage: "en", targetLanguage: "fr" });
      const out = [];
      for (const s of sentences) out.push(await t.translate(s));
      // Two sentences in one text: each gets the token.
      out.push(await t.translate(`${sentences[0]} ${sentences[1]}`));
      t.destroy();
      return out;
    }, { hub: hubUrl(), sentences: native.sentences.slice(0, 3) });
    same(texts.slice(0, 3), native.romance.slice(0, 3), "en-ROMANCE with >>fra<<");
    assertEqual(texts[3], `${native.romance[0]} ${native.romance[1]}`, "two sentences, each with the token");
  }, { needsTestServer: true });

  await test("hub: install({ hub, opusMt: true }) beside a site's table answers from the cache on a new page; a slow hub streams progress and one without the listing still loads", async () => {
    const page = await b.context.newPage();
    await page.goto(`${base}/index.html?backend=cpu`);
    const found = await page.evaluate(async ({ hub, slow, noapi, sentences }) => {
      const polyfill = await import("/translator.js");
      const defined = polyfill.install({ hub, opusMt: true, backend: "cpu", models: { "en-fr": { model: "hf:Helsinki-NLP/opus-mt-en-ROMANCE", token: ">>fra<<" } } });
      const T = globalThis.Translator;
      const ask = (s, t) => T.availability({ sourceLanguage: s, targetLanguage: t });
      // Nothing is loaded in this page: "available" is the Cache API's (the tests before
      // this one converted fr-en, en-de and en-ROMANCE in this browser).
      const availability = { frDe: await ask("fr", "de"), enFr: await ask("en", "fr"), deEn: await ask("de", "en"), nlDe: await ask("nl", "de"), frJa: await ask("fr", "ja") };
      // A slow hub (64 KB every 20 ms): the bar moves while the files stream.
      polyfill.configure({ hub: slow });
      const progress = [];
      const slowed = await T.create({ sourceLanguage: "de", targetLanguage: "en", monitor: (m) => m.addEventListener("downloadprogress", (e) => progress.push(e.loaded)) });
      const slowText = await slowed.translate(sentences[0]);
      slowed.destroy();
      // No listing (the api answers 404): each file is asked for by name.
      const { Transduce } = await import("/transduce.js");
      const t = await Transduce.load("hf:Helsinki-NLP/opus-mt-de-en", { hub: noapi, backend: "cpu" });
      const noapiTexts = [];
      for (const s of sentences) noapiTexts.push((await t.translate(s)).text);
      t.free();
      return { defined: defined && T === polyfill.Translator, availability, progress, slowText, noapiTexts };
    }, { hub: hubUrl(), slow: hubUrl("slow"), noapi: hubUrl("noapi"), sentences: native.sentences.slice(0, 2) });
    assertEqual(found.defined, true, "install() defined globalThis.Translator (the browser's own is off)");
    assertEqual(JSON.stringify(found.availability), JSON.stringify({ frDe: "available", enFr: "available", deEn: "downloadable", nlDe: "downloadable", frJa: "unavailable" }), "availability on a new page");
    const p = found.progress;
    const between = p.filter((x) => x > 0 && x < 1);
    if (p[0] !== 0 || p[p.length - 1] !== 1 || p.some((x, i) => i && x < p[i - 1]) || between.length < 8) throw new Error(`slow hub's progress: ${p.join(", ")}`);
    assertEqual(found.slowText, native.deEn[0], "de-en from the slow hub");
    same(found.noapiTexts, native.deEn, "de-en from a hub without the listing");
    await page.close();
  }, { needsTestServer: true });
}, { ownPage: true });

/** Every bad input: one error with code and file, nothing cached, the loaded model intact. */
export const badInput = step(name, async ({ b }) => {
  await test("hub: each bad model or download is one error with code and file; nothing is cached and the loaded model still translates", async () => {
    const page = await b.context.newPage();
    await page.goto(`${base}/index.html?backend=cpu`);
    const cases = [
      ["hf:Helsinki-NLP/opus-mt-xx-yy", "", "not-found", "config.json"],
      ["hf:test/opus-mt-en-xx-novocab", "", "missing-file", "vocab.json"],
      ["hf:test/opus-mt-en-xx-refused", "", "unsupported", "config.json"],
      ["hf:Helsinki-NLP/opus-mt-de-en", "cut", "truncated", "source.spm"],
      ["hf:Helsinki-NLP/opus-mt-de-en", "short", "truncated", "source.spm"],
      ["hf:Helsinki-NLP/opus-mt-de-en", "corrupt", "corrupt", "source.spm"],
      ["hf:Helsinki-NLP/opus-mt-de-en", "html", "bad-listing", "listing"],
      ["hf:Helsinki-NLP/opus-mt-de-en", "moved", "moved", "config.json"],
      // A revision the hub does not have: its listing says so (404 RevisionNotFound).
      ["hf:Helsinki-NLP/opus-mt-de-en@v9", "", "not-found", "listing"],
      // The real hub's answers: 401 for a repository it does not have, a CDN on another
      // origin whose ETag is a Xet hash (so the check is the listing's sha256).
      ["hf:Helsinki-NLP/opus-mt-xx-yy", "real", "not-found", null],
      ["hf:Helsinki-NLP/opus-mt-de-en", "real+corrupt", "corrupt", "source.spm"],
      ["hf:Helsinki-NLP/opus-mt-de-en", "real+cut", "truncated", "source.spm"],
      ["hf:not-a-name", "", "bad-name", null],
    ].map(([reference, mode, code, file]) => ({ reference, hub: hubUrl(mode), code, file }));
    const found = await page.evaluate(async ({ cases, good, hub, sentence }) => {
      const { Transduce } = await import("/transduce.js");
      const { isCached } = await import("/hub.js");
      const loaded = await Transduce.load(good, { hub, backend: "cpu" });
      const before = (await loaded.translate(sentence)).text;
      const out = [];
      for (const c of cases) {
        try {
          const t = await Transduce.load(c.reference, { hub: c.hub, backend: "cpu" });
          t.free();
          out.push({ reference: c.reference, loaded: true });
        } catch (e) {
          out.push({ reference: c.reference, name: e.name, code: e.code, file: e.file, message: e.message, cached: await isCached(c.reference, c.hub) });
        }
      }
      const after = (await loaded.translate(sentence)).text;
      loaded.free();
      return { out, before, after };
    }, { cases, good: EN_DE, hub: hubUrl(), sentence: native.sentences[0] });
    const wrong = [];
    found.out.forEach((r, i) => {
      const c = cases[i];
      if (r.loaded || r.code !== c.code || r.file !== c.file || r.cached || r.name !== "TransduceError" || !r.message) {
        wrong.push(`${c.reference} at ${c.hub}: ${JSON.stringify(r)}, want code ${c.code}, file ${c.file}`);
      }
    });
    if (wrong.length) throw new Error(wrong.join("\n"));
    assertEqual(found.after, found.before, "the model loaded before translates as before");
    await page.close();
  }, { needsTestServer: true });

  await test("hub: a hub that rate-limits (429) or fails (503) gives the cached bundle; an uncached model is one rate-limited error; availability() rejects naming the limit", async () => {
    const page = await b.context.newPage();
    await page.goto(`${base}/index.html?backend=cpu`);
    const run = (status) => {
      hub.limit(status);
      return page.evaluate(async ({ reference, hub, sentence }) => {
        const { Transduce } = await import("/transduce.js");
        const polyfill = await import("/translator.js");
        const out = {};
        // Cached by the tests before this one (from the same hub URL).
        const t = await Transduce.load(reference, { hub, backend: "cpu" });
        out.cached = { text: (await t.translate(sentence, { beam: 1 })).text, offline: t.hub.offline };
        t.free();
        try {
          await Transduce.load("hf:Helsinki-NLP/opus-mt-sv-fi", { hub, backend: "cpu" });
          out.uncached = "loaded";
        } catch (e) {
          out.uncached = { code: e.code, retryAfter: e.retryAfter ?? null, message: e.message };
        }
        polyfill.configure({ hub, opusMt: true, backend: "cpu" });
        out.availability = await polyfill.Translator.availability({ sourceLanguage: "sv", targetLanguage: "fi" }).then(
          (a) => a,
          (e) => `${e.name}: ${e.message}`,
        );
        return out;
      }, { reference: EN_DE, hub: hubUrl(), sentence: native.sentences[0] });
    };
    let limited, down;
    try {
      limited = await run(429);
      down = await run(503);
    } finally {
      hub.limit(null);
    }
    for (const [what, found] of [["429", limited], ["503", down]]) {
      assertEqual(found.cached.text, native.enDe.greedy[0], `${what}: the cached model translates`);
      assertEqual(found.cached.offline, true, `${what}: the card says offline`);
    }
    assertEqual(limited.uncached.code, "rate-limited", "429, not cached: the code");
    // The hub exposes neither Retry-After nor RateLimit to pages (its CORS list), so the
    // page cannot know the wait, and does not make one up.
    assertEqual(limited.uncached.retryAfter, null, "429, not cached: the wait a page cannot see");
    if (!limited.uncached.message.includes("HTTP 429")) throw new Error(limited.uncached.message);
    if (!limited.availability.startsWith("NetworkError") || !limited.availability.includes("429")) throw new Error(`availability under 429: ${limited.availability}`);
    assertEqual(down.uncached.code, "http", "503, not cached: the code");
    await page.close();
  }, { needsTestServer: true });

  await test("hub: the page's name field shows a bad name's error and keeps the model it had; a pair opens through the field and through the language pickers", async () => {
    const page = await openPage(b.context, `backend=cpu&model=${encodeURIComponent(EN_DE)}&hub=${encodeURIComponent(hubUrl())}`);
    await waitReady(page, "cpu");
    await page.fill("#open-name", "hf:Helsinki-NLP/opus-mt-xx-yy");
    await page.click("#open");
    await page.waitForFunction(() => document.getElementById("error").textContent.includes("not-found"), null, { timeout: TIMEOUT });
    const error = await page.textContent("#error");
    if (!error.includes("no such model")) throw new Error(error);
    // The model loaded before still serves.
    await page.evaluate(() => (document.getElementById("error").textContent = ""));
    const [out] = await translateAll(page, native.sentences.slice(0, 1), 4);
    assertEqual(out, native.enDe.beam[0], "translation after the failed load");
    // A pair through the field: fr-de, through English.
    await page.fill("#open-name", "fr-de");
    await page.click("#open");
    await page.waitForFunction(() => document.getElementById("status").textContent.includes("ready"), null, { timeout: TIMEOUT });
    const [pivot] = await translateAll(page, native.sentences.slice(0, 1), 4);
    assertEqual(pivot, native.pivot[0], "fr-de through the page's field");
    // The same pair through the pickers: the hub's languages, then what French reaches.
    await page.focus("#open-from");
    await page.waitForSelector("#open-from[data-count]", { state: "attached", timeout: TIMEOUT });
    const sources = await page.$$eval("#open-from option", (options) => options.map((o) => o.value).filter(Boolean).sort());
    assertEqual(sources.join(" "), "de en fr nl", "the source picker's languages (the test hub's Helsinki-NLP names)");
    await page.selectOption("#open-from", "fr");
    await page.waitForSelector('#open-to[data-source="fr"]', { state: "attached", timeout: TIMEOUT });
    const targets = await page.$$eval("#open-to optgroup", (groups) => groups.map((g) => `${g.label}: ${[...g.children].map((o) => o.value).join(" ")}`));
    assertEqual(targets.join("; "), "direct: en; through English: de nl", "what French reaches");
    // German → Dutch: through English, the second model one of many targets (its token).
    await page.selectOption("#open-from", "de");
    await page.waitForSelector('#open-to[data-source="de"]', { state: "attached", timeout: TIMEOUT });
    await page.selectOption("#open-to", "nl");
    await page.waitForFunction(() => /de → nl .*ready/.test(document.getElementById("status").textContent), null, { timeout: TIMEOUT });
    const status = await page.textContent("#status");
    if (!status.includes("through English") || !status.includes(">>nld<<")) throw new Error(`de → nl: ${status}`);
    await page.close();
  }, { needsTestServer: true });

  await test("hub: with the storage quota exceeded the model still loads and says it could not be stored", async () => {
    const page = await b.context.newPage();
    await page.goto(`${base}/index.html?backend=cpu`);
    const cdp = await b.context.newCDPSession(page);
    await cdp.send("Storage.overrideQuotaForOrigin", { origin: base, quotaSize: 64 * 1024 });
    const found = await page.evaluate(async ({ hub, sentence }) => {
      const { Transduce } = await import("/transduce.js");
      const { isCached } = await import("/hub.js");
      // A model no step of this session loaded before (so it must be stored now): the
      // legacy pytorch_model.bin of PyTorch ≤ 1.5, converted in the browser.
      const t = await Transduce.load("hf:Helsinki-NLP/opus-mt-nl-en", { hub, backend: "cpu" });
      const text = (await t.translate(sentence)).text;
      const warning = t.hub.warning;
      t.free();
      return { text, warning, cached: await isCached("hf:Helsinki-NLP/opus-mt-nl-en", hub) };
    }, { hub: hubUrl(), sentence: native.sentences[0] });
    await cdp.send("Storage.overrideQuotaForOrigin", { origin: base });
    if (found.warning?.code !== "quota") throw new Error(`warning: ${JSON.stringify(found.warning)}`);
    assertEqual(found.cached, false, "nothing half-cached");
    if (!found.text) throw new Error("no translation");
    await page.close();
  }, { needsTestServer: true });
}, { ownPage: true });

/** Stops the test hub (run.mjs calls it at the end). */
export async function unmount() {
  await hub?.close();
}
