// @ts-check
// A visitor's adaptation of a model, kept in the Cache API under the shipped weights' sha256
// (the worker reads it back on the next load, and deletes it on reset).
import { frame, sha256, unframe } from "./bytes.js";
import { openCache } from "./store.js";

const ADAPTED_CACHE = "transduce-adapted-v1";

/**
 * Where a model's adaptation is stored: its shipped weights' sha256, as config.json lists it
 * (checked on every load); hashed here only for a bundle without one.
 * @param {{ config: Uint8Array, weights: Uint8Array }} shipped
 * @returns {Promise<Request>}
 */
export async function storeKey(shipped) {
  /** @type {string | undefined} config.json's, as read here (the module's load checks it) */
  let sum;
  try {
    sum = JSON.parse(new TextDecoder().decode(shipped.config)).sha256?.["model.safetensors"];
  } catch {
    // not JSON: the module's load reports it
  }
  // A bundle's files are never shared memory (sha256 would reject a view of it, as ever).
  sum ??= (await sha256(/** @type {Uint8Array<ArrayBuffer>} */ (shipped.weights))) ?? `${shipped.weights.length}`;
  return new Request(`https://adapted.transduce.invalid/v1/${sum.toLowerCase()}`);
}

const adaptedCache = () => openCache(ADAPTED_CACHE);

/**
 * One entry, framed (bytes.js): config.json as the head, then the weights.
 * @param {Request} key storeKey's
 * @param {{ config: Uint8Array, weights: Uint8Array }} files
 * @returns {Promise<boolean>} whether it was stored (false: no Cache API)
 */
export async function writeAdapted(key, files) {
  const store = await adaptedCache();
  if (!store) return false;
  await store.put(key, new Response(frame(files.config, files.weights)));
  return true;
}

/**
 * The stored adaptation of a model as bundle files, or null (none, or unreadable).
 * @param {Request} key storeKey's
 * @param {{ tokenizer: Uint8Array }} shipped
 * @returns {Promise<{ config: Uint8Array<ArrayBuffer>, tokenizer: Uint8Array, weights: Uint8Array<ArrayBuffer> } | null>}
 */
export async function readAdapted(key, shipped) {
  const store = await adaptedCache();
  const hit = store && (await store.match(key).catch(() => null));
  if (!hit) return null;
  const framed = unframe(new Uint8Array(await hit.arrayBuffer()));
  return framed && { config: framed.head, tokenizer: shipped.tokenizer, weights: framed.rest };
}

/**
 * @param {Request} key storeKey's
 * @returns {Promise<void>}
 */
export async function deleteAdapted(key) {
  const store = await adaptedCache();
  if (store) await store.delete(key);
}
