// @ts-check
// transduce in the browser: the public JavaScript API.
//
//   import { Transduce } from "transduce";
//   const t = await Transduce.load("models/en-de/", { backend: "auto" });
//   const { text } = await t.translate("A man is riding a bike.");
//   t.free();
//
// The model runs in a Web Worker (worker.js, next to this file), so the page never
// freezes while a bundle loads or a sentence is decoded. Bundles are fetched with
// progress, kept in the Cache API and checked against the sha256 sums in config.json.

/** Where the worker script lives; override with `options.workerUrl`. */
const DEFAULT_WORKER = new URL("./worker.js", import.meta.url);

/** @typedef {import("./transduce.js").Transduce} Declared the class as transduce.d.ts declares it */
/** @typedef {NonNullable<NonNullable<Parameters<Declared["translate"]>[1]>["onPartial"]>} OnPartial */
/**
 * What the worker's load answers (worker.js's OPS.load), kept for the getters; each
 * request's `backend`, `device` and `why` replace its own (#ran).
 * @typedef {object} Info
 * @property {"webgpu" | "cpu"} backend
 * @property {string} device
 * @property {string} [fallbackReason]
 * @property {Declared["threads"]} threads
 * @property {string} [why]
 * @property {Declared["calibration"]} [calibration]
 * @property {Declared["hub"]} [hub]
 * @property {Declared["config"]} config the bundle's config.json
 * @property {string[]} [languageTokens]
 * @property {Declared["channel"]} [channel]
 */
/**
 * Each op of the worker (worker.js's OPS): what it answers, and the callback that gets what
 * it posts on the way (`never`: nothing).
 * @typedef {object} Ops
 * @property {{ answer: Info, onEvent: NonNullable<import("./transduce.js").LoadOptions["onProgress"]> }} load
 * @property {{ answer: import("./transduce.js").AdaptResult & { config: Declared["config"] }, onEvent: NonNullable<import("./transduce.js").AdaptOptions["onProgress"]> }} adapt
 * @property {{ answer: boolean, onEvent: never }} cancelAdapt
 * @property {{ answer: { config: Declared["config"] }, onEvent: never }} reset
 * @property {{ answer: import("./transduce.js").TranslateResult, onEvent: OnPartial }} translate
 * @property {{ answer: import("./transduce.js").ParseResult, onEvent: never }} parse
 * @property {{ answer: import("./transduce.js").Attention, onEvent: never }} attention
 * @property {{ answer: Awaited<ReturnType<Declared["memory"]>>, onEvent: never }} memory
 * @property {{ answer: void, onEvent: never }} loseDevice
 */
/**
 * A request in flight: its promise's ends, and the caller's callback of its events.
 * @typedef {{ resolve: (value: unknown) => void, reject: (reason: unknown) => void, onEvent?: (value: unknown) => void }} Pending
 */
/**
 * What the worker posts (worker.js's onmessage): an op's event or answer, or its error.
 * @typedef {{ id: number, kind: "event", value: unknown } | { id: number, kind: "ok", value: unknown } | { id: number, kind: "error", value: { message: string, code: import("./transduce.js").ErrorCode | null, file: string | null, retryAfter: number | null } }} Reply
 */

export class TransduceError extends Error {
  /**
   * `code` and `file` say what went wrong and where, where known (a model by name).
   * @param {string} message
   * @param {{ code?: import("./transduce.js").ErrorCode | null, file?: string | null, retryAfter?: number | null }} [fields]
   */
  constructor(message, { code = null, file = null, retryAfter = null } = {}) {
    super(message);
    this.name = "TransduceError";
    this.code = code;
    this.file = file;
    // A hub's 429: the seconds it asks to wait.
    if (retryAfter !== null) this.retryAfter = retryAfter;
  }
}

export class Transduce {
  #worker;
  #next = 1;
  /** @type {Map<number, Pending>} */
  #pending = new Map();
  /** @type {Info} load() sets it before it returns the instance */
  #info = /** @type {Info} */ (/** @type {unknown} */ (undefined));

