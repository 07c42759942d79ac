// @ts-check
// The conversion worker: a Marian (OPUS-MT) model's files in, a bundle out, through the
// import module (transduce-import.js: crates/transduce-import, the same code as
// `transduce import`). hub.js starts one per conversion and ends it afterwards, so the
// memory the conversion needed (the checkpoint and the bundle at once) is given back.
/** @param {MessageEvent<import("./hub.js").ConvertRequest>} event */
self.onmessage = async ({ data: { names, buffers, options } }) => {
  try {
    const module = await import("./transduce-import.js");
    const exports = await module.default();
    const conversion = new module.Conversion();
    try {
      names.forEach((name, i) => conversion.add(name, new Uint8Array(buffers[i])));
      // The files are in the module's memory now: let the transferred copies go.
      buffers.length = 0;
      const started = performance.now();
      const out = conversion.run(options);
      const stats = { ms: performance.now() - started, peakWasmBytes: exports.memory.buffer.byteLength };
      /** @type {import("./hub.js").Converted} */
      const value = { config: out.config, tokenizer: out.tokenizer, weights: out.weights, card: out.card, name: out.name, stats };
      self.postMessage({ ok: true, value }, { transfer: [out.config.buffer, out.tokenizer.buffer, out.weights.buffer] });
    } finally {
      conversion.free();
    }
  } catch (e) {
    self.postMessage({ ok: false, message: e instanceof Error ? e.message : String(e), code: /** @type {{ code?: unknown, file?: unknown } | null | undefined} */ (e)?.code ?? "import", file: /** @type {{ code?: unknown, file?: unknown } | null | undefined} */ (e)?.file ?? null });
  }
};
