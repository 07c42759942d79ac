// @ts-check
// A bundle's three files: fetched from a folder URL (checked against config.json's sha256,
// kept in the Cache API), a model by name (hub.js: downloaded, converted, kept), or given.
import { errorMessage as message, readBody, sha256 } from "./bytes.js";
import { hubBundle } from "./hub.js";
import { BUNDLE_CACHE, openCache } from "./store.js";

/**
 * A bundle's files, and for a model by name where it came from.
 * @typedef {object} Shipped
 * @property {Uint8Array} config
 * @property {Uint8Array} tokenizer
 * @property {Uint8Array} weights
 * @property {boolean} [cached] the bundle came from this browser's store (sums checked when stored)
 * @property {string} [reference] the `hf:` name at its commit
 * @property {string} [card] the model card
 * @property {boolean} [offline] the hub did not answer; the stored bundle serves
 * @property {import("./hub.js").ConversionStats} [conversion] the conversion's time and memory
 * @property {() => Promise<{ code: string, message: string } | null>} [keep] stores a converted bundle
 * @property {{ code: string, message: string } | null} [warning] what could not be stored
 */

/** @typedef {import("./hub.js").Progress} Progress */
/** @typedef {import("./transduce.js").BundleBytes} BundleBytes */

/**
 * A bundle's three files: fetched from `url` (cached, checked), a model by name (`hf`:
 * downloaded, converted and cached by hub.js), or `files` as given.
 * @param {{ url?: string, files?: BundleBytes, hf?: import("./hub.js").HubOptions }} source
 *   one of the three (transduce.js's bundleArgs)
 * @param {boolean} cache
 * @param {(progress: Progress) => void} emit
 * @returns {Promise<Shipped>}
 */
export function bundleBytes({ url, files, hf }, cache, emit) {
  if (hf) return hubBundle(hf, cache, emit);
  return url ? fetchBundle(url, cache, emit) : Promise.resolve().then(() => normalize(/** @type {BundleBytes} neither url nor hf */ (files)));
}

/**
 * @param {BundleBytes} files
 * @returns {Shipped}
 */
function normalize(files) {
  /** @type {(b: unknown, name: string) => Uint8Array} */
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

/**
 * @param {string} base the folder's URL
 * @param {boolean} useCache
 * @param {(progress: Progress) => void} emit
 * @returns {Promise<Shipped>}
 */
async function fetchBundle(base, useCache, emit) {
  const configBytes = await download(new URL("config.json", base), null, false, emit);
  /** @type {{ sha256?: Record<string, string> }} the bundle's config.json as read here (the module's load checks it) */
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

/**
 * @param {URL} url
 * @param {string | null | undefined} expected the file's sha256, where config.json lists it
 * @param {boolean} useCache
 * @param {(progress: Progress) => void} emit
 * @returns {Promise<Uint8Array<ArrayBuffer>>}
 */
async function download(url, expected, useCache, emit) {
  const file = /** @type {string} a split's last */ (url.pathname.split("/").pop());
  const cache = expected ? await openCache(BUNDLE_CACHE, useCache) : null;
  const key = cache ? `${url.href}#sha256=${expected}` : null;
  if (cache) {
    // `key` and `expected` are set wherever `cache` is.
    const hit = await cache.match(/** @type {string} */ (key));
    if (hit) {
      const bytes = new Uint8Array(await hit.arrayBuffer());
      if ((await sha256(bytes)) === /** @type {string} */ (expected).toLowerCase()) {
        emit({ file, url: url.href, loaded: bytes.length, total: bytes.length, cached: true });
        return bytes;
      }
      await cache.delete(/** @type {string} */ (key)); // a damaged entry: fetch again
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
  const bytes = await readBody(response, (loaded) => emit({ file, url: url.href, loaded, total, cached: false }));
  if (expected) {
    const found = await sha256(bytes);
    if (found !== null && found !== expected.toLowerCase()) {
      throw new Error(`${url.href}: sha256 is ${found}, but config.json lists ${expected}`);
    }
    if (cache) await cache.put(/** @type {string} */ (key), new Response(bytes));
  }
  return bytes;
}
