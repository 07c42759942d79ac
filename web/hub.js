// @ts-check
// Models by name from the Hugging Face hub: `hf:ORG/NAME[@REVISION]`, as
// crates/transduce-import/src/hub.rs names them. The worker (worker.js) fetches a model's
// files with progress, checks them, has them converted into a bundle (in a short-lived worker
// of its own, convert.js, whose memory is given back when it ends), and keeps the bundle in
// the Cache API under the model, its commit and its files' ETags: a second load needs no
// network. The page and the Translator polyfill use the listing to tell what exists.
//
// Every failure is a HubError whose `code` and `file` say what and where:
//   not-found       no such model (or revision) on the hub
//   missing-file    the model lacks a file the import needs
//   unreachable     the hub cannot be reached and the model is not cached
//   bad-listing     the listing is not the hub's JSON (an HTML page, say)
//   rate-limited    the hub answered 429 and the model is not cached (`retryAfter`: the
//                   seconds it asks to wait, where its CORS list lets a page read them)
//   http            another HTTP error (`status`); after a 5xx a cached bundle is used
//   gated           a gated repository: its conditions not accepted by the token's account,
//                   or no token (options.token)
//   truncated       a download ended early, or its size is not what the hub said
//   corrupt         a download's sha256 is not the one the hub lists
//   moved           the revision moved to another commit during the download
//   unsupported, no-licence, no-languages, …   the import's own (crates/transduce-import)
//   quota           (a warning, not an error) the bundle could not be stored

import { errorMessage, frame, readBody, sha256, unframe } from "./bytes.js";
import { openCache } from "./store.js";

export const DEFAULT_HUB = "https://huggingface.co";
/** The Cache API store of converted bundles. */
export const HUB_CACHE = "transduce-hub-v1";

export class HubError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   * @param {string | null} [file]
   */
  constructor(code, message, file = null) {
    super(message);
    this.name = "HubError";
    this.code = code;
    this.file = file;
    /** Seconds to wait before asking again ("rate-limited"), where the answer said. @type {number | null | undefined} */
    this.retryAfter = undefined;
    /** The HTTP status ("http"). @type {number | undefined} */
    this.status = undefined;
  }
}

/**
 * A model by name: `hf:ORG/NAME[@REVISION]` parsed.
 * @typedef {{ org: string, name: string, revision: string | null }} Ref
 */

const PART = /^[A-Za-z0-9._-]{1,96}$/;

/**
 * `{ org, name, revision }` for an `hf:` name; `null` for anything else (a bundle URL).
 * A malformed name throws a HubError (code "bad-name").
 * @param {unknown} text
 * @returns {Ref | null}
 */
export function parseReference(text) {
  if (typeof text !== "string" || !text.startsWith("hf:")) return null;
  const rest = text.slice(3);
  const at = rest.indexOf("@");
  const repo = at < 0 ? rest : rest.slice(0, at);
  const revision = at < 0 ? null : rest.slice(at + 1);
  const parts = repo.split("/");
  const bad = (/** @type {string} */ why) => new HubError("bad-name", `${JSON.stringify(text)} is not a model name like hf:Helsinki-NLP/opus-mt-en-fr[@REVISION]: ${why}`);
  if (parts.length !== 2) throw bad("it needs an organisation and a name, ORG/NAME");
  if (!parts.every((p) => PART.test(p) && p !== "." && p !== "..")) throw bad("ORG and NAME are letters, digits, `-`, `_` and `.`");
  if (revision !== null && (!/^[A-Za-z0-9._/-]{1,128}$/.test(revision) || revision.split("/").some((p) => !p || p === "." || p === ".."))) {
    throw bad("a revision is a branch, tag or commit: letters, digits, `-`, `_`, `.`, `/`");
  }
  return { org: parts[0], name: parts[1], revision };
}

/** "ORG/NAME". @type {(ref: Ref) => string} */
export const repoOf = (ref) => `${ref.org}/${ref.name}`;
/** The `hf:` name again. @type {(ref: Ref) => string} */
export const referenceText = (ref) => `hf:${repoOf(ref)}${ref.revision ? `@${ref.revision}` : ""}`;
/** @type {(hub: string | null | undefined) => string} */
const trimHub = (hub) => (hub ?? DEFAULT_HUB).replace(/\/+$/, "");
/** @type {(ref: Ref) => string} */
const revisionPath = (ref) => encodeURIComponent(ref.revision ?? "main");

