// @ts-check
// The Web Worker that owns the wasm module and the model (see transduce.js).
import { deleteAdapted, readAdapted, storeKey, writeAdapted } from "./adapted.js";
import { bundleBytes } from "./bundles.js";
import { errorMessage } from "./bytes.js";
import { calibrated, calibrationSizes } from "./calibration.js";

// Sentences decoded together: a paragraph costs about its longest sentence's steps, and the
// first results still arrive soon.
const BATCH = 16;
// The decoder's batch limit (crates/transduce-web's MAX_BATCH).
const MAX_BATCH = 64;

/**
 * What the worker uses of a wasm module: the CPU, threaded and WebGPU builds share it.
 * @typedef {Pick<typeof import("./transduce-web.js"), "Engine" | "splitSentences" | "useRelaxedSimd">} Module
 */
/** @typedef {import("./transduce-web.js").Engine} Engine */
/** @typedef {"cpu" | "webgpu"} Backend */
/** @typedef {{ config: Uint8Array, tokenizer: Uint8Array, weights: Uint8Array }} Files */
/**
 * The loaded model (see `current`).
 * @typedef {object} Current
 * @property {string | undefined} url the bundle folder's, where it came from one
 * @property {import("./bundles.js").Shipped} shipped
 * @property {Files | null} adapted
 * @property {Request} key
 * @property {Backend} backend
 * @property {number} batch sentences decoded together
 */
/** @typedef {(value: unknown) => void} Emit an op's progress, posted as an "event" */

// The loaded model. load() sets it with `engineModule` and `current`, and runs once per
// worker, before any other request (transduce.js): wherever need() passed, all three are
// there (the casts to Engine, Module and Current below).
/** @type {Engine | null} */
let engine = null;
// The reverse translator that checks the engine's translations (noisy-channel reranking),
// always on the CPU, from the engine's own module; and its weight.
/** @typedef {{ engine: Engine, weight: number }} Channel */
/** @type {Channel | null} */
let channel = null;
// The module the engine came from (its splitSentences goes with it).
/** @type {Module | null} */
let engineModule = null;
// `auto` on an engine with the GPU decoder: batches of at least `gpuFrom` sentences go to
// the GPU, smaller ones to the CPU, as the calibration measured (null: no choice to make).
/** @type {{ gpuFrom: number | null, reason: string } | null} */
let policy = null;
// The loaded bundle as it shipped ({ config, tokenizer, weights }), its adapted weights if
// any, where it came from, the backend it decodes on and the key its adaptation is stored
// under (the shipped weights' sha256).
/** @type {Current | null} */
let current = null;
// The adaptation running now: { cancelled }.
/** @type {{ cancelled: boolean } | null} */
let adapting = null;

// The wasm module comes in two builds with one API: transduce-web.js, the CPU build that
// every load uses unless WebGPU may run, and transduce-web-webgpu.js, the same plus the
// GPU decoder (hand-written WGSL over the browser's WebGPU), fetched only then. Static
// import() strings, so bundlers see both files.
/** @type {{ [backend in Backend]?: Promise<Module> }} */
const modules = {};
// Each module's relaxed-SIMD kernel (the exports of transduce-relaxed.wasm instantiated over
// that module's memory), or null where the browser lacks relaxed SIMD.
/** @type {{ [backend in Backend]?: WebAssembly.Exports | null }} */
const kernels = {};
// Each module's linear memory (what memory() reports).
/** @type {Record<string, WebAssembly.Memory>} */
const memories = {};
/**
 * @param {Backend} backend
 * @returns {Promise<Module>}
 */
function wasm(backend) {
  modules[backend] ??= (backend === "cpu" ? cpuModule() : webgpuModule())
    .catch((e) => {
      delete modules[backend];
      throw new Error(`cannot load the ${backend} wasm module: ${message(e)}`);
    });
  return /** @type {Promise<Module>} set above */ (modules[backend]);
}

async function webgpuModule() {
  const module = await import("./transduce-web-webgpu.js");
  const [exports, kernel] = await Promise.all([module.default(), relaxedKernel()]);
  memories.webgpu = exports.memory;
  kernels.webgpu = await relaxedOver(kernel, exports.memory);
  return module;
}