  /** @param {Worker} worker */
  constructor(worker) {
    this.#worker = worker;
    worker.onmessage = ({ data }) => this.#receive(data);
    worker.onerror = (event) => {
      const error = new TransduceError(`worker failed: ${event.message || "could not start"}`);
      for (const { reject } of this.#pending.values()) reject(error);
      this.#pending.clear();
    };
  }

  /**
   * Loads a bundle: a folder URL holding config.json, tokenizer.json and
   * model.safetensors, `{ config, tokenizer, weights }` as ArrayBuffers / Uint8Arrays, or an
   * OPUS-MT model on the Hugging Face hub by name, `hf:ORG/NAME[@REVISION]` (e.g.
   * "hf:Helsinki-NLP/opus-mt-en-fr"): its files are downloaded, converted into a bundle in
   * the worker (the same conversion as `transduce import`) and kept in the Cache API, so a
   * second load needs no network. Errors carry `code` and `file` (hub.js lists the codes).
   *
   * options.hub: the hub `hf:` names come from (default https://huggingface.co).
   * options.weights: how a model by name is stored, "int8" (default), "f16" or "f32".
   * options.token: a Hugging Face access token, for a gated or private model by name: sent
   *   to the hub only (never to its CDN, nor kept in the cache).
   * options.languages: { source, target } for a model by name whose name and card do not
   *   say (a fine-tuned model under its author's own name), e.g. { source: "en",
   *   target: "de" }; they then win over what the name or card says.
   *
   * options.backend: "auto" (measured: on a hardware adapter both backends are timed on
   *   the same small requests once per adapter and model, the result cached, and each
   *   request then goes to the faster for its size; otherwise the CPU), "webgpu" (fail
   *   rather than fall back at load; a GPU lost later hands requests to the CPU) or "cpu".
   * options.calibrate: in "auto", measure even a software adapter or Firefox's WebGPU;
   *   an array of request sizes (sentences) measures those only (default [1, 8]).
   * options.onProgress({ file, url, loaded, total, cached }): download progress (a
   *   channel's files report too; `url` tells them apart).
   * options.cache: use the Cache API (default true).
   * options.relaxedSimd: the int8 products use relaxed-SIMD dot products where the browser
   *   has them (default true; false: SIMD128 everywhere, the same outputs, slower).
   * options.channel: a translator the other way (a bundle URL or { config, tokenizer,
   *   weights }) that checks every translation the beam finished: noisy-channel reranking
   *   (Yee et al. 2019), as `transduce translate --channel` does. It decodes on the CPU,
   *   and each translation then takes about twice as long; `translate()` uses it unless
   *   given `channel: false`.
   * options.channelWeight: the weight of its score (default: the `channel.weight` the
   *   model's config.json records, chosen on val).
   * options.adapted: load the visitor's adaptation of this model where one is stored
   *   (`adapt()`; default true). false: the shipped weights, the stored ones kept.
   * @param {string | URL | import("./transduce.js").BundleBytes} source
   * @param {import("./transduce.js").LoadOptions} [options]
   */
  static async load(source, options = {}) {
    const { backend = "auto", onProgress, cache = true, calibrate = false, relaxedSimd = true, workerUrl = DEFAULT_WORKER, adapted = true, hub, weights, languages, token } = options;
    if (!["auto", "webgpu", "cpu"].includes(backend)) {
      throw new TransduceError(`unknown backend "${backend}" (expected "auto", "webgpu" or "cpu")`);
    }
    const bundle = bundleArgs(source, "load()", { hub, weights, languages, token });
    if (!bundle) throw new TransduceError("load() needs a bundle URL or { config, tokenizer, weights }");
    const channel = bundleArgs(options.channel, "options.channel");
    const { channelWeight } = options;
    if (channelWeight !== undefined && !(typeof channelWeight === "number" && Number.isFinite(channelWeight))) {
      throw new TransduceError("options.channelWeight must be a finite number");
    }
    if (channelWeight !== undefined && !channel) {
      throw new TransduceError("options.channelWeight needs options.channel (the reverse model)");
    }
    let worker;
    try {
      worker = new Worker(workerUrl, { type: "module" });
    } catch (e) {
      throw new TransduceError(`cannot start the worker at ${workerUrl}: ${/** @type {Error} */ (e).message}`);
    }
    const t = new Transduce(worker);
    const args = { ...bundle, backend, cache, calibrate: Array.isArray(calibrate) ? calibrate : !!calibrate, relaxedSimd: !!relaxedSimd, channel, channelWeight, adapted: adapted !== false };
    try {
      t.#info = await t.#call("load", args, onProgress);
    } catch (e) {
      worker.terminate();
      throw e;
    }
    return t;
  }

  /** "webgpu" or "cpu": where the last request ran (at first: where the model loaded). */
  get backend() { return this.#info.backend; }
  /** The adapter or CPU decoder, as a readable string. */
  get device() { return this.#info.device; }
  /** Why `auto` chose the CPU, or why the GPU was given up (undefined otherwise). */
  get fallbackReason() { return this.#info.fallbackReason; }
  /**
   * The CPU decoder's threads: { threads, reason } (reason, when there is one, says why no
   * more: e.g. the page is not cross-origin isolated, so wasm threads cannot run).
   */
  get threads() { return this.#info.threads; }
  /** Why the last request ran where it did (`auto`'s measurement, a lost GPU), if known. */
  get why() { return this.#info.why; }
  /** `auto`'s measurement: { ms: { [sentences]: { cpu, webgpu } }, gpuFrom, reason, cached }. */
  get calibration() { return this.#info.calibration; }
  /**
   * For a model loaded by name: { reference (pinned to its commit), card (the model card:
   * its licence and the credit it asks for), cached, offline, warning ({ code, message }:
   * e.g. "quota", the bundle could not be stored) }; undefined otherwise.
   */
  get hub() { return this.#info.hub; }
  /** The bundle's config.json: task, model, decoding defaults, metrics, provenance. */
  get config() { return this.#info.config; }
  /**
   * The target-language codes of a model of many targets (`[">>deu<<", ">>nld<<"]`,
   * sorted), each chosen with translate's `to` ("nld"); empty for a model of one.
   */
  get languageTokens() { return this.#info.languageTokens ?? []; }
  /** "translate" or "parse". */
  get task() { return this.#info.config.task.kind; }
  /** The reverse model loaded with options.channel: { config, weight }, or undefined. */
  get channel() { return this.#info.channel; }
  /**
   * How the loaded weights were adapted ({ pairs, replay, steps, learning_rate, seed,
   * from_sha256 }), or null for the shipped weights.
   */
  get adaptation() { return this.#info.config.adaptation ?? null; }

  /**
   * Teaches the translator the visitor's own words: fine-tunes it on `pairs` in the worker
   * (on the CPU, one core; nothing leaves the machine), mixed with general pairs so it
   * keeps what it knew, then decodes with the result and stores it in the browser for
   * this model (a later load() finds it). Adapting again continues from the adapted model.
   *
   * pairs: text, one `source<TAB>translation` a line, or an array of [source, translation].
   * options.onProgress({ step, steps, loss, elapsedMs, remainingMs }): after every step.
   * options.signal: an AbortSignal; aborting stops after the current step, and the model
   *   and the stored weights stay as they were.
   * options.steps, learningRate, pairsPerStep, replayPerStep, seed: the recipe (defaults:
   *   30 steps at 1e-4, 4 of your pairs and 12 general ones a step, seed 1).
   * options.replay: general pairs (same format) instead of the bundle's replay.tsv, or
   *   false for none. options.store: keep the result across reloads (default true).
   * Resolves to { adaptation, stored, storeError, ms }.
   * @param {Parameters<Declared["adapt"]>[0]} pairs
   * @param {Parameters<Declared["adapt"]>[1]} [options]
   */
  async adapt(pairs, options = {}) {
    if (!isOptions(options)) return rejectOptions(options);
    const { onProgress, signal, ...recipe } = options ?? {};
    if (onProgress !== undefined && typeof onProgress !== "function") {
      throw new TransduceError("options.onProgress must be a function");
    }
    const text = pairsText(pairs);
    if (signal?.aborted) throw new TransduceError("adaptation cancelled");
    const cancel = () => this.#call("cancelAdapt", {});
    signal?.addEventListener("abort", cancel, { once: true });
    try {
      const result = await this.#call("adapt", { pairs: text, options: recipe }, onProgress);
      this.#info = { ...this.#info, config: result.config };
      return { adaptation: result.adaptation, stored: result.stored, storeError: result.storeError, ms: result.ms };
    } finally {
      signal?.removeEventListener("abort", cancel);
    }
  }

  /** Back to the shipped weights; the stored adaptation of this model is deleted. */
  async reset() {
    const { config } = await this.#call("reset", {});
    this.#info = { ...this.#info, config };
  }

  /**
   * Translates text of any length: it is split into sentences, translated one by one, and
   * each finished sentence is passed to `options.onPartial({ index, count, sentence, text })`.
   * options: { beam, alpha, maxExtra } (defaults: the bundle's, §6.1: 4, 0.6, 50), and
   * channel (default: true when loaded with options.channel; false decodes without it),
   * to (a model of many targets: the target's code, e.g. "nld", put first as `>>nld<<`;
   * see languageTokens) or prefix (text put before every sentence, e.g. ">>nld<< ").
   * Resolves to { text, sentences: [{ source, target, sourceTokens, targetTokens,
   * sourceIds, targetIds, line }], channel, ms, backend, device, why }.
   * @param {string} text
   * @param {Parameters<Declared["translate"]>[1]} [options]
   */
  translate(text, options = {}) {
    if (!isOptions(options)) return rejectOptions(options);
    const { onPartial, ...decode } = options ?? {};
    if (onPartial !== undefined && typeof onPartial !== "function") {
      return Promise.reject(new TransduceError("options.onPartial must be a function"));
    }
    return this.#call("translate", { text, options: decode }, onPartial).then((r) => this.#ran(r));
  }

  /**
   * Parses one English sentence (§6.3). options: { beam, alpha, maxExtra, constrained }.
   * Resolves to { words, tree, bracketed, wellFormed, ms }; `tree` nodes are
   * { label, children } or { label (the tag), word }.
   * @param {string} text
   * @param {Parameters<Declared["parse"]>[1]} [options]
   */
  parse(text, options = {}) {
    if (!isOptions(options)) return rejectOptions(options);
    const { constrained = true, ...decode } = options ?? {};
    return this.#call("parse", { text, options: decode, constrained }).then((r) => this.#ran(r));
  }

  /**
   * Records where a request ran, so `backend`, `device` and `why` follow it.
   * @template {{ backend: "webgpu" | "cpu", device: string, why?: string }} R
   * @param {R} result
   * @returns {R}
   */
  #ran(result) {
    if (result?.backend) {
      this.#info = { ...this.#info, backend: result.backend, device: result.device, why: result.why };
      if (result.why?.startsWith("the GPU failed")) this.#info.fallbackReason = result.why;
    }
    return result;
  }

  /**
   * The worker's wasm memory: { wasmBytes, modules: { cpu?, webgpu?, adapt? } } in bytes. A wasm
   * memory never shrinks, so this is the most the model has needed at once (its load
   * included).
   */
  memory() {
    return this.#call("memory", {});
  }

  /** Destroys the GPU device, as a browser may at any time (tests of the CPU fallback). */
  loseDevice() {
    return this.#call("loseDevice", {});
  }

  /**
   * Attention weights for one translated sentence (an entry of `translate().sentences`):
   * { sourceTokens, targetTokens, encoderSelf, decoderSelf, cross }, each a list of layers
   * { heads, rows, cols, data } with data row-major [head][row][col].
   * @param {import("./transduce.js").SentenceTranslation} sentence
   */
  attention(sentence) {
    if (typeof sentence !== "object" || sentence === null) {
      return Promise.reject(
        new TransduceError("attention() takes a sentence of translate()'s result ({ sourceIds, targetIds })"),
      );
    }
    return this.#call("attention", { sourceIds: sentence.sourceIds, targetIds: sentence.targetIds });
  }

  /** Stops the worker and frees the model. */
  free() {
    this.#worker.terminate();
    for (const { reject } of this.#pending.values()) reject(new TransduceError("freed"));
    this.#pending.clear();
  }

  /**
   * @template {keyof Ops} Op
   * @param {Op} op
   * @param {object} args
   * @param {Ops[Op]["onEvent"]} [onEvent]
   * @returns {Promise<Ops[Op]["answer"]>}
   */
  #call(op, args, onEvent) {
    const id = this.#next++;
    return /** @type {Promise<Ops[Op]["answer"]>} the worker answers each op with its own (Ops) */ (new Promise((/** @type {(value: unknown) => void} */ resolve, reject) => {
      this.#pending.set(id, { resolve, reject, onEvent: /** @type {Pending["onEvent"]} the worker posts each op's own events (Ops) */ (onEvent) });
      try {
        this.#worker.postMessage({ id, op, args });
      } catch (e) {
        // Arguments the worker cannot receive (functions, DOM nodes, …).
        this.#pending.delete(id);
        reject(new TransduceError(`cannot send ${op}() its arguments: ${/** @type {Error} */ (e).message}`));
      }
    }));
  }

  /** @param {Reply} reply */
  #receive({ id, kind, value }) {
    const pending = this.#pending.get(id);
    if (!pending) return;
    if (kind === "event") {
      pending.onEvent?.(value);
      return;
    }
    this.#pending.delete(id);
    if (kind === "ok") pending.resolve(value);
    else pending.reject(new TransduceError(value?.message ?? String(value), value ?? {}));
  }
}

/**
 * A bundle as the worker takes it: { url } for a folder URL (relative to the page), { hf }
 * for a model by name, { files } for { config, tokenizer, weights }; undefined when `source`
 * is left out; anything else is an error naming `what`.
 * @param {string | URL | import("./transduce.js").BundleBytes | undefined} source
 * @param {string} what
 * @param {Pick<import("./transduce.js").LoadOptions, "hub" | "weights" | "languages" | "token">} [byName] how a model by name loads
 */
function bundleArgs(source, what, { hub = undefined, weights = undefined, languages = undefined, token = undefined } = {}) {
  if (source === undefined || source === null) return undefined;
  if (typeof source === "string" && source.startsWith("hf:")) {
    if (hub !== undefined && typeof hub !== "string") throw new TransduceError("options.hub must be a URL (a string)");
    const code = /^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]+)*$/;
    if (languages !== undefined && !(typeof languages === "object" && languages !== null && code.test(languages.source) && code.test(languages.target))) {
      throw new TransduceError(`options.languages must be { source, target } language codes such as { source: "en", target: "de" }, not ${JSON.stringify(languages)}`);
    }
    if (token !== undefined && (typeof token !== "string" || !/^\S+$/.test(token))) throw new TransduceError("options.token must be a Hugging Face access token (a string)");
    const stated = languages ? { source: languages.source, target: languages.target } : {};
    return { hf: { reference: source, hub: hub ?? "https://huggingface.co", weights: weights ?? "int8", ...stated, ...(token ? { token } : {}) } };
  }
  if (typeof source === "string" || source instanceof URL) {
    const base = new URL(source, globalThis.document?.baseURI ?? globalThis.location?.href);
    if (!base.pathname.endsWith("/")) base.pathname += "/";
    return { url: base.href };
  }
  if (source.config && source.tokenizer && source.weights) return { files: source };
  throw new TransduceError(`${what} needs a bundle URL or { config, tokenizer, weights }`);
}

/**
 * Pairs as the worker takes them: TSV text, from text or from [source, translation] lists.
 * @param {Parameters<Declared["adapt"]>[0]} pairs
 */
function pairsText(pairs) {
  if (typeof pairs === "string") return pairs;
  if (!Array.isArray(pairs)) {
    throw new TransduceError("adapt() takes text (one `source<TAB>translation` a line) or an array of [source, translation]");
  }
  return pairs
    .map((pair, i) => {
      const ok = Array.isArray(pair) && pair.length === 2 && pair.every((s) => typeof s === "string");
      if (!ok) throw new TransduceError(`adapt(): pair ${i + 1} is not [source, translation] (two strings)`);
      if (pair.some((s) => /[\t\n\r]/.test(s))) {
        throw new TransduceError(`adapt(): pair ${i + 1} holds a tab or line break; give one sentence a side`);
      }
      return pair.join("\t");
    })
    .join("\n");
}

/**
 * Options are an object, or left out.
 * @param {unknown} options
 */
function isOptions(options) {
  return options === undefined || options === null || (typeof options === "object" && !Array.isArray(options));
}

/** @param {unknown} options */
function rejectOptions(options) {
  const kind = Array.isArray(options) ? "an array" : typeof options;
  return Promise.reject(new TransduceError(`options must be an object, not ${kind}`));
}

export default Transduce;
