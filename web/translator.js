// @ts-check
// The browser's Translator API (WICG translation-api, shipped in Chrome 138+), backed by
// transduce bundles: a polyfill for browsers without it, with models you train yourself.
//
//   import { install } from "transduce/translator.js";
//   install({ models: { "en-de": "/models/en-de/" } });
//   const translator = await Translator.create({ sourceLanguage: "en", targetLanguage: "de" });
//   await translator.translate("Two dogs play in the snow.");
//
// `install()` defines globalThis.Translator only where the browser has none; the class is
// also exported as `Translator` for use without touching the global. Each translator runs
// its bundle in a Web Worker (transduce.js). Which parts of the spec are not covered:
// README.md, "The Translator API".

import { Transduce } from "./transduce.js";
import { DEFAULT_HUB, exists, isCached, searchModels } from "./hub.js";
import { FAMILIES, choose, direct, same, searches } from "./routes.js";
import { BUNDLE_CACHE, openCache } from "./store.js";

/** @typedef {import("./translator.js").ModelChoice} ModelChoice */
/** @typedef {ReturnType<typeof import("./translator.js").stagesOf>[number]} Stage a model a translator runs, and its target token */
/**
 * A model of a pair's route: by name (an hf: reference) or a bundle folder of the site's
 * table, with the target token put before every sentence.
 * @typedef {{ reference?: string, url?: string, token?: string }} Part
 */
/**
 * The site's entry for a pair (configure()): models by name, or a bundle folder URL.
 * @typedef {{ parts: { reference: string, token?: string }[], source: string, target: string, url?: undefined, token?: undefined } | { url: string, source: string, target: string, token?: string, parts?: undefined }} Entry
 */
/**
 * How a pair is translated (route()): its models in order and why (`model`); `url` and
 * `token` where it is a bundle of the site's table, `pivot` where it goes through English.
 * @typedef {{ parts: Part[], source: string, target: string, url?: string, token?: string, pivot?: string, model: ModelChoice }} Route
 */
/** @typedef {typeof globalThis & { Translator?: unknown }} WithTranslator globalThis with the browser's own Translator, where it has one */

/** The worker refuses longer texts in one call (crates/transduce-web MAX_CHARS). */
const INPUT_QUOTA = 100_000;

/** Language pair → { url, languages } and loading options, set by configure()/install(). */
/** @type {{ models: Map<string, Entry>, backend: import("./transduce.js").Backend, workerUrl: string | URL | undefined, channel: boolean, hub: string, opusMt: boolean, prefer: "small" | "quality" }} */
const settings = { models: new Map(), backend: "auto", workerUrl: undefined, channel: false, hub: DEFAULT_HUB, opusMt: false, prefer: "small" };
/** Bundle URL → number of create() calls downloading it now. */
const downloading = new Map();
/** Bundle URLs a translator of this page has loaded. */
const loadedUrls = new Set();

/** How much of the download bar each bundle file fills (see create()). */
/** @type {Record<string, number>} */
const SHARE = { "config.json": 0.01, "tokenizer.json": 0.09, "model.safetensors": 0.9 };

/** @param {string} name @param {string} message */
const error = (name, message) => new DOMException(message, name);

/**
 * A BCP 47 tag in canonical form (`EN-us` → `en-US`), or null if it is not one.
 * @param {unknown} tag
 * @returns {string | null}
 */
function canonical(tag) {
  if (typeof tag !== "string") return null;
  try {
    return Intl.getCanonicalLocales(tag)[0] ?? null;
  } catch {
    return null;
  }
}

/**
 * The site's entry for a pair: the exact tags first, then their primary languages (`en-US` → `en`).
 * @param {string} sourceLanguage @param {string} targetLanguage
 */
function lookup(sourceLanguage, targetLanguage) {
  const source = canonical(sourceLanguage);
  const target = canonical(targetLanguage);
  if (!source || !target) return null;
  /** @param {string} tag */
  const primary = (tag) => tag.split("-")[0];
  for (const key of [`${source}→${target}`, `${primary(source)}→${primary(target)}`]) {
    const entry = settings.models.get(key);
    if (entry) return entry;
  }
  return null;
}