/**
 * @param {Ref} ref
 * @param {string | null | undefined} hub the hub's address (DEFAULT_HUB where none)
 * @param {string} file
 * @returns {string}
 */
export function resolveUrl(ref, hub, file) {
  return `${trimHub(hub)}/${ref.org}/${ref.name}/resolve/${revisionPath(ref)}/${file}`;
}

/**
 * @param {Ref} ref
 * @param {string | null | undefined} hub the hub's address (DEFAULT_HUB where none)
 * @returns {string}
 */
export function listingUrl(ref, hub) {
  const base = `${trimHub(hub)}/api/models/${ref.org}/${ref.name}`;
  return `${ref.revision ? `${base}/revision/${revisionPath(ref)}` : base}?blobs=true`;
}

const message = errorMessage;

/**
 * The seconds a rate-limited caller should wait: `Retry-After`, else the `t=` of the
 * `RateLimit` header (the hub sends both; huggingface_hub's `_http.py` reads them), else null.
 * @param {Headers} headers
 * @returns {number | null}
 */
export function retryAfter(headers) {
  const after = Number(headers.get("retry-after"));
  if (Number.isFinite(after) && after >= 0 && headers.get("retry-after") !== null) return after;
  const t = /(?:^|;)\s*t=(\d+)/.exec(headers.get("ratelimit") ?? "");
  return t ? Number(t[1]) : null;
}

/**
 * A gated repository's answer (401 or 403 with X-Error-Code GatedRepo, as huggingface_hub's
 * _http.py reads it): what to do, or null for any other answer.
 * @param {Response} response
 * @param {Ref} ref
 * @param {string | null | undefined} hub
 * @param {string | undefined} token
 * @param {string | null} [file]
 * @returns {HubError | null}
 */
function gatedError(response, ref, hub, token, file = null) {
  if (response.headers.get("x-error-code") !== "GatedRepo") return null;
  const page = `${trimHub(hub)}/${ref.org}/${ref.name}`;
  const what = token
    ? `the token's account has not been granted access to this gated model: ask for it at ${page} while logged in as that account`
    : `a gated model: accept its conditions at ${page} while logged in, then load it with a token of that account (options.token)`;
  return new HubError("gated", `${referenceText(ref)}: ${what}`, file);
}

/** The headers of a request to the hub: the token, where one is given. The browser drops it
 * on the redirect to the CDN, another origin (the Fetch standard removes Authorization on a
 * cross-origin redirect), so only the hub sees it.
 * @type {(token: string | undefined) => Record<string, string>} */
const authorization = (token) => (token ? { authorization: `Bearer ${token}` } : /** @type {Record<string, string>} */ ({}));

/**
 * A hub answer that is neither a file nor a listing: 429 (with its wait), or another HTTP error.
 * @param {Response} response
 * @param {string} url
 * @param {string | null} [file]
 * @returns {HubError}
 */
function statusError(response, url, file = null) {
  if (response.status === 429) {
    const wait = retryAfter(response.headers);
    // A page sees the wait only where the hub exposes the headers (huggingface.co's CORS
    // list does not name them).
    const error = new HubError("rate-limited", `${url}: the hub limits how often it is asked (HTTP 429); try again ${wait !== null ? `in ${wait} s` : "later"}`, file);
    error.retryAfter = wait;
    return error;
  }
  const error = new HubError("http", `${url}: HTTP ${response.status} ${response.statusText}`, file);
  error.status = response.status;
  return error;
}

/**
 * Errors after which a cached bundle is used: the hub unreachable, limiting, or failing (5xx).
 * Those codes are HubError's.
 * @param {any} e whatever was thrown (`any`: its fields are checked one by one)
 * @returns {e is HubError}
 */
const canFallBack = (e) => e?.code === "unreachable" || e?.code === "rate-limited" || (e?.code === "http" && e.status >= 500);

/**
 * A file as the listing gives it: its size and sha256, where the hub lists them.
 * @typedef {{ size: number | null, sha256: string | null }} ListedFile
 */
