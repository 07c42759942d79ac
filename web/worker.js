// The Web Worker that owns the wasm module and the model (see transduce.js).

const CACHE_NAME = "transduce-bundles-v1";
// Sentences decoded together: a paragraph costs about its longest sentence's steps, and the
// first results still arrive soon.
const BATCH = 16;
let engine = null;
// The module the engine came from (its splitSentences goes with it).
let engineModule = null;

// The wasm module comes in two builds with one API: transduce-web.js, the CPU build that
// every load uses unless WebGPU will run, and transduce-web-webgpu.js, about four times
// larger (wgpu, naga, cubecl), fetched only when a bundle is loaded on WebGPU. Static
// import() strings, so bundlers see both files.
const modules = {};
function wasm(backend) {
  modules[backend] ??= (backend === "webgpu" ? import("./transduce-web-webgpu.js") : import("./transduce-web.js"))
    .then(async (module) => {
      await module.default();
      return module;
    })
    .catch((e) => {
      delete modules[backend];
      throw new Error(`cannot load the ${backend} wasm module: ${message(e)}`);
    });
  return modules[backend];
}

self.onmessage = async ({ data: { id, op, args } }) => {
  const emit = (value) => self.postMessage({ id, kind: "event", value });
  try {
    const value = await OPS[op](args, emit);
    self.postMessage({ id, kind: "ok", value });
  } catch (e) {
    self.postMessage({ id, kind: "error", value: message(e) });
  }
};

function message(e) {
  if (e instanceof Error) return e.message;
  if (typeof e === "string") return e;
  return String(e);
}

const OPS = {
  async load({ url, files, backend, cache }, emit) {
    // The bundle downloads while the backend is chosen and its module compiles.
    const fetching = url ? fetchBundle(url, cache, emit) : Promise.resolve().then(() => normalize(files));
    fetching.catch(() => {}); // awaited below; a failure must not surface twice
    const choice = await chooseBackend(backend);
    const compiling = wasm(choice.backend);
    compiling.catch(() => {}); // awaited below
    const bytes = await fetching;
    if (engine) engine.free();
    engine = null;
    engineModule = null;
    let module;
    let loaded;
    try {
      module = await compiling;
      loaded = await module.Engine.load(bytes.config, bytes.tokenizer, bytes.weights, choice.backend);
    } catch (e) {
      if (backend !== "auto" || choice.backend === "cpu") throw e;
      // A WebGPU failure in auto mode: the CPU still works.
      choice.backend = "cpu";
      choice.fallbackReason = `WebGPU failed (${message(e)})`;
      module = await wasm("cpu");
      loaded = await module.Engine.load(bytes.config, bytes.tokenizer, bytes.weights, "cpu");
    }
    engine = loaded;
    engineModule = module;
    return {
      backend: engine.backend,
      device: engine.device,
      fallbackReason: choice.fallbackReason,
      config: engine.config,
    };
  },

  async translate({ text, options }, emit) {
    const model = need();
    // Options first, then the text (a string, not empty, not too long): one clear error
    // before any work.
    model.checkRequest(text, options);
    const started = performance.now();
    // Line breaks are kept; each line is split into sentences, and the sentences are
    // decoded BATCH at a time (one decoder batch), results passed on in order.
    const lines = text.split("\n").map((line) => engineModule.splitSentences(line));
    const flat = lines.flatMap((line, l) => line.map((sentence) => ({ line: l, sentence })));
    const outLines = lines.map(() => []);
    const sentences = [];
    for (let start = 0; start < flat.length; start += BATCH) {
      const group = flat.slice(start, start + BATCH);
      const results = await model.translateBatch(
        group.map((g) => g.sentence),
        options,
      );
      results.forEach((result, j) => {
        const { line } = group[j];
        sentences.push(result);
        outLines[line].push(result.target);
        const sofar = outLines.slice(0, line + 1).map((out) => out.join(" "));
        emit({ index: sentences.length - 1, count: flat.length, sentence: result, text: sofar.join("\n") });
      });
    }
    return { text: outLines.map((out) => out.join(" ")).join("\n"), sentences, ms: performance.now() - started };
  },

  async parse({ text, options, constrained }) {
    const model = need();
    model.checkRequest(text, options);
    if (typeof constrained !== "boolean") throw new Error(`options.constrained must be true or false, not ${typeof constrained}`);
    const started = performance.now();
    const result = await model.parse(text, options, constrained);
    return { ...result, ms: performance.now() - started };
  },

  async attention({ sourceIds, targetIds }) {
    const model = need();
    return model.attention(tokenIds(sourceIds, "sourceIds"), tokenIds(targetIds, "targetIds"));
  },
};