/** @param {import("./translator.js").TranslatorLanguages} options */
function checkLanguages(options) {
  if (typeof options !== "object" || options === null) {
    throw new TypeError("Translator: expected { sourceLanguage, targetLanguage }");
  }
  for (const field of /** @type {const} */ (["sourceLanguage", "targetLanguage"])) {
    if (typeof options[field] !== "string") throw new TypeError(`Translator: ${field} must be a string`);
    if (!canonical(options[field])) throw new RangeError(`Translator: ${field} "${options[field]}" is not a BCP 47 language tag`);
  }
}

/**
 * Sets the bundles translators may use and how they load them.
 * models: { "en-de": url, … } (pair written `source-target`, primary languages) or
 *   [{ sourceLanguage, targetLanguage, url }, …]; bundle URLs are folders
 *   (config.json, tokenizer.json, model.safetensors), relative to the page.
 * backend: "auto" (default), "webgpu" or "cpu"; workerUrl: where worker.js lives.
 * channel: true checks every translation with the registry's model for the reverse pair,
 *   where there is one (noisy-channel reranking, as `transduce translate --channel`): both
 *   bundles are downloaded, and each translation takes about twice as long.
 * hub: where `hf:` names come from (default https://huggingface.co). opusMt: true lets any
 *   pair without an entry use Helsinki-NLP's OPUS-MT models on the hub: opus-mt-SRC-TGT where
 *   it exists, else opus-mt-SRC-en then opus-mt-en-TGT (a pivot through English, sentence by
 *   sentence). An entry's url may be an `hf:ORG/NAME` name, and an entry may be
 *   { model, token } for a model of many targets, e.g. { model:
 *   "hf:Helsinki-NLP/opus-mt-en-ROMANCE", token: ">>fra<<" }: the token is put before
 *   every sentence, as the model's card asks.
 * Calling it again adds to the registry.
 * @param {import("./translator.js").ConfigureOptions} [options]
 */
export function configure({ models = {}, backend, workerUrl, channel, hub, opusMt, prefer } = {}) {
  if (opusMt !== undefined && typeof opusMt !== "boolean") {
    throw new TypeError(`Translator: opusMt must be true or false, not ${typeof opusMt}`);
  }
  if (prefer !== undefined && prefer !== "small" && prefer !== "quality") {
    throw new TypeError(`Translator: prefer must be "small" or "quality", not ${JSON.stringify(prefer)}`);
  }
  if (hub !== undefined && typeof hub !== "string") throw new TypeError("Translator: hub must be a URL (a string)");
  if (channel !== undefined && typeof channel !== "boolean") {
    throw new TypeError(`Translator: channel must be true or false, not ${typeof channel}`);
  }
  /** @type {import("./translator.js").TranslatorModel[]} */
  const entries = Array.isArray(models)
    ? models
    : Object.entries(models).map(([pair, url]) => {
        // "en-de" splits at its last hyphen; "en-US→de-CH" at the arrow.
        const [sourceLanguage, targetLanguage, ...rest] = pair.includes("→") ? pair.split("→") : pair.split(/-(?=[^-]+$)/);
        if (rest.length || !sourceLanguage || !targetLanguage) {
          throw new TypeError(`Translator models: "${pair}" is not a pair like "en-de" or "en-US→de"`);
        }
        // A URL object is a url; another object, { model, token }.
        const spec = /** @type {{ url?: string | URL, model?: string, token?: string }} */ (typeof url === "object" && url !== null && !(url instanceof URL) ? url : { url });
        return { sourceLanguage, targetLanguage, ...spec };
      });
  for (const { sourceLanguage, targetLanguage, url, model, token } of entries) {
    const source = canonical(sourceLanguage);
    const target = canonical(targetLanguage);
    if (!source || !target) throw new TypeError(`Translator models: "${sourceLanguage}" → "${targetLanguage}" are not language tags`);
    if (token !== undefined && (typeof token !== "string" || !/^>>[^\s<>]+<<$/.test(token))) {
      throw new TypeError(`Translator models: the token of ${source} → ${target} must look like ">>fra<<"`);
    }
    const where = model ?? url;
    if (typeof where !== "string" && !(where instanceof URL)) throw new TypeError(`Translator models: ${source} → ${target} needs a bundle URL or an hf: name`);
    if (typeof where === "string" && where.startsWith("hf:")) {
      settings.models.set(`${source}→${target}`, { parts: [{ reference: where, token }], source, target });
      continue;
    }
    const base = new URL(where, globalThis.document?.baseURI ?? globalThis.location?.href);
    if (!base.pathname.endsWith("/")) base.pathname += "/";
    settings.models.set(`${source}→${target}`, { url: base.href, source, target, token });
  }
  if (backend !== undefined) settings.backend = backend;
  if (workerUrl !== undefined) settings.workerUrl = workerUrl;
  if (channel !== undefined) settings.channel = channel;
  if (hub !== undefined) settings.hub = hub;
  if (opusMt !== undefined) settings.opusMt = opusMt;
  if (prefer !== undefined) settings.prefer = prefer;
}