// The relaxed kernel's instance over `memory`, or null where it does not instantiate (the
// SIMD128 kernel serves).
/**
 * @param {WebAssembly.Module | null} kernel
 * @param {WebAssembly.Memory} memory
 * @returns {Promise<WebAssembly.Exports | null>}
 */
async function relaxedOver(kernel, memory) {
  if (!kernel) return null;
  try {
    // From a compiled module, instantiate gives the instance itself.
    const instance = /** @type {WebAssembly.Instance} */ (/** @type {unknown} */ (await WebAssembly.instantiate(kernel, { env: { memory } })));
    return instance.exports;
  } catch {
    return null;
  }
}

// How many threads the CPU decoder has, and why no more: { threads, reason }.
/** @type {{ threads: number, reason?: string }} */
let threading = { threads: 1, reason: "not loaded yet" };

// The CPU module: the threaded build on navigator.hardwareConcurrency threads where the page
// is cross-origin isolated (wasm threads need SharedArrayBuffer) and has more than one core;
// else, or where the threaded build fails to start, the one-thread build. Same outputs.
async function cpuModule() {
  const cores = navigator.hardwareConcurrency ?? 1;
  if (!self.crossOriginIsolated) {
    threading = { threads: 1, reason: "one thread: the page is not cross-origin isolated" };
  } else if (cores < 2) {
    threading = { threads: 1, reason: "one thread: the browser reports one core" };
  } else {
    try {
      return await threadedModule(cores);
    } catch (e) {
      threading = { threads: 1, reason: `one thread: the threaded module did not start (${message(e)})` };
    }
  }
  const module = await import("./transduce-web.js");
  const [exports, kernel] = await Promise.all([module.default(), relaxedKernel()]);
  memories.cpu = exports.memory;
  kernels.cpu = await relaxedOver(kernel, exports.memory);
  return module;
}

// The threaded CPU module over one shared memory, its pool of `threads` threads each a Web
// Worker (thread.js) over the same module and memory. Resolves once every thread is ready.
/** @param {number} threads */
async function threadedModule(threads) {
  // The bindings first: where the threaded build was not made (no nightly toolchain), that
  // import fails before any wasm is fetched.
  const module = await import("./transduce-web-threads.js");
  const [compiled, kernel] = await Promise.all([
    WebAssembly.compileStreaming(fetch(new URL("./transduce-web-threads_bg.wasm", import.meta.url))),
    relaxedKernel("./transduce-relaxed-threads.wasm"),
  ]);
  const exports = await module.default({ module_or_path: compiled });
  const memory = exports.memory;
  const relaxed = await relaxedOver(kernel, memory);
  module.startThreads(threads);
  await Promise.all(
    Array.from({ length: threads }, () => new Promise((/** @type {(v?: unknown) => void} */ resolve, reject) => {
      const thread = new Worker(new URL("./thread.js", import.meta.url), { type: "module" });
      thread.onmessage = ({ data }) => (data.ready ? resolve() : reject(new Error(data.error)));
      thread.onerror = (e) => reject(new Error(e.message || "a thread's worker failed to load"));
      thread.postMessage({ module: compiled, memory, relaxed: relaxed ? kernel : null });
    })),
  );
  memories.cpu = memory;
  kernels.cpu = relaxed;
  threading = { threads: module.decodeThreads() };
  return module;
}

// The int8 products' relaxed-SIMD kernel (transduce-relaxed.wasm, ~2 KB: one function over
// the page module's memory), compiled where the browser validates relaxed SIMD (Chrome 114
// on; elsewhere the module's SIMD128 kernel runs, with the same outputs).
// The threaded CPU module has its own build, which imports a shared memory.
/** @type {Record<string, Promise<WebAssembly.Module | null>>} */
const relaxedModules = {};
/**
 * @param {string} [file]
 * @returns {Promise<WebAssembly.Module | null>}
 */
function relaxedKernel(file = "./transduce-relaxed.wasm") {
  relaxedModules[file] ??= fetch(new URL(file, import.meta.url))
    .then((r) => (r.ok ? r.arrayBuffer() : null))
    .then((bytes) => (bytes && WebAssembly.validate(bytes) ? WebAssembly.compile(bytes) : null))
    .catch(() => null);
  return relaxedModules[file];
}

/**
 * A request from transduce.js (its #call): `args` are the op's own (`any`: each op takes its
 * own, and checks what transduce.js does not).
 * @typedef {{ id: number, op: keyof typeof OPS, args: any }} Call
 */