/**
 * The hub's listing of a model, as fetchListing reads it.
 * @typedef {{ commit: string | null, files: Map<string, ListedFile> }} Listing
 */
/**
 * The hub's listing JSON (`/api/models/ORG/NAME?blobs=true`) as fetchListing reads it:
 * external JSON, so every field is `unknown` until checked.
 * @typedef {{ sha?: unknown, siblings?: unknown }} ListingJson
 */
/**
 * One of the listing's `siblings` (a file), as fetchListing reads it.
 * @typedef {{ rfilename?: unknown, size?: unknown, lfs?: { size?: unknown, sha256?: unknown } | null }} SiblingJson
 */

/**
 * The hub's listing of the model: `{ commit, files: Map(name → { size, sha256 }) }`, or
 * null where the hub has no listing for it (404: a hub without the API, or no such model —
 * the files then tell). Throws "unreachable" when nothing answers.
 * @param {Ref} ref
 * @param {string | null | undefined} hub
 * @param {{ signal?: AbortSignal, token?: string }} [options]
 * @returns {Promise<Listing | null>}
 */
export async function fetchListing(ref, hub, { signal = undefined, token = undefined } = {}) {
  const url = listingUrl(ref, hub);
  let response;
  try {
    response = await fetch(url, { cache: "no-cache", signal, headers: authorization(token) });
  } catch (e) {
    if (signal?.aborted) throw e;
    throw new HubError("unreachable", `${referenceText(ref)}: the hub at ${trimHub(hub)} cannot be reached (${message(e)})`);
  }
  if (response.status === 404 && response.headers.get("x-error-code") === "RevisionNotFound") {
    throw new HubError("not-found", `${referenceText(ref)}: no revision ${ref.revision ?? "main"} on ${trimHub(hub)}`, "listing");
  }
  if (response.status === 404) return null;
  const gated = gatedError(response, ref, hub, token, "listing");
  if (gated) throw gated;
  if (response.status === 401) {
    throw new HubError("not-found", `${referenceText(ref)}: no such model on ${trimHub(hub)} (HTTP 401: or it needs a login)`);
  }
  if (!response.ok) throw statusError(response, url);
  const text = await response.text();
  /** @type {ListingJson} what JSON.parse gave: checked below to be an object, then field by field */
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    throw new HubError("bad-listing", `${url}: the listing is not JSON; it begins ${JSON.stringify(text.slice(0, 40))}`, "listing");
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    throw new HubError("bad-listing", `${url}: the listing is not a JSON object`, "listing");
  }
  /** @type {Map<string, ListedFile>} */
  const files = new Map();
  for (const f of /** @type {(SiblingJson | null | undefined)[]} */ (Array.isArray(json.siblings) ? json.siblings : [])) {
    if (typeof f?.rfilename !== "string") continue;
    const size = Number.isSafeInteger(f.lfs?.size ?? f.size) ? /** @type {number} */ (f.lfs?.size ?? f.size) : null;
    const sha256 = typeof f.lfs?.sha256 === "string" && /^[0-9a-f]{64}$/i.test(f.lfs.sha256) ? f.lfs.sha256.toLowerCase() : null;
    files.set(f.rfilename, { size, sha256 });
  }
  return { commit: typeof json.sha === "string" ? json.sha : null, files };
}

/** exists's answers, by "HUB ORG/NAME". @type {Map<string, Promise<boolean>>} */
const known = new Map();
/**
 * Whether the hub has `hf:ORG/NAME` (its listing answers). Answers, "no" included (a 404,
 * or the 401 the hub gives a repository that does not exist), are remembered for the page's
 * life, so a name is asked once; errors (unreachable, 429 with its wait) are not, and
 * reject.
 * @param {string} repo "ORG/NAME"
 * @param {string | null | undefined} hub
 * @returns {Promise<boolean>}
 */
export function exists(repo, hub) {
  const key = `${trimHub(hub)} ${repo}`;
  if (!known.has(key)) {
    const [org, name] = repo.split("/");
    known.set(key, fetchListing({ org, name, revision: null }, hub).then((l) => l !== null, (e) => {
      if (e.code === "not-found") return false;
      known.delete(key);
      throw e;
    }));
  }
  return /** @type {Promise<boolean>} set above */ (known.get(key));
}