const ORG = "Helsinki-NLP";

/**
 * The models that translate a pair: the site's entry, else (with opusMt) the Helsinki-NLP
 * model `prefer` picks among every family the hub has for the pair (routes.js), or two
 * through English. `{ parts: [{ reference, token? } | { url }], source, target, model }`,
 * or null. The hub is searched per pair (two- and three-letter codes, and once for all of
 * tc-bible), the pairs through English only where they could win; each answer is kept for
 * the page's life.
 * @param {string} sourceLanguage @param {string} targetLanguage checked (checkLanguages)
 * @returns {Promise<Route | null>}
 */
async function route(sourceLanguage, targetLanguage) {
  const entry = lookup(sourceLanguage, targetLanguage);
  if (entry) {
    const model = { names: entry.parts ? entry.parts.map((p) => p.reference) : [String(entry.url)], why: "the site's table (configure or install)" };
    return entry.parts ? { ...entry, model } : { ...entry, parts: [{ url: entry.url, token: entry.token }], model };
  }
  if (!settings.opusMt) return null;
  const s = /** @type {string} checkLanguages passed */ (canonical(sourceLanguage)).split("-")[0];
  const t = /** @type {string} checkLanguages passed */ (canonical(targetLanguage)).split("-")[0];
  if (same(s, t)) return null;
  /** @param {unknown} e */
  const limited = (e) => notKnown(e, []);
  const found = new Map();
  /**
   * The pair's models, or null where the hub has no search (then the names are probed).
   * @param {string} a @param {string} b
   */
  const pair = async (a, b) => {
    const lists = await Promise.all(searches(a, b).map((q) => searchModels(ORG, q, settings.hub).catch(limited)));
    const models = lists.some((l) => l === null) ? null : direct(/** @type {string[][]} none is null */ (lists).flat(), a, b);
    found.set(`${a}-${b}`, models ?? []);
    return models;
  };
  const first = await pair(s, t);
  if (first === null) return probe(s, t);
  const smallest = Math.min(...first.map((m) => FAMILIES[m.family].params));
  const english = same(s, "en") || same(t, "en");
  // Through English can win only where nothing is direct, or (prefer "small") where two
  // students would be smaller than the smallest direct model.
  if (!english && (!first.length || (settings.prefer === "small" && smallest > 2 * FAMILIES.tiny.params))) {
    await Promise.all([pair(s, "en"), pair("en", t)]);
  }
  const choice = choose((a, b) => found.get(`${a}-${b}`) ?? [], s, t, settings.prefer);
  if (!choice) return null;
  const parts = choice.ids.map((id, i) => ({ reference: `hf:${id}`, ...(choice.tokens[i] ? { token: choice.tokens[i] } : {}) }));
  const model = { names: choice.ids, families: choice.families, bytes: choice.params, why: choice.why };
  return { parts, source: s, target: t, ...(parts.length > 1 ? { pivot: "en" } : {}), model };
}