/**
 * What a thrown error may carry besides its message (hub.js's HubError, the import's errors).
 * @typedef {{ code?: unknown, file?: unknown, retryAfter?: unknown } | null | undefined} ErrorFields
 */

/** @param {MessageEvent<Call>} event */
self.onmessage = async ({ data: { id, op, args } }) => {
  /** @type {Emit} */
  const emit = (value) => self.postMessage({ id, kind: "event", value });
  try {
    const value = await /** @type {(args: any, emit: Emit) => Promise<unknown>} each op as called */ (OPS[op])(args, emit);
    self.postMessage({ id, kind: "ok", value });
  } catch (e) {
    // `code` and `file` where the error has them (a model by name: hub.js, the import).
    self.postMessage({ id, kind: "error", value: { message: message(e), code: /** @type {ErrorFields} */ (e)?.code ?? null, file: /** @type {ErrorFields} */ (e)?.file ?? null, retryAfter: /** @type {ErrorFields} */ (e)?.retryAfter ?? null } });
  }
};

const message = errorMessage;

/**
 * A bundle as transduce.js's bundleArgs gives it: a folder URL, the files, or a model by name.
 * @typedef {{ url?: string, files?: import("./transduce.js").BundleBytes, hf?: import("./hub.js").HubOptions }} Source
 */
/**
 * load's arguments (transduce.js's Transduce.load).
 * @typedef {object} LoadArgs
 * @property {string} [url]
 * @property {import("./transduce.js").BundleBytes} [files]
 * @property {import("./hub.js").HubOptions} [hf]
 * @property {import("./transduce.js").Backend} backend
 * @property {boolean} cache
 * @property {boolean | number[]} [calibrate]
 * @property {boolean} [relaxedSimd]
 * @property {Source} [channel] the reverse model
 * @property {number} [channelWeight]
 * @property {boolean} [adapted] load the stored adaptation
 */
/**
 * adapt's arguments: the pairs as text (transduce.js's pairsText) and the recipe, with
 * `weights`, how the result's weights are stored (Adaptation.finish's).
 * @typedef {{ pairs: unknown, options?: Omit<import("./transduce.js").AdaptOptions, "onProgress" | "signal"> & { weights?: string } }} AdaptArgs
 */
/**
 * translate's arguments: the text (the engine's checkRequest checks it) and the options.
 * @typedef {{ text: string, options?: import("./transduce.js").DecodeOptions & { channel?: unknown, prefix?: unknown, to?: unknown } }} TranslateArgs
 */
/**
 * parse's arguments: the text and the options (the engine's checkRequest checks them).
 * @typedef {{ text: string, options: import("./transduce.js").DecodeOptions, constrained: unknown }} ParseArgs
 */

