// @ts-check
// "auto": which backend is faster on this device for a request of each size, measured once
// per adapter and model and kept in the Cache API (the worker routes each request by it).
import { BUNDLE_CACHE, openCache } from "./store.js";

/**
 * What calibration needs of an engine (the WebGPU module's: the calibration runs where it has a GPU).
 * @typedef {Pick<import("./transduce-web-webgpu.js").Engine, "config" | "parse" | "translateBatch" | "useBackend" | "gpuFault">} Model
 */
/**
 * auto's measurement: milliseconds per request size on each backend, the size from which the
 * GPU decodes (null: never), and why.
 * @typedef {object} Calibration
 * @property {Record<number, { cpu: number, webgpu: number }>} ms
 * @property {number | null} gpuFrom
 * @property {string} reason
 * @property {string} [adapter] the adapter measured (set by `calibrated`)
 * @property {boolean} [cached] read from the cache
 */

// Everyday sentences for the calibration, in the model's source language.
/** @type {{ en: string[], [language: string]: string[] | undefined }} */
export const CALIBRATION = {
  en: [
    "Where is the nearest train station?",
    "My sister bought a new bicycle last week.",
    "We are going to the beach tomorrow if the weather is good.",
    "Could you please close the window?",
    "The children are playing football in the park.",
    "I have never seen such a beautiful sunset.",
    "He forgot his keys at the office again.",
    "The soup is too hot to eat right now.",
  ],
  de: [
    "Wo ist der nächste Bahnhof?",
    "Meine Schwester hat letzte Woche ein neues Fahrrad gekauft.",
    "Wir fahren morgen an den Strand, wenn das Wetter gut ist.",
    "Könntest du bitte das Fenster schließen?",
    "Die Kinder spielen im Park Fußball.",
    "Ich habe noch nie einen so schönen Sonnenuntergang gesehen.",
    "Er hat seine Schlüssel schon wieder im Büro vergessen.",
    "Die Suppe ist gerade zu heiß zum Essen.",
  ],
};

/**
 * The request sizes (sentences) the calibration times: `calibrate` as an array of positive
 * whole numbers, else one sentence and a paragraph of eight.
 * @param {boolean | number[]} calibrate
 * @returns {number[]}
 */
export function calibrationSizes(calibrate) {
  if (!Array.isArray(calibrate)) return [1, CALIBRATION.en.length];
  const sizes = [...new Set(calibrate)].filter((n) => Number.isInteger(n) && n >= 1 && n <= CALIBRATION.en.length);
  if (!sizes.length) throw new Error(`calibrate: request sizes from 1 to ${CALIBRATION.en.length} sentences, not ${JSON.stringify(calibrate)}`);
  return sizes.sort((a, b) => a - b);
}

/**
 * The calibration of this adapter and model: from the cache, or measured now and stored.
 * @param {Model} model
 * @param {string} adapterKey
 * @param {boolean} useCache
 * @param {(progress: import("./hub.js").Progress) => void} emit
 * @param {number[]} sizes
 * @returns {Promise<Calibration>}
 */
export async function calibrated(model, adapterKey, useCache, emit, sizes) {
  const config = model.config;
  const m = config.model;
  const shape = `${config.task.kind}-${m.d_model}x${m.n_layers}${m.decoder_layers ? `+${m.decoder_layers}` : ""}-${m.vocab_size}-beam${config.decoding.beam}-n${sizes.join(",")}`;
  const key = new Request(`https://calibration.transduce.invalid/v1/${encodeURIComponent(adapterKey)}/${shape}`);
  let store = await openCache(BUNDLE_CACHE, useCache);
  if (store) {
    try {
      const hit = await store.match(key);
      if (hit) return { ...(await hit.json()), cached: true };
    } catch {
      store = null;
    }
  }
  emit({ file: "calibration (CPU vs WebGPU)", loaded: 0, total: 0, cached: false });
  const result = await measure(model, sizes);
  result.adapter = adapterKey;
  if (store) await store.put(key, new Response(JSON.stringify(result))).catch(() => {});
  return result;
}

/**
 * Times the same requests on both backends: by default one sentence, and (translators) a
 * paragraph of eight. Each backend runs each request once to warm up (kernels compile on first use),
 * then the best of two runs counts. The GPU takes a request size only where it was faster.
 * A GPU whose warm-up run, compilation included, took over ten times the CPU's best (and
 * two seconds more) is not timed again: it is the slower one without doubt, and on a
 * software adapter each further run would cost the visitor another minute.
 * @param {Model} model
 * @param {number[]} requestSizes
 * @returns {Promise<Calibration>}
 */
export async function measure(model, requestSizes) {
  const parse = model.config.task.kind === "parse";
  const source = parse ? "en" : model.config.task.source;
  const sentences = CALIBRATION[source] ?? CALIBRATION.en;
  /** @type {(batch: string[]) => Promise<any>} */
  const run = (batch) => (parse ? model.parse(batch[0], undefined, true) : model.translateBatch(batch, undefined));
  /** @type {(backend: "cpu" | "webgpu", batch: string[], beat?: number) => Promise<number>} */
  const time = async (backend, batch, beat = Infinity) => {
    model.useBackend(backend);
    const start = performance.now();
    await run(batch);
    const warmup = performance.now() - start;
    if (warmup > 10 * beat && warmup > beat + 2000) return warmup;
    let best = Infinity;
    for (let i = 0; i < 2; i++) {
      const t = performance.now();
      await run(batch);
      best = Math.min(best, performance.now() - t);
    }
    return best;
  };
  const sizes = parse ? [1] : requestSizes;
  /** @type {Calibration["ms"]} */
  const ms = {};
  for (const n of sizes) {
    const batch = sentences.slice(0, n);
    const cpu = await time("cpu", batch);
    let webgpu = Infinity;
    try {
      webgpu = await time("webgpu", batch, cpu);
    } catch {
      // useBackend refuses a GPU that already failed
    }
    // A GPU that failed while measured handed its requests to the CPU: it did not run them.
    ms[n] = { cpu, webgpu: model.gpuFault ? Infinity : webgpu };
  }
  const faster = sizes.filter((n) => ms[n].webgpu < ms[n].cpu);
  // Batches of at least this many sentences decode on the GPU.
  const gpuFrom = faster.length ? Math.min(...faster) : Infinity;
  /** @type {(n: number) => string} */
  const fmt = (n) => `${n === 1 ? "1 sentence" : `${n} sentences`}: CPU ${ms[n].cpu.toFixed(0)} ms, WebGPU ${ms[n].webgpu.toFixed(0)} ms`;
  const reason = gpuFrom === Infinity
    ? `measured faster on this device (${sizes.map(fmt).join("; ")})`
    : `measured (${sizes.map(fmt).join("; ")}): WebGPU from ${gpuFrom} sentence${gpuFrom === 1 ? "" : "s"} on`;
  return { ms, gpuFrom: gpuFrom === Infinity ? null : gpuFrom, reason };
}