/**
 * A failed question to the hub: `no` (the answer "none"), except that a hub that limits us
 * (429) is not a "no": availability() rejects with the wait.
 * @template T
 * @param {any} e whatever was thrown (`any`: its `code` is checked; hub.js's HubError)
 * @param {T} no
 * @returns {T}
 */
function notKnown(e, no) {
  if (e?.code === "rate-limited") throw error("NetworkError", `${e.message}: Translator.availability cannot tell now`);
  return no;
}

/**
 * For a hub without the model search: the 2020 names, probed one by one.
 * @param {string} s @param {string} t
 * @returns {Promise<Route | null>}
 */
async function probe(s, t) {
  /** @param {string} a @param {string} b */
  const name = (a, b) => `${ORG}/opus-mt-${a}-${b}`;
  /** @param {string} repo */
  const has = (repo) => exists(repo, settings.hub).catch((e) => notKnown(e, false));
  /** @type {(ids: string[], why: string) => ModelChoice} */
  const model = (ids, why) => ({ names: ids, families: ids.map(() => "base"), bytes: ids.length * FAMILIES.base.params, why });
  if (await has(name(s, t))) {
    return { parts: [{ reference: `hf:${name(s, t)}` }], source: s, target: t, model: model([name(s, t)], "the hub has no model search: the 2020 model of the pair") };
  }
  if (s !== "en" && t !== "en") {
    const [a, b] = await Promise.all([has(name(s, "en")), has(name("en", t))]);
    if (a && b) {
      const ids = [name(s, "en"), name("en", t)];
      return { parts: ids.map((id) => ({ reference: `hf:${id}` })), source: s, target: t, pivot: "en", model: model(ids, "the hub has no model search: the 2020 models through English") };
    }
  }
  return null;
}

/** A key per part, for the downloading and loaded sets. @param {Part} part */
const partKey = (part) => part.url ?? `${settings.hub} ${part.reference}`;

/**
 * The bundle URLs a pair's translator loads: its own, and with `channel` the reverse pair's
 * (undefined where that is a model by name).
 * @param {Route} entry a bundle of the site's table
 */
function bundleUrls(entry) {
  const reverse = settings.channel ? settings.models.get(`${entry.target}→${entry.source}`) : undefined;
  return reverse ? [entry.url, reverse.url] : [entry.url];
}

/**
 * Whether the bundle's files are in the Cache API under the sums its config.json lists.
 * @param {string | undefined} url
 */
async function cached(url) {
  if (typeof caches === "undefined") return false;
  try {
    const response = await fetch(new URL("config.json", url), { cache: "no-cache" });
    if (!response.ok) return false;
    const sums = (await response.json()).sha256 ?? {};
    const files = ["tokenizer.json", "model.safetensors"];
    if (!files.every((f) => sums[f])) return false;
    const cache = await openCache(BUNDLE_CACHE);
    if (!cache) return false;
    const hits = await Promise.all(files.map((f) => cache.match(`${new URL(f, url).href}#sha256=${sums[f]}`)));
    return hits.every(Boolean);
  } catch {
    return false;
  }
}

/** @param {EventTarget} target */
function monotonic(target) {
  let last = -1;
  /** @param {number} fraction */
  return (fraction) => {
    const loaded = Math.min(1, Math.max(last, fraction));
    if (loaded === last) return;
    last = loaded;
    target.dispatchEvent(new ProgressEvent("downloadprogress", { loaded, total: 1, lengthComputable: true }));
  };
}

export class Translator {
  /**
   * The models in order, [{ engine, token }]: one, or two for a pivot.
   * @type {Stage[]}
   */
  #stages;
  /**
   * Why these models: the route's choice (see `model`).
   * @type {ModelChoice | null}
   */
  #choice = null;
  #destroyed = false;
  /** @type {AbortSignal | undefined} */
  #signal;
  /** @type {Set<(reason: unknown) => void>} */
  #pending = new Set();