const OPS = {
  /**
   * @param {LoadArgs} args
   * @param {Emit} emit
   */
  async load({ url, files, hf, backend, cache, calibrate = false, relaxedSimd = true, channel: reverse, channelWeight, adapted: adaptedStore }, emit) {
    // The bundle downloads while the backend is chosen and its module compiles.
    const fetching = bundleBytes({ url, files, hf }, cache, emit);
    fetching.catch(() => {}); // awaited below; a failure must not surface twice
    const fetchingReverse = reverse ? bundleBytes(reverse, cache, emit) : Promise.resolve(null);
    fetchingReverse.catch(() => {}); // awaited below
    const choice = await chooseBackend(backend, calibrate);
    const compiling = wasm(choice.backend);
    compiling.catch(() => {}); // awaited below
    const shipped = await fetching;
    const key = await storeKey(shipped);
    // The visitor's adapted weights for this model, kept from an earlier visit.
    let adapted = adaptedStore !== false ? await readAdapted(key, shipped) : null;
    // The adapted weights where they load; where they no longer do (and the shipped ones
    // do), the entry is dropped and the shipped model serves.
    /** @type {(module: Module, backend: Backend) => Promise<Engine>} */
    const open = async (module, backend) => {
      if (adapted) {
        try {
          return await module.Engine.load(adapted.config, adapted.tokenizer, adapted.weights, backend);
        } catch {
          const model = await module.Engine.load(shipped.config, shipped.tokenizer, shipped.weights, backend);
          adapted = null;
          await deleteAdapted(key).catch(() => {});
          return model;
        }
      }
      // A model by name from this browser's store: its sums were checked when it was stored.
      return module.Engine.load(shipped.config, shipped.tokenizer, shipped.weights, backend, shipped.cached === true);
    };
    if (channel) channel.engine.free();
    channel = null;
    if (engine) engine.free();
    engine = null;
    engineModule = null;
    let module;
    let loaded;
    try {
      module = await compiling;
      module.useRelaxedSimd((relaxedSimd && kernels[choice.backend]) || undefined);
      loaded = await open(module, choice.backend);
    } catch (e) {
      if (backend !== "auto" || choice.backend === "cpu") throw e;
      // A WebGPU failure in auto mode: the CPU still works.
      choice.backend = "cpu";
      choice.fallbackReason = `WebGPU failed (${message(e)})`;
      module = await wasm("cpu");
      module.useRelaxedSimd((relaxedSimd && kernels.cpu) || undefined);
      loaded = await open(module, "cpu");
    }
    if (reverse) {
      try {
        const bytes = /** @type {import("./bundles.js").Shipped} `reverse` was given */ (await fetchingReverse);
        const checker = await module.Engine.load(bytes.config, bytes.tokenizer, bytes.weights, "cpu");
        const weight = channelWeight ?? loaded.config.channel?.weight;
        try {
          if (typeof weight !== "number") {
            throw new Error("the model's config.json records no channel weight chosen on val; give channelWeight");
          }
          loaded.checkChannel(checker, weight);
        } catch (e) {
          checker.free();
          throw e;
        }
        channel = { engine: checker, weight };
        if (bytes.keep) await bytes.keep();
      } catch (e) {
        loaded.free();
        throw new Error(`channel: ${message(e)}`);
      }
    }
    engine = loaded;
    engineModule = module;
    // On the threaded CPU module each thread takes a share of a batch: BATCH sentences a
    // thread keep each share as large as one thread's batch.
    const threads = choice.backend === "cpu" ? threading.threads : 1;
    current = { url, shipped, adapted, key, backend: choice.backend, batch: Math.min(BATCH * threads, MAX_BATCH) };
    // A model by name just converted is stored now that it has loaded.
    if (shipped.keep) shipped.warning = await shipped.keep();
    // A model by name: where it came from, its card, and what could not be stored.
    const hub = shipped.reference
      ? { reference: shipped.reference, card: shipped.card, cached: shipped.cached, offline: shipped.offline, conversion: shipped.conversion, warning: shipped.warning ? { code: shipped.warning.code, message: shipped.warning.message } : undefined }
      : undefined;
    policy = null;
    let calibration;
    if (backend === "auto" && engine.hasGpu) {
      calibration = await calibrated(engine, /** @type {string} auto chose the GPU: chooseBackend named its adapter */ (choice.adapterKey), cache, emit, calibrationSizes(calibrate));
      policy = { gpuFrom: calibration.gpuFrom, reason: calibration.reason };
      engine.useBackend(policy.gpuFrom === 1 ? "webgpu" : "cpu");
    }
    return {
      backend: engine.backend,
      device: engine.device,
      fallbackReason: choice.fallbackReason ?? (policy && engine.backend === "cpu" ? policy.reason : undefined),
      // The CPU decoder's threads (the CPU module's; the WebGPU module's CPU path has one).
      threads: choice.backend === "cpu" ? { ...threading } : { threads: 1, reason: "one thread: the WebGPU module's CPU path" },
      calibration,
      config: engine.config,
      languageTokens: engine.languageTokens,
      channel: channel ? { config: channel.engine.config, weight: channel.weight } : undefined,
      hub,
    };
  },

  // Fine-tunes the loaded translator on the visitor's pairs (a TSV text) in this worker,
  // a step at a time, yielding between steps so that cancelAdapt is heard. The result
  // replaces the model only when whole, and is stored (one Cache API entry, written at
  // the end: a cancel or a closed tab leaves the stored model as it was).
  /**
   * @param {AdaptArgs} args
   * @param {Emit} emit
   */
  async adapt({ pairs, options }, emit) {
    const model = need();
    if (model.config.task.kind !== "translate") throw new Error("adapt: only translators can be adapted; this model parses");
    if (adapting) throw new Error("adapt: an adaptation is already running");
    if (typeof pairs !== "string") throw new Error("adapt: pairs must be text, one `source<TAB>translation` a line");
    const { replay, store = true, weights, ...recipe } = options ?? {};
    if (replay !== undefined && replay !== false && typeof replay !== "string") {
      throw new Error("adapt: options.replay must be text (general pairs, one `source<TAB>translation` a line) or false");
    }
    const job = { cancelled: false };
    adapting = job;
    const started = performance.now();
    let adaptation = null;
    try {
      const [module, replayText] = await Promise.all([
        adaptModule(),
        replay === false ? "" : typeof replay === "string" ? replay : replayPairs(/** @type {Current} */ (current).url),
      ]);
      if (job.cancelled) throw new Error("adaptation cancelled");
      const from = /** @type {Current} */ (current).adapted ?? /** @type {Current} */ (current).shipped;
      const text = new TextEncoder();
      adaptation = new module.Adaptation(
        from.config, from.tokenizer, from.weights,
        text.encode(pairs), "your pairs", text.encode(replayText), "replay.tsv", recipe,
      );
      const training = performance.now();
      for (let i = 0; i < adaptation.steps; i++) {
        const report = adaptation.step();
        const elapsed = performance.now() - training;
        emit({ ...report, elapsedMs: elapsed, remainingMs: (elapsed / report.step) * (report.steps - report.step) });
        // A macrotask between steps: a cancel (or a translation) gets its turn.
        await new Promise((resolve) => setTimeout(resolve, 0));
        if (job.cancelled) throw new Error("adaptation cancelled");
      }
      /** @type {Files} */
      const files = adaptation.finish(weights);
      const next = await /** @type {Module} */ (engineModule).Engine.load(files.config, files.tokenizer, files.weights, /** @type {Current} */ (current).backend);
      let stored = false;
      let storeError;
      if (store) {
        try {
          stored = await writeAdapted(/** @type {Current} */ (current).key, files);
        } catch (e) {
          storeError = message(e);
        }
      }
      /** @type {Engine} */ (engine).free();
      engine = next;
      if (policy) route(engine, 1);
      /** @type {Current} */ (current).adapted = files;
      return { adaptation: engine.config.adaptation, config: engine.config, stored, storeError, ms: performance.now() - started };
    } finally {
      adaptation?.free();
      adapting = null;
    }
  },

  async cancelAdapt() {
    if (adapting) adapting.cancelled = true;
    return !!adapting;
  },

  // Back to the shipped weights: the stored adaptation is deleted.
  async reset() {
    need();
    if (adapting) throw new Error("reset: an adaptation is running; cancel it first");
    await deleteAdapted(/** @type {Current} */ (current).key);
    if (/** @type {Current} */ (current).adapted) {
      const { config, tokenizer, weights } = /** @type {Current} */ (current).shipped;
      const next = await /** @type {Module} */ (engineModule).Engine.load(config, tokenizer, weights, /** @type {Current} */ (current).backend);
      /** @type {Engine} */ (engine).free();
      engine = next;
      /** @type {Current} */ (current).adapted = null;
    }
    return { config: /** @type {Engine} */ (engine).config };
  },

  // Tests of the fallback: the browser may take the GPU device at any time.
  async loseDevice() {
    need().loseDevice();
  },

  /**
   * @param {TranslateArgs} args
   * @param {Emit} emit
   */
  async translate({ text, options }, emit) {
    const model = need();
    // Options first, then the text (a string, not empty, not too long): one clear error
    // before any work.
    // `channel` (default: on when a reverse model was loaded) is the worker's option.
    // `prefix` (a target token such as ">>fra<< " for a model of many targets) goes before
    // every sentence, as such models' cards ask.
    // `to` names that target by its code instead (">>nld<< " for to: "nld"), checked
    // against the codes the model's vocabulary holds.
    const { channel: check = !!channel, prefix: given = "", to, ...decode } = options ?? {};
    if (typeof check !== "boolean") throw new Error(`options.channel must be true or false, not ${typeof check}`);
    if (typeof given !== "string") throw new Error(`options.prefix must be text, not ${typeof given}`);
    const prefix = to === undefined ? given : targetPrefix(model, to, given);
    if (check && !channel) throw new Error("options.channel: no reverse model was loaded (load() with options.channel)");
    model.checkRequest(text, decode);
    const started = performance.now();
    // Line breaks are kept; each line is split into sentences, and the sentences are
    // decoded BATCH at a time (one decoder batch; BATCH a thread on the threaded CPU
    // module), results passed on in order.
    const size = /** @type {Current} */ (current).batch ?? BATCH;
    const lines = text.split("\n").map((line) => /** @type {Module} */ (engineModule).splitSentences(line));
    const flat = lines.flatMap((line, l) => line.map((sentence) => ({ line: l, sentence })));
    /** @type {string[][]} */
    const outLines = lines.map(() => []);
    /** @type {import("./transduce.js").SentenceTranslation[]} */
    const sentences = [];
    for (let start = 0; start < flat.length; start += size) {
      const group = flat.slice(start, start + size);
      route(model, group.length);
      const batch = group.map((g) => prefix + g.sentence);
      /** @type {Omit<import("./transduce.js").SentenceTranslation, "line">[]} */
      const results = check
        ? await model.translateBatchWithChannel(batch, decode, /** @type {Channel} `check`: checked above */ (channel).engine, /** @type {Channel} */ (channel).weight)
        : await model.translateBatch(batch, decode);
      results.forEach((result, j) => {
        const { line } = group[j];
        const sentence = { ...result, line };
        sentences.push(sentence);
        outLines[line].push(result.target);
        const sofar = outLines.slice(0, line + 1).map((out) => out.join(" "));
        emit({ index: sentences.length - 1, count: flat.length, sentence, text: sofar.join("\n"), ...where(model) });
      });
    }
    return { text: outLines.map((out) => out.join(" ")).join("\n"), sentences, channel: check, ms: performance.now() - started, ...where(model) };
  },

  /** @param {ParseArgs} args */
  async parse({ text, options, constrained }) {
    const model = need();
    model.checkRequest(text, options);
    if (typeof constrained !== "boolean") throw new Error(`options.constrained must be true or false, not ${typeof constrained}`);
    const started = performance.now();
    route(model, 1);
    const result = await model.parse(text, options, constrained);
    return { ...result, ms: performance.now() - started, ...where(model) };
  },

  // The bytes of each loaded module's linear memory. A wasm memory grows and never
  // shrinks, so this is the most the module has held at once.
  async memory() {
    const bytes = Object.fromEntries(Object.entries(memories).map(([backend, m]) => [backend, m.buffer.byteLength]));
    return { wasmBytes: Object.values(bytes).reduce((a, b) => a + b, 0), modules: bytes };
  },

  /** @param {{ sourceIds: unknown, targetIds: unknown }} args a sentence's, as translate() returned it */
  async attention({ sourceIds, targetIds }) {
    const model = need();
    return model.attention(tokenIds(sourceIds, "sourceIds"), tokenIds(targetIds, "targetIds"));
  },
};