/**
 * The ids of an organisation's models whose names contain `text` ("Helsinki-NLP/…"), from
 * the hub's model search (`/api/models?author=ORG&search=TEXT`, as huggingface_hub's
 * `list_models` and huggingface.js's `listModels` ask it; further pages followed through
 * the `Link` header), or null where the hub has no search (404). Answers are remembered
 * for the page's life; errors are not, and reject as fetchListing's do.
 * @param {string} org
 * @param {string} text
 * @param {string} hub
 * @returns {Promise<string[] | null>}
 */
export function searchModels(org, text, hub) {
  const key = `${trimHub(hub)} ${org} ${text}`;
  if (!searched.has(key)) {
    const found = (async () => {
      /** @type {string[]} */
      const ids = [];
      /** @type {string | null} */
      let url = `${trimHub(hub)}/api/models?author=${encodeURIComponent(org)}&search=${encodeURIComponent(text)}&limit=1000`;
      for (let page = 0; url && page < 20; page++) {
        let response;
        try {
          response = await fetch(url, { cache: "no-cache" });
        } catch (e) {
          throw new HubError("unreachable", `the hub at ${trimHub(hub)} cannot be reached (${message(e)})`);
        }
        if (response.status === 404) return null;
        if (!response.ok) throw statusError(response, url);
        /** @type {unknown} external JSON: checked below to be a list, each entry's id checked */
        let json;
        try {
          json = await response.json();
        } catch {
          throw new HubError("bad-listing", `${url}: the search's answer is not JSON`, "search");
        }
        if (!Array.isArray(json)) throw new HubError("bad-listing", `${url}: the search's answer is not a list`, "search");
        for (const m of /** @type {({ id?: unknown } | null | undefined)[]} */ (json)) if (typeof m?.id === "string") ids.push(m.id);
        url = nextPage(response.headers.get("link"), url);
      }
      return ids;
    })();
    searched.set(key, found);
    found.catch(() => searched.delete(key));
  }
  return /** @type {Promise<string[] | null>} set above */ (searched.get(key));
}
/** searchModels's answers, by "HUB ORG TEXT". @type {Map<string, Promise<string[] | null>>} */
const searched = new Map();

/**
 * The `rel="next"` address of a `Link` header, resolved against `base`, or null.
 * @param {string | null | undefined} link
 * @param {string} base
 * @returns {string | null}
 */
export function nextPage(link, base) {
  const m = link?.match(/<([^>]+)>\s*;\s*rel="?next"?/);
  return m ? new URL(m[1], base).href : null;
}

// The files the import reads (crates/transduce-import: REQUIRED, OPTIONAL, the weights).
const REQUIRED = ["config.json", "vocab.json", "source.spm"];
const OPTIONAL = ["generation_config.json", "README.md"];
const WEIGHTS = ["model.safetensors", "pytorch_model.bin"];

/**
 * Downloads the model's files (no cache): `{ commit, files: Map(name → Uint8Array), etags }`.
 * `progress({ loaded, total })` over all files (the total is the listing's sizes, else grows
 * with each Content-Length).
 * @param {Ref} ref
 * @param {string} hub
 * @param {Listing | null} listing
 * @param {(progress: { file: string, loaded: number, total: number }) => void} progress
 * @param {string | undefined} token
 * @returns {Promise<{ commit: string, files: Map<string, Uint8Array<ArrayBuffer>>, etags: Record<string, string> }>}
 */