/** A list of token ids as the wasm module takes it; anything else is an error. */
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

function normalize(files) {
  const bytes = (b, name) => {
    if (b instanceof Uint8Array) return b;
    if (b instanceof ArrayBuffer) return new Uint8Array(b);
    throw new Error(`${name}: expected an ArrayBuffer or Uint8Array`);
  };
  return {
    config: bytes(files.config, "config"),
    tokenizer: bytes(files.tokenizer, "tokenizer"),
    weights: bytes(files.weights, "weights"),
  };
}

/** "auto": WebGPU only on a hardware adapter; a software one (SwiftShader) is slower than the CPU. */
async function chooseBackend(wanted) {
  if (wanted === "cpu") return { backend: "cpu" };
  const gpu = self.navigator?.gpu;
  if (wanted === "webgpu") {
    if (!gpu) throw new Error("WebGPU is not available in this browser (navigator.gpu is missing)");
    return { backend: "webgpu" };
  }
  if (!gpu) return { backend: "cpu", fallbackReason: "this browser has no WebGPU" };
  let adapter = null;
  try {
    adapter = await gpu.requestAdapter();
  } catch (e) {
    return { backend: "cpu", fallbackReason: `no WebGPU adapter (${message(e)})` };
  }
  if (!adapter) return { backend: "cpu", fallbackReason: "no WebGPU adapter" };
  const fallback = adapter.info?.isFallbackAdapter ?? adapter.isFallbackAdapter ?? false;
  if (fallback) {
    return { backend: "cpu", fallbackReason: "the only WebGPU adapter is a software fallback, slower than the CPU path" };
  }
  return { backend: "webgpu" };
}

// ---- fetching, caching, checking -------------------------------------------------------

async function fetchBundle(base, useCache, emit) {
  const configBytes = await download(new URL("config.json", base), null, false, emit);
  let config;
  try {
    config = JSON.parse(new TextDecoder().decode(configBytes));
  } catch (e) {
    throw new Error(`${new URL("config.json", base)}: not valid JSON (${message(e)})`);
  }
  const sums = config.sha256 ?? {};
  const tokenizer = await download(new URL("tokenizer.json", base), sums["tokenizer.json"], useCache, emit);
  const weights = await download(new URL("model.safetensors", base), sums["model.safetensors"], useCache, emit);
  return { config: configBytes, tokenizer, weights };
}

async function sha256(bytes) {
  if (!self.crypto?.subtle) return null; // not a secure context: the wasm loader checks anyway
  const digest = await self.crypto.subtle.digest("SHA-256", bytes);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

async function openCache(useCache) {
  if (!useCache || typeof caches === "undefined") return null;
  try {
    return await caches.open(CACHE_NAME);
  } catch {
    return null;
  }
}

async function download(url, expected, useCache, emit) {
  const file = url.pathname.split("/").pop();
  const cache = expected ? await openCache(useCache) : null;
  const key = cache ? `${url.href}#sha256=${expected}` : null;
  if (cache) {
    const hit = await cache.match(key);
    if (hit) {
      const bytes = new Uint8Array(await hit.arrayBuffer());
      if ((await sha256(bytes)) === expected.toLowerCase()) {
        emit({ file, loaded: bytes.length, total: bytes.length, cached: true });
        return bytes;
      }
      await cache.delete(key); // a damaged entry: fetch again
    }
  }
  let response;
  try {
    response = await fetch(url, { cache: expected ? "default" : "no-cache" });
  } catch (e) {
    throw new Error(`cannot fetch ${url.href}: ${message(e)}`);
  }
  if (!response.ok) throw new Error(`cannot fetch ${url.href}: HTTP ${response.status} ${response.statusText}`);
  const total = Number(response.headers.get("content-length")) || 0;
  const chunks = [];
  let loaded = 0;
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    loaded += value.length;
    emit({ file, loaded, total, cached: false });
  }
  const bytes = new Uint8Array(loaded);
  let offset = 0;
  for (const c of chunks) {
    bytes.set(c, offset);
    offset += c.length;
  }
  if (expected) {
    const found = await sha256(bytes);
    if (found !== null && found !== expected.toLowerCase()) {
      throw new Error(`${url.href}: sha256 is ${found}, but config.json lists ${expected}`);
    }
    if (cache) await cache.put(key, new Response(bytes));
  }
  return bytes;
}
