// @ts-check
// The Cache API, opened where it can be: a page without it (not a secure context, storage
// blocked, a private window that refuses) still loads and translates, uncached.

/** The Cache API store of bundles fetched by URL, under their files' sha256 (worker.js), and
 * of calibrations; the Translator API's `availability()` looks there too. */
export const BUNDLE_CACHE = "transduce-bundles-v1";

/**
 * The named cache, or null where `enabled` is false or the browser will not open it.
 * @param {string} name
 * @param {boolean} [enabled]
 * @returns {Promise<Cache | null>}
 */
export async function openCache(name, enabled = true) {
  if (!enabled || typeof caches === "undefined") return null;
  try {
    return await caches.open(name);
  } catch {
    return null;
  }
}