async function download(ref, hub, listing, progress, token) {
  let commit = listing?.commit ?? null;
  const listed = listing?.files;
  /** @type {(required: boolean) => (file: string) => [string, boolean]} */
  const want = (required) => (file) => [file, required];
  const wanted = [...REQUIRED.map(want(true)), ...OPTIONAL.filter((f) => !listed || listed.has(f)).map(want(false))];
  if (listed) {
    const weights = WEIGHTS.find((f) => listed.has(f));
    if (!weights) throw new HubError("missing-file", `${referenceText(ref)}: the model lists neither model.safetensors nor pytorch_model.bin`, "model.safetensors");
    wanted.push([weights, true]);
  } else {
    wanted.push(...WEIGHTS.map(want(false)));
  }
  let total = listed ? wanted.reduce((sum, [f]) => sum + (listed.get(f)?.size ?? 0), 0) : 0;
  let loaded = 0;
  /** @type {Map<string, Uint8Array<ArrayBuffer>>} */
  const files = new Map();
  /** @type {Record<string, string>} */
  const etags = {};
  for (const [file, required] of wanted) {
    if (file === "pytorch_model.bin" && files.has("model.safetensors")) continue;
    // At the listing's commit: a push to the branch mid-download cannot mix commits.
    const url = resolveUrl(commit ? { ...ref, revision: commit } : ref, hub, file);
    let response;
    try {
      response = await fetch(url, { cache: "no-store", headers: authorization(token) });
    } catch (e) {
      throw new HubError("unreachable", `${url}: cannot fetch (${message(e)})`, file);
    }
    if (response.status === 404) {
      if (!required) continue;
      if (file === REQUIRED[0]) {
        throw new HubError("not-found", `${referenceText(ref)}: no such model${ref.revision ? ` or revision ${ref.revision}` : ""} on ${trimHub(hub)} (${url} answered 404)`, file);
      }
      throw new HubError("missing-file", `${referenceText(ref)}: the model has no ${file} (${url} answered 404)`, file);
    }
    if (!response.ok) throw gatedError(response, ref, hub, token, file) ?? statusError(response, url, file);
    const served = response.headers.get("x-repo-commit");
    if (served && commit && served !== commit) {
      throw new HubError("moved", `${referenceText(ref)}: revision ${ref.revision ?? "main"} moved during the download: the listing said commit ${commit}, ${file} came from ${served}; load it again`, file);
    }
    commit ??= served;
    // Content-Length is for progress only: the hub sends text gzipped (the length then is
    // the encoded one, or absent), and a page cannot see Content-Encoding across origins.
    // A transfer is checked against the listing's size and sha256.
    const length = Number(response.headers.get("content-length")) || null;
    const expected = listed?.get(file)?.size ?? null;
    if (!listed && length) total += length;
    let got = 0;
    const before = loaded;
    let bytes;
    try {
      bytes = await readBody(response, (received) => {
        got = received;
        loaded = before + received;
        progress({ file, loaded, total: Math.max(total, loaded) });
      });
    } catch (e) {
      throw new HubError("truncated", `${url}: the download broke off after ${got} bytes (${message(e)}); load it again`, file);
    }
    if (expected !== null && got !== expected) {
      throw new HubError("truncated", `${url}: ${got} bytes arrived where the hub lists ${expected}; load it again`, file);
    }
    // Never from the ETag: after the hub's redirect to its CDN that is a Xet hash, which a
    // page cannot tell from a sha256.
    const sum = listed?.get(file)?.sha256 ?? null;
    if (sum) {
      const found = await sha256(bytes);
      if (found !== null && found !== sum) {
        throw new HubError("corrupt", `${url}: the download is damaged (sha256 ${found}, the hub lists ${sum}); load it again`, file);
      }
    }
    etags[file] = sum ?? response.headers.get("etag") ?? `${got}`;
    files.set(file, bytes);
  }
  if (!WEIGHTS.some((f) => files.has(f))) {
    throw new HubError("missing-file", `${referenceText(ref)}: the model has neither model.safetensors nor pytorch_model.bin`, "model.safetensors");
  }
  return { commit: commit ?? ref.revision ?? "main", files, etags };
}

/**
 * What the conversion worker (convert.js) is given: the files by name, their buffers
 * (transferred), and the import's options.
 * @typedef {{ names: string[], buffers: ArrayBuffer[], options: ConvertOptions }} ConvertRequest
 */
/**
 * The import's options (crates/transduce-import-web's `Conversion.run`).
 * @typedef {object} ConvertOptions
 * @property {string} reference the `hf:` name at its commit
 * @property {string} hub
 * @property {string} weights "int8", "f16" or "f32"
 * @property {string} [source]
 * @property {string} [target]
 */
/**
 * The conversion's time and the most wasm memory it needed.
 * @typedef {{ ms: number, peakWasmBytes: number }} ConversionStats
 */