// ---- adaptation: its module and replay pairs (the storage: adapted.js) ------------------

// The training module (transduce-adapt.js: burn autodiff and Adam, the same step as
// `transduce adapt`), fetched only when the visitor adapts.
/** @type {Promise<typeof import("./transduce-adapt.js")> | null} */
let adaptModulePromise = null;
function adaptModule() {
  adaptModulePromise ??= import("./transduce-adapt.js")
    .then(async (module) => {
      memories.adapt = (await module.default()).memory;
      return module;
    })
    .catch((e) => {
      adaptModulePromise = null;
      throw new Error(`cannot load the adaptation module: ${message(e)}`);
    });
  return adaptModulePromise;
}

/**
 * The bundle's general pairs (replay.tsv beside it), or "" where it ships none.
 * @param {string | undefined} url
 * @returns {Promise<string>}
 */
async function replayPairs(url) {
  if (!url) return "";
  const at = new URL("replay.tsv", url);
  let response;
  try {
    response = await fetch(at);
  } catch (e) {
    throw new Error(`cannot fetch ${at.href}: ${message(e)}`);
  }
  if (response.status === 404) return "";
  if (!response.ok) throw new Error(`cannot fetch ${at.href}: HTTP ${response.status} ${response.statusText}`);
  return new TextDecoder().decode(new Uint8Array(await response.arrayBuffer()));
}