  /**
   * Not for callers: use Translator.create().
   * @param {Stage[]} stages
   * @param {string} sourceLanguage
   * @param {string} targetLanguage
   * @param {AbortSignal | undefined} signal
   * @param {unknown} secret
   */
  constructor(stages, sourceLanguage, targetLanguage, signal, secret) {
    if (secret !== CREATE) throw new TypeError("Illegal constructor: use Translator.create()");
    this.#stages = stages;
    STAGES.set(this, stages);
    this.#signal = signal;
    this.sourceLanguage = sourceLanguage;
    this.targetLanguage = targetLanguage;
    signal?.addEventListener("abort", () => this.destroy(), { once: true });
  }

  /**
   * "unavailable", "downloadable", "downloading" or "available" for a language pair.
   * @param {import("./translator.js").TranslatorLanguages} options
   * @returns {Promise<import("./translator.js").Availability>}
   */
  static async availability(options) {
    checkLanguages(options);
    const entry = await route(options.sourceLanguage, options.targetLanguage);
    if (!entry) return "unavailable";
    if (entry.parts.some((p) => p.reference)) {
      const keys = entry.parts.map(partKey);
      if (keys.every((k) => loadedUrls.has(k))) return "available";
      if (keys.some((k) => downloading.get(k))) return "downloading";
      const stored = await Promise.all(entry.parts.map((p) => isCached(/** @type {string} a model by name */ (p.reference), settings.hub)));
      return stored.every(Boolean) ? "available" : "downloadable";
    }
    const urls = bundleUrls(entry);
    if (urls.every((url) => loadedUrls.has(url))) return "available";
    if (urls.some((url) => downloading.get(url))) return "downloading";
    return (await Promise.all(urls.map(cached))).every(Boolean) ? "available" : "downloadable";
  }

  /**
   * Loads the pair's bundle (fetched with progress, or from the Cache API) in a worker.
   * options: { sourceLanguage, targetLanguage, monitor(m), signal }; `m` receives
   * "downloadprogress" events whose `loaded` runs from 0 to 1.
   * @param {import("./translator.js").TranslatorCreateOptions} options
   * @returns {Promise<Translator>}
   */
  static async create(options) {
    checkLanguages(options);
    const { sourceLanguage, targetLanguage, monitor, signal } = options;
    signal?.throwIfAborted();
    const entry = await route(sourceLanguage, targetLanguage);
    if (!entry) {
      const hint = settings.opusMt ? `, and the hub at ${settings.hub} has no OPUS-MT model for it (direct or through English)` : "";
      throw error("NotSupportedError", `no translation model for ${sourceLanguage} → ${targetLanguage} is configured${hint}`);
    }
    const events = new EventTarget();
    if (monitor !== undefined) {
      if (typeof monitor !== "function") throw new TypeError("Translator.create: monitor must be a function");
      monitor(/** @type {import("./translator.js").CreateMonitor} it dispatches the "downloadprogress" events (monotonic) */ (events));
    }
    const progress = monotonic(events);
    if (entry.parts.some((p) => p.reference)) return Translator.#createByName(entry, progress, signal);
    const fractions = new Map();
    const urls = bundleUrls(entry);
    for (const url of urls) downloading.set(url, (downloading.get(url) ?? 0) + 1);
    let engine;
    try {
      progress(0);
      const loading = Transduce.load(/** @type {string} no part has a name: the site's bundle */ (entry.url), {
        backend: settings.backend,
        workerUrl: settings.workerUrl,
        channel: urls[1],
        onProgress: ({ file, url, loaded, total }) => {
          // The files are fetched one after another and each size is known only when its
          // download starts, so the bar is split ahead: config.json and tokenizer.json fill
          // the first tenth of each bundle's share, model.safetensors (most of the bytes)
          // the rest. Below 1 until the model is loaded.
          fractions.set(`${url}#${file}`, [file, total > 0 ? Math.min(1, loaded / total) : 0]);
          let sum = 0;
          for (const [name, fraction] of fractions.values()) sum += ((SHARE[name] ?? 0) * fraction) / urls.length;
          progress(Math.min(0.99, sum));
        },
      });
      engine = await abortable(loading, signal, (t) => t.free());
    } finally {
      for (const url of urls) downloading.set(url, downloading.get(url) - 1);
    }
    const task = engine.config.task;
    if (task.kind !== "translate") {
      engine.free();
      throw error("NotSupportedError", `${entry.url} is not a translation model`);
    }
    for (const url of urls) loadedUrls.add(url);
    progress(1);
    const translator = new Translator([{ engine, token: entry.token }], entry.source, entry.target, signal, CREATE);
    translator.#choice = entry.model ?? null;
    return translator;
  }

