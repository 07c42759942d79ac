// @ts-check
// One thread of the CPU decoder's pool (crates/transduce-web/src/threads.rs): a Web Worker
// the main worker (worker.js) starts over the threaded module and its shared memory. It
// instantiates the module over that memory, registers the relaxed-SIMD kernel where the
// main worker did (the registration is per thread), says it is ready, and then serves the
// pool until the page closes.
import init, { runThread, useRelaxedSimd } from "./transduce-web-threads.js";

self.onmessage = async ({ data: { module, memory, relaxed } }) => {
  try {
    await init({ module_or_path: module, memory });
    if (relaxed) {
      // From a compiled module, instantiate gives the instance itself.
      const instance = /** @type {WebAssembly.Instance} */ (/** @type {unknown} */ (await WebAssembly.instantiate(relaxed, { env: { memory } })));
      if (!useRelaxedSimd(instance.exports)) throw new Error("the relaxed-SIMD kernel failed its check on this thread");
    }
  } catch (e) {
    self.postMessage({ error: e instanceof Error ? e.message : String(e) });
    return;
  }
  self.postMessage({ ready: true });
  runThread();
};