/**
 * A list of token ids as the wasm module takes it; anything else is an error.
 * @param {unknown} ids
 * @param {string} name
 * @returns {Uint32Array}
 */
function tokenIds(ids, name) {
  const list = Array.isArray(ids) || ids instanceof Uint32Array ? ids : null;
  if (!list || !Array.prototype.every.call(list, (id) => Number.isInteger(id) && id >= 0 && id < 2 ** 32)) {
    throw new Error(`attention: ${name} must be a list of token ids (whole numbers ≥ 0), as translate() returns`);
  }
  return Uint32Array.from(list);
}

function need() {
  if (!engine) throw new Error("no model is loaded");
  return engine;
}

/**
 * "auto": WebGPU may run on a hardware adapter, and the calibration then decides per request.
 * A software adapter (SwiftShader) and Firefox (whose WebGPU polls every 100 ms) stay on the
 * CPU unless `calibrate` asks to measure them too.
 * @param {import("./transduce.js").Backend} wanted
 * @param {boolean | number[]} calibrate
 * @returns {Promise<{ backend: Backend, fallbackReason?: string, adapterKey?: string }>}
 */
async function chooseBackend(wanted, calibrate) {
  if (wanted === "cpu") return { backend: "cpu" };
  const gpu = self.navigator?.gpu;
  if (wanted === "webgpu") {
    if (!gpu) throw new Error("WebGPU is not available in this browser (navigator.gpu is missing)");
    return { backend: "webgpu" };
  }
  if (!gpu) return { backend: "cpu", fallbackReason: "this browser has no WebGPU" };
  let adapter = null;
  try {
    adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
  } catch (e) {
    return { backend: "cpu", fallbackReason: `no WebGPU adapter (${message(e)})` };
  }
  if (!adapter) return { backend: "cpu", fallbackReason: "no WebGPU adapter" };
  const info = adapter.info ?? {};
  const adapterKey = [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(" ") || "unknown adapter";
  if (calibrate) return { backend: "webgpu", adapterKey };
  const fallback = info.isFallbackAdapter ?? /** @type {GPUAdapter & { isFallbackAdapter?: boolean }} older browsers' place for it */ (adapter).isFallbackAdapter ?? false;
  if (fallback) {
    return { backend: "cpu", fallbackReason: "the only WebGPU adapter is a software fallback, slower than the CPU path" };
  }
  if (/Firefox\//.test(self.navigator?.userAgent ?? "")) {
    return { backend: "cpu", fallbackReason: "Firefox's WebGPU waits up to 100 ms per readback; the CPU is faster" };
  }
  return { backend: "webgpu", adapterKey };
}

// ---- auto: each request to the backend the calibration chose (calibration.js) ----------

/**
 * Sends a request of `n` sentences to the backend the calibration chose for that size.
 * @param {Engine} model
 * @param {number} n
 */
function route(model, n) {
  if (!policy || model.gpuFault) return;
  model.useBackend(policy.gpuFrom !== null && n >= policy.gpuFrom ? "webgpu" : "cpu");
}

/**
 * Each engine's language codes, read once: the getter walks the whole vocabulary.
 * @type {WeakMap<Engine, string[]>}
 */
const languageTokens = new WeakMap();

/**
 * The prefix `options.to` asks for: its code (`>>nld<< ` for "nld"), if the model has it.
 * @param {Engine} model
 * @param {unknown} to
 * @param {string} given
 * @returns {string}
 */
function targetPrefix(model, to, given) {
  if (typeof to !== "string" || !to.trim()) throw new Error(`options.to must be a language code such as "nld", not ${JSON.stringify(to)}`);
  if (given) throw new Error("options.to and options.prefix both name a target: give one");
  const token = `>>${to.trim()}<<`;
  if (!languageTokens.has(model)) languageTokens.set(model, model.languageTokens);
  const tokens = /** @type {string[]} set above */ (languageTokens.get(model));
  if (!tokens.includes(token)) {
    const has = tokens.length ? `it has ${tokens.join(" ")}` : "it has none: it translates into one language, so leave options.to out";
    throw new Error(`options.to ${JSON.stringify(to)}: the model has no target-language token ${token}; ${has}`);
  }
  return `${token} `;
}

/**
 * Where a request ran, and why (for the badge).
 * @param {Engine} model
 */
function where(model) {
  const fault = model.gpuFault;
  let why;
  if (fault) why = `the GPU failed (${fault}); the CPU took over`;
  else if (policy) why = `auto: ${policy.reason}`;
  return { backend: model.backend, device: model.device, why };
}