/**
 * A converted bundle, as the conversion worker posts it.
 * @typedef {object} Converted
 * @property {Uint8Array<ArrayBuffer>} config
 * @property {Uint8Array<ArrayBuffer>} tokenizer
 * @property {Uint8Array<ArrayBuffer>} weights
 * @property {string} card the model card
 * @property {string} name
 * @property {ConversionStats} stats
 */
/**
 * The conversion worker's answer: the bundle, or the import's error (each side's fields
 * named on the other as absent, so that `tsc -p web`, which is not strict, can read them).
 * @typedef {{ ok: true, value: Converted, message?: undefined, code?: undefined, file?: undefined }
 *   | { ok: false, value?: undefined, message: string, code?: string, file?: string | null }} ConvertReply
 */

/**
 * Converts in a worker of its own, ended afterwards: its wasm memory goes with it.
 * @param {Map<string, Uint8Array<ArrayBuffer>>} files
 * @param {ConvertOptions} options
 * @returns {Promise<Converted>}
 */
function convert(files, options) {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL("./convert.js", import.meta.url), { type: "module" });
    /** @type {<T>(f: (value: T) => void) => (value: T) => void} */
    const done = (f) => (value) => {
      worker.terminate();
      f(value);
    };
    /** @param {MessageEvent<ConvertReply>} event */
    worker.onmessage = ({ data }) => (data.ok ? done(resolve)(data.value) : done(reject)(new HubError(data.code ?? "import", data.message, data.file ?? null)));
    worker.onerror = (event) => done(reject)(new HubError("import", `the conversion worker failed: ${event.message || "could not start"}`));
    const names = [...files.keys()];
    const buffers = names.map((n) => /** @type {Uint8Array<ArrayBuffer>} a name of files's */ (files.get(n)).buffer);
    worker.postMessage({ names, buffers, options }, buffers);
  });
}

// ---- the cache of converted bundles -------------------------------------------------------

/**
 * A bundle's three files and its model card.
 * @typedef {{ config: Uint8Array, tokenizer: Uint8Array, weights: Uint8Array, card: string }} Bundle
 */
/**
 * A stored bundle's index entry: the commit it was converted from, and each file's sha256
 * (or ETag) then.
 * @typedef {{ commit: string, etags: Record<string, string> }} CacheEntry
 */
/**
 * A stored bundle's header, as pack wrote it: the entry, the three files' sizes, the card.
 * @typedef {CacheEntry & { sizes: number[], card: string }} CacheHeader
 */
/**
 * A bundle from this browser's store.
 * @typedef {Bundle & CacheEntry} CachedBundle
 */

/** @type {(ref: Ref, hub: string, weights: string) => string} */
const indexKey = (ref, hub, weights) =>
  `https://hub.transduce.invalid/v1/ref/${encodeURIComponent(trimHub(hub))}/${repoOf(ref)}/${encodeURIComponent(ref.revision ?? "main")}/${weights}`;
/** @type {(ref: Ref, hub: string, weights: string, commit: string) => string} */
const bundleKey = (ref, hub, weights, commit) =>
  `https://hub.transduce.invalid/v1/bundle/${encodeURIComponent(trimHub(hub))}/${repoOf(ref)}/${commit}/${weights}`;

/** @type {(useCache: boolean) => Promise<Cache | null>} */
const openStore = (useCache) => openCache(HUB_CACHE, useCache);

/**
 * One entry, framed (bytes.js): a JSON header as the head, then the three files.
 * @param {Bundle} bundle
 * @param {CacheEntry} meta
 * @returns {Uint8Array<ArrayBuffer>}
 */
function pack(bundle, meta) {
  const header = new TextEncoder().encode(JSON.stringify({ ...meta, sizes: [bundle.config.length, bundle.tokenizer.length, bundle.weights.length], card: bundle.card }));
  return frame(header, bundle.config, bundle.tokenizer, bundle.weights);
}

/**
 * @param {Uint8Array<ArrayBuffer>} bytes
 * @returns {{ meta: CacheHeader, bundle: Bundle } | null}
 */