  /**
   * Loads the models of a route by name (one, or two through English), each in its own
   * worker; one bar across all of them: the bytes loaded over the bytes of every file.
   * @param {Route} entry
   * @param {(fraction: number) => void} progress
   * @param {AbortSignal | undefined} signal
   * @returns {Promise<Translator>}
   */
  static async #createByName(entry, progress, signal) {
    const keys = entry.parts.map(partKey);
    for (const k of keys) downloading.set(k, (downloading.get(k) ?? 0) + 1);
    const seen = entry.parts.map(() => ({ loaded: 0, total: 0 }));
    const engines = [];
    try {
      progress(0);
      const loads = entry.parts.map((part, i) =>
        abortable(
          Transduce.load(/** @type {string} a part has one */ (part.reference ?? part.url), {
            backend: settings.backend,
            workerUrl: settings.workerUrl,
            hub: settings.hub,
            onProgress: ({ loaded, total }) => {
              seen[i] = { loaded, total: Math.max(total, loaded) };
              const all = seen.reduce((a, b) => ({ loaded: a.loaded + b.loaded, total: a.total + b.total }), { loaded: 0, total: 0 });
              if (all.total > 0) progress(Math.min(0.99, all.loaded / all.total));
            },
          }),
          signal,
          (t) => t.free(),
        ),
      );
      const settled = await Promise.allSettled(loads);
      for (const r of settled) if (r.status === "fulfilled") engines.push(r.value);
      const failed = settled.find((r) => r.status === "rejected");
      if (failed) throw failed.reason;
    } catch (e) {
      for (const t of engines) t.free();
      throw e;
    } finally {
      for (const k of keys) downloading.set(k, downloading.get(k) - 1);
    }
    for (const [i, t] of engines.entries()) {
      if (t.config.task.kind !== "translate") {
        for (const e of engines) e.free();
        throw error("NotSupportedError", `${entry.parts[i].reference} is not a translation model`);
      }
    }
    for (const k of keys) loadedUrls.add(k);
    progress(1);
    const stages = engines.map((engine, i) => ({ engine, token: entry.parts[i].token }));
    const translator = new Translator(stages, entry.source, entry.target, signal, CREATE);
    translator.#choice = entry.model ?? null;
    return translator;
  }

  /**
   * Extension: which models were chosen and why: `{ names, families, bytes, why }` for
   * Helsinki-NLP's (`bytes`: the int8 bundles' size, estimated from each family's shape),
   * `{ names, why }` for the site's own table.
   */
  get model() {
    return this.#choice;
  }

  /**
   * Extension: the models this translator runs, in order ({ reference | bundle, card,
   * token }): one, or two for a pivot through English.
   */
  get models() {
    return this.#stages.map(({ engine, token }) => ({
      reference: engine.hub?.reference,
      card: engine.hub?.card,
      token,
      config: engine.config,
    }));
  }

  /** Most input `translate()` takes, in the units of measureInputUsage() (characters). */
  get inputQuota() {
    return INPUT_QUOTA;
  }

  /** What `input` counts against inputQuota: its length in characters (code points). */
  /** @param {unknown} input @param {{ signal?: AbortSignal }} [options] */
  async measureInputUsage(input, { signal } = {}) {
    this.#check(signal);
    return [...String(input)].length;
  }

  /** The translation of `input` (sentences split, translated and joined; lines kept). */
  /** @param {unknown} input @param {{ signal?: AbortSignal }} [options] */
  async translate(input, { signal } = {}) {
    return (await this.#run(input, signal)).text;
  }

  /**
   * The translation as a ReadableStream of string chunks: each sentence's translation (with
   * the space or line break before it) as soon as it is decoded, in order; the chunks
   * joined equal translate()'s result.
   */
  /** @param {unknown} input @param {{ signal?: AbortSignal }} [options] */
  translateStreaming(input, { signal } = {}) {
    let sent = "";
    /** @type {Promise<{ text: string }> | undefined} */
    let run;
    return new ReadableStream({
      start: (controller) => {
        run = this.#run(input, signal, ({ text }) => {
          if (text.startsWith(sent) && text.length > sent.length) {
            controller.enqueue(text.slice(sent.length));
            sent = text;
          }
        });
        run.then(
          ({ text }) => {
            if (text.startsWith(sent) && text.length > sent.length) controller.enqueue(text.slice(sent.length));
            controller.close();
          },
          (e) => controller.error(e),
        );
      },
      cancel: () => {
        run?.catch(() => {});
      },
    });
  }

  /** Frees the model and its worker; later calls reject with InvalidStateError. */
  /**
   * Extension (not in the Translator API): fine-tunes this translator on the visitor's own
   * pairs in its worker, kept for this language pair across reloads (Transduce#adapt).
   * @param {string | [string, string][]} pairs
   * @param {import("./transduce.js").AdaptOptions} [options]
   */
  async adapt(pairs, options = {}) {
    this.#check(options?.signal);
    if (this.#stages.length > 1) throw error("NotSupportedError", "adapt(): a translator through English runs two models; adapt a direct one");
    return this.#stages[0].engine.adapt(pairs, options);
  }

  /** Extension: the shipped weights again; the stored adaptation is deleted. */
  async reset() {
    this.#check();
    return Promise.all(this.#stages.map((s) => s.engine.reset())).then(() => undefined);
  }

  /** Extension: how the weights were adapted ({ pairs, steps, … }), or null. */
  get adaptation() {
    return this.#stages.length === 1 ? this.#stages[0].engine.adaptation : null;
  }

  destroy() {
    if (this.#destroyed) return;
    this.#destroyed = true;
    for (const { engine } of this.#stages) engine.free();
    for (const reject of this.#pending) reject(error("AbortError", "the translator was destroyed"));
    this.#pending.clear();
  }

  /** @param {string} text @param {(p: { text: string }) => void} [onPartial] */
  #translate(text, onPartial) {
    return chain(this.#stages, text, onPartial);
  }

  /** @param {AbortSignal} [signal] */
  #check(signal) {
    if (this.#destroyed) throw error("InvalidStateError", "the translator was destroyed");
    this.#signal?.throwIfAborted();
    signal?.throwIfAborted();
  }

  /**
   * @param {unknown} input
   * @param {AbortSignal | undefined} signal
   * @param {(p: { text: string }) => void} [onPartial]
   * @returns {Promise<{ text: string }>}
   */
  async #run(input, signal, onPartial) {
    this.#check(signal);
    const text = String(input);
    if ([...text].length > INPUT_QUOTA) {
      throw error("QuotaExceededError", `the input is longer than inputQuota (${INPUT_QUOTA} characters)`);
    }
    if (!text.trim()) return { text: "" };
    /** @type {(reason: unknown) => void} */
    let reject = () => {}; // set by the executor, which runs at once
    /** @type {Promise<never>} */
    const destroyed = new Promise((_, r) => (reject = r));
    this.#pending.add(reject);
    try {
      const work = this.#translate(text, onPartial);
      work.catch(() => {}); // an aborted call's result is dropped
      return await abortable(Promise.race([work, destroyed]), signal);
    } finally {
      this.#pending.delete(reject);
    }
  }
}

const CREATE = Symbol("create");

/** Each translator's models, for stagesOf(). */
const STAGES = new WeakMap();

/**
 * The models a translator runs, in order, [{ engine (a Transduce), token (its target
 * token, or undefined) }]: one, or two through English. For element.js, which needs each
 * sentence's pieces and attention, not the text alone.
 * @param {Translator} translator
 * @returns {{ engine: Transduce, token: string | undefined }[]}
 */
export function stagesOf(translator) {
  const stages = STAGES.get(translator);
  if (!stages) throw new TypeError("not a Translator of this package");
  return stages;
}

/**
 * Through every stage: one model as it is; a pivot sentence by sentence, each sentence of the
 * first model handed to the second as soon as it is decoded (the two workers run side by
 * side), the output streamed in the input's order with its lines kept.
 * @param {Stage[]} stages
 * @param {string} text
 * @param {(p: { text: string }) => void} [onPartial]
 * @returns {Promise<{ text: string }>}
 */
async function chain(stages, text, onPartial) {
  const [first, ...rest] = stages;
  /** @param {Stage} stage @param {Parameters<Transduce["translate"]>[1]} [extra] */
  const options = (stage, extra = {}) => ({ ...(stage.token ? { prefix: `${stage.token} ` } : {}), ...extra });
  if (rest.length === 0) return first.engine.translate(text, options(first, onPartial ? { onPartial } : {}));
  const lines = text.split("\n");
  /** @type {string[][]} */
  const out = lines.map(() => []);
  let emitted = Promise.resolve();
  const done = [];
  for (const [l, line] of lines.entries()) {
    if (!line.trim()) continue;
    /** @type {Promise<string>[]} */
    const pending = [];
    await first.engine.translate(line, options(first, {
      onPartial: ({ index, sentence }) => {
        // The next stage, as soon as this sentence is ready.
        const next = rest.reduce(
          (p, stage) => p.then((t) => stage.engine.translate(t, options(stage)).then((r) => r.text)),
          Promise.resolve(sentence.target),
        );
        pending[index] = next;
        emitted = emitted.then(() => next).then((t) => {
          out[l].push(t);
          onPartial?.({ text: out.map((o) => o.join(" ")).slice(0, l + 1).join("\n") });
        });
      },
    }));
    done.push(...pending);
  }
  await Promise.all(done);
  await emitted;
  return { text: out.map((o) => o.join(" ")).join("\n") };
}

/**
 * `promise`, or its rejection with the signal's reason (an AbortError by default) as soon as
 * the signal aborts; `dispose(value)` frees a value that arrives after the abort.
 * @template T
 * @param {Promise<T>} promise
 * @param {AbortSignal} [signal]
 * @param {(value: T) => void} [dispose]
 * @returns {Promise<T>}
 */
function abortable(promise, signal, dispose) {
  if (!signal) return promise;
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason ?? error("AbortError", "aborted"));
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        if (signal.aborted) dispose?.(value);
        else resolve(value);
      },
      (e) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}

/**
 * Configures the registry (see configure()) and defines globalThis.Translator as this
 * polyfill where the browser has no Translator of its own, or where `replaceNative` asks
 * for it over the browser's (whose own models may come from its vendor's servers, and wait
 * there offline). Returns true if it defined it.
 * @param {Parameters<typeof import("./translator.js").install>[0]} [options]
 */
export function install(options = {}) {
  const { replaceNative = false, ...rest } = options;
  if (typeof replaceNative !== "boolean") throw new TypeError(`Translator: replaceNative must be true or false, not ${typeof replaceNative}`);
  configure(rest);
  if (typeof /** @type {WithTranslator} */ (globalThis).Translator !== "undefined" && /** @type {WithTranslator} */ (globalThis).Translator !== Translator && !replaceNative) return false;
  Object.defineProperty(globalThis, "Translator", { value: Translator, configurable: true, writable: true });
  return true;
}

export default Translator;