function unpack(bytes) {
  const framed = unframe(bytes);
  if (!framed) return null;
  /** @type {CacheHeader} as pack wrote it (an entry that is not fails the sizes' check) */
  let meta;
  try {
    meta = JSON.parse(new TextDecoder().decode(framed.head));
  } catch {
    return null;
  }
  const [a, b, c] = meta.sizes ?? [];
  if (a + b + c !== framed.rest.length) return null;
  let at = 0;
  const rest = framed.rest;
  // Views, not copies: the files are handed to the wasm module, which copies them once.
  const take = (/** @type {number} */ k) => rest.subarray(at, (at += k));
  return { meta, bundle: { config: take(a), tokenizer: take(b), weights: take(c), card: meta.card } };
}

/**
 * @param {Cache | null} store
 * @param {Ref} ref
 * @param {string} hub
 * @param {string} weights
 * @returns {Promise<CachedBundle | null>}
 */
async function readCached(store, ref, hub, weights) {
  if (!store) return null;
  const index = await store.match(indexKey(ref, hub, weights)).catch(() => null);
  if (!index) return null;
  /** @type {CacheEntry} as writeCached wrote it */
  let entry;
  try {
    entry = await index.json();
  } catch {
    return null;
  }
  const hit = await store.match(bundleKey(ref, hub, weights, entry.commit)).catch(() => null);
  if (!hit) return null;
  const unpacked = unpack(new Uint8Array(await hit.arrayBuffer()));
  // The bundle's own sums are checked by the loader, as for every bundle.
  if (!unpacked || unpacked.meta.commit !== entry.commit) return null;
  return { ...unpacked.bundle, commit: entry.commit, etags: unpacked.meta.etags };
}

/**
 * Stores the bundle, then the index pointing at it; on failure neither is left.
 * @param {Cache} store
 * @param {Ref} ref
 * @param {string} hub
 * @param {string} weights
 * @param {Bundle} bundle
 * @param {CacheEntry} meta
 * @returns {Promise<HubError | null>}
 */
async function writeCached(store, ref, hub, weights, bundle, meta) {
  const keys = [bundleKey(ref, hub, weights, meta.commit), indexKey(ref, hub, weights)];
  try {
    await store.put(keys[0], new Response(pack(bundle, meta)));
    await store.put(keys[1], new Response(JSON.stringify({ commit: meta.commit, etags: meta.etags })));
    return null;
  } catch (e) {
    await Promise.all(keys.map((k) => store.delete(k).catch(() => {})));
    const quota = /** @type {{ name?: unknown } | null | undefined} */ (e)?.name === "QuotaExceededError";
    return new HubError(quota ? "quota" : "cache", `${referenceText(ref)}: the converted model could not be stored in this browser (${message(e)}); it works now and is fetched again next time`);
  }
}

/**
 * A model by name as the worker asks for it (transduce.js's bundleArgs).
 * @typedef {object} HubOptions
 * @property {string} reference the `hf:` name
 * @property {string} [hub] the hub's address (default DEFAULT_HUB)
 * @property {string} [weights] "int8" (default), "f16" or "f32"
 * @property {string} [source] the languages the caller stated
 * @property {string} [target]
 * @property {string} [token] a Hugging Face access token
 */
/**
 * A download's progress, as LoadOptions.onProgress gets it (transduce.d.ts).
 * @typedef {object} Progress
 * @property {string} file
 * @property {string} [url] a bundle folder's file's address (bundles.js)
 * @property {number} loaded
 * @property {number} total
 * @property {boolean} cached
 * @property {boolean} [converting]
 */
/**
 * A model by name as bundle files.
 * @typedef {object} HubBundle
 * @property {Uint8Array} config
 * @property {Uint8Array} tokenizer
 * @property {Uint8Array} weights
 * @property {string} card the model card
 * @property {string} reference the `hf:` name pinned to its commit
 * @property {string} commit
 * @property {Record<string, string>} [etags] (from the store) each file's sha256 or ETag
 * @property {boolean} cached
 * @property {boolean} offline
 * @property {() => Promise<HubError | null>} [keep]
 * @property {ConversionStats} [conversion]
 */

/**
 * A model by name as bundle files: `{ config, tokenizer, weights, card, reference (pinned),
 * commit, cached, offline, conversion, keep }`. `emit` gets `{ file, loaded, total, cached }`
 * as the page's download progress does. A bundle just converted is stored only when the
 * caller calls `keep()`, once it has loaded it, so that a bundle that does not load is never
 * kept; `keep()` answers null, or the warning of a store that failed (the quota).
 * @param {HubOptions} options
 * @param {boolean} useCache
 * @param {(progress: Progress) => void} emit
 * @returns {Promise<HubBundle>}
 */
export async function hubBundle({ reference, hub = DEFAULT_HUB, weights = "int8", source = undefined, target = undefined, token = undefined }, useCache, emit) {
  const ref = parseReference(reference);
  if (!ref) throw new HubError("bad-name", `${JSON.stringify(reference)} is not an hf: name`);
  if (!["int8", "f16", "f32"].includes(weights)) throw new HubError("options", `options.weights is ${JSON.stringify(weights)}; expected "int8", "f16" or "f32"`);
  const store = await openStore(useCache);
  let listing;
  try {
    listing = await fetchListing(ref, hub, { token });
  } catch (e) {
    if (!canFallBack(e)) throw e;
    const cached = await readCached(store, ref, hub, weights);
    if (!cached) {
      const error = new HubError(e.code, `${e.message}, and ${referenceText(ref)} is not cached in this browser`, e.file);
      Object.assign(error, { retryAfter: e.retryAfter, status: e.status });
      throw error;
    }
    emit({ file: repoOf(ref), loaded: cached.weights.length, total: cached.weights.length, cached: true });
    return { ...cached, reference: referenceText({ ...ref, revision: cached.commit }), cached: true, offline: true };
  }
  const cached = await readCached(store, ref, hub, weights);
  if (cached && listing?.commit && cached.commit === listing.commit) {
    const sums = Object.fromEntries([...listing.files].filter(([, f]) => f.sha256).map(([n, f]) => [n, f.sha256]));
    const stale = Object.entries(sums).some(([n, s]) => cached.etags?.[n] !== undefined && cached.etags[n] !== s);
    if (!stale) {
      emit({ file: repoOf(ref), loaded: cached.weights.length, total: cached.weights.length, cached: true });
      return { ...cached, reference: referenceText({ ...ref, revision: cached.commit }), cached: true, offline: false };
    }
  }
  const got = await download(ref, hub, listing, ({ file, loaded, total }) => emit({ file: `${repoOf(ref)}: ${file}`, loaded, total, cached: false }), token);
  const pinned = { ...ref, revision: got.commit };
  emit({ file: `${repoOf(ref)}: converting`, loaded: 0, total: 0, cached: false, converting: true });
  // Languages the caller stated (options.languages) win over the name's and the card's.
  const stated = source && target ? { source, target } : {};
  const converted = await convert(got.files, { reference: referenceText(pinned), hub: trimHub(hub), weights, ...stated });
  const bundle = { config: converted.config, tokenizer: converted.tokenizer, weights: converted.weights, card: converted.card };
  const keep = async () => (store ? writeCached(store, ref, hub, weights, bundle, { commit: got.commit, etags: got.etags }) : null);
  return { ...bundle, reference: referenceText(pinned), commit: got.commit, cached: false, offline: false, keep, conversion: converted.stats };
}

/**
 * The bundle of `reference` kept in this browser ({ config, tokenizer, weights, card,
 * commit }), or null: for a site that wants the converted files (to host them, say).
 * @param {string} reference
 * @param {string} [hub]
 * @param {string} [weights]
 * @returns {Promise<CachedBundle | null>}
 */
export async function readCachedBundle(reference, hub = DEFAULT_HUB, weights = "int8") {
  const ref = parseReference(reference);
  return ref ? readCached(await openStore(true), ref, hub, weights) : null;
}

/**
 * Whether `hf:` reference's bundle is in this browser's cache (for `availability()`).
 * @param {string} reference
 * @param {string} [hub]
 * @param {string} [weights]
 * @returns {Promise<boolean>}
 */
export async function isCached(reference, hub = DEFAULT_HUB, weights = "int8") {
  let ref;
  try {
    ref = parseReference(reference);
  } catch {
    return false;
  }
  const store = await openStore(true);
  if (!ref || !store) return false;
  const index = await store.match(indexKey(ref, hub, weights)).catch(() => null);
  return !!index;
}
