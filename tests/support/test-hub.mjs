// A Hugging Face hub on the loopback, for tests: the committed Marian fixtures
// (tests/fixtures/marian) served in the hub's layout, so that `transduce import hf:…`, the
// page and the package are tested by name without the internet.
//
//   node tests/support/test-hub.mjs [--port 0] [--opus-size DIR]     # prints "test hub: URL"
//   import { startHub } from "./tests/support/test-hub.mjs";          # { url, close() }
//
// What it serves, as huggingface.co does:
//   GET {hub}/api/models/ORG/NAME[/revision/REV][?blobs=true]  the listing: { id, sha,
//       siblings: [{ rfilename, size, lfs?: { sha256, size } }] }
//   GET {hub}/api/models?author=ORG&search=TEXT[&limit=N]  the search: [{ id, … }], further
//       pages through a Link header (rel="next")
//   GET {hub}/ORG/NAME/resolve/REV/FILE   small files directly (ETag: the git blob's sha1),
//       large ones ("LFS": the weights and the .spm files) by a 302 to {hub}/cdn/…, with
//       X-Linked-Etag (the content's sha256) and X-Linked-Size; every answer carries
//       X-Repo-Commit. The CDN answers Range requests (206). CORS as the hub's (any origin,
//       the headers above exposed).
//   404 for a model, revision or file it does not have.
// Misbehaviours, chosen by a first path segment of the hub URL ({url}/~MODE/…):
//   (the first four on the CDN's large files)
//   ~slow     the CDN sends 64 KB every 20 ms            ~cut      the CDN stops halfway
//   ~short    Content-Length 100 bytes more than sent     ~corrupt  one byte flipped
//   ~html     the listing is an HTML page (status 200)   ~moved    resolve answers come from
//   ~noapi    no listing (404): files are asked one by one           another commit
//   ~limited  every answer 429 (rate-limited)            ~down     every answer 503
//   ~real     huggingface.co as its own clients record it (below); ~real+MODE: with the
//             CDN misbehaving as MODE (~real+cut, ~real+corrupt, …)
//
// ~real, as huggingface_hub (file_download.py: the relative redirect, the linked ETag and
// size on the first answer only, X-Xet-Hash; _http.py: 401 without an error code for a
// repository that does not exist) and huggingface.js (the CORS lists, Xet's ETags) show:
//   - small files: a relative 307 to /api/resolve-cache/models/ORG/NAME/COMMIT/FILE?etag=…,
//     X-Repo-Commit and X-Linked-Etag on both hops, the text gzipped (where the client
//     accepts it) and sent without Content-Length;
//   - large files: a 302 to a CDN on another origin (a second port of this loopback),
//     `{cdn}/xet-bridge-us/…`, with X-Linked-Etag (the sha256), X-Linked-Size and
//     X-Xet-Hash on the 302 only; the CDN's own ETag is the Xet hash (another 64-hex sum
//     than the sha256), it answers Range and If-Range against that ETag, CORS `*`;
//   - the hub echoes the page's Origin and exposes exactly the hub's list;
//   - a repository that does not exist: 401 "Invalid username or password.", no
//     X-Error-Code.
// `startHub(…).limit(429 | 503 | null)` makes every hub answer a rate limit (RateLimit,
// Retry-After) or an outage, the CDN aside.
//
// Models (ORG/NAME → fixture):
//   Helsinki-NLP/opus-mt-en-de       swish (model.safetensors)
//   Helsinki-NLP/opus-mt-de-en       relu (pytorch_model.bin, zip form)
//   Helsinki-NLP/opus-mt-nl-en       relu (pytorch_model.bin, the legacy form of PyTorch ≤ 1.5)
//   Helsinki-NLP/opus-mt-fr-en       relu-copy (model.safetensors); no opus-mt-fr-de, so
//                                    fr→de pivots through English
//   Helsinki-NLP/opus-mt-en-ROMANCE  swish, its card listing its >>xx<< target tokens
//   test/opus-mt-en-xx-refused       swish with a config.json the import refuses
//   test/opus-mt-en-xx-novocab       swish without vocab.json
//   someone/marian-finetuned-news    swish, its card without languages
//   opus-size/opus-mt-en-de             --opus-size DIR (scripts/fixtures/marian.py --opus-size)
import { createHash } from "node:crypto";
import { createServer } from "node:http";
import { gzipSync } from "node:zlib";
import { readFileSync, readdirSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const fixtures = join(repo, "tests/fixtures/marian");
// The files a model folder of the hub has (what the fixtures' folders hold and an
// OPUS-MT repository has; reference.json and logits.safetensors are the tests' own).
const SERVED = ["config.json", "generation_config.json", "vocab.json", "source.spm", "target.spm", "tokenizer_config.json", "README.md", "model.safetensors"];
const LFS = (name) => name.endsWith(".safetensors") || name.endsWith(".bin") || name.endsWith(".spm");

const sha = (algorithm, bytes) => createHash(algorithm).update(bytes).digest("hex");
// git's blob id: what the hub gives small files as their ETag.
const gitBlob = (bytes) => sha("sha1", Buffer.concat([Buffer.from(`blob ${bytes.length}\0`), bytes]));

function folderFiles(dir, { weights, without = [], replace = {} } = {}) {
  const files = new Map();
  for (const name of SERVED) {
    const path = join(dir, name);
    if (existsSync(path) && !without.includes(name)) files.set(name, readFileSync(path));
  }
  if (weights) {
    files.delete("model.safetensors");
    files.set("pytorch_model.bin", readFileSync(weights));
  }
  for (const [name, bytes] of Object.entries(replace)) files.set(name, Buffer.from(bytes));
  return files;
}

function catalog(opusSize) {
  const models = new Map();
  const add = (id, files) => {
    // A commit id derived from the content: another content, another commit.
    const commit = sha("sha1", Buffer.concat([Buffer.from(id), ...[...files.values()]]));
    models.set(id, { id, files, commit });
  };
  const swish = join(fixtures, "swish");
  add("Helsinki-NLP/opus-mt-en-de", folderFiles(swish));
  add("Helsinki-NLP/opus-mt-de-en", folderFiles(join(fixtures, "relu"), { weights: join(fixtures, "relu.pytorch_model.bin") }));
  add("Helsinki-NLP/opus-mt-nl-en", folderFiles(join(fixtures, "relu"), { weights: join(fixtures, "relu.legacy.pytorch_model.bin") }));
  add("Helsinki-NLP/opus-mt-fr-en", folderFiles(join(fixtures, "relu-copy")));
  // The tc family's layout: byte fallback, a joint sorted vocabulary with <s> among its rows.
  add("Helsinki-NLP/opus-mt-tc-big-en-de", folderFiles(join(fixtures, "tc")));
  // A tiny student's depths (6 encoder, 2 decoder layers), under that family's name.
  add("Helsinki-NLP/opus-mt_tiny_eng-deu", folderFiles(join(fixtures, "student")));
  // A model of many targets under the tc-bible family's name: >>deu<< and >>nld<< ask for
  // different outputs.
  add("Helsinki-NLP/opus-mt-tc-bible-big-en-deu_nld", folderFiles(join(fixtures, "bible")));
  const card = readFileSync(join(swish, "README.md"), "utf8");
  add("Helsinki-NLP/opus-mt-en-ROMANCE", folderFiles(swish, {
    replace: { "README.md": `${card}\n* target languages: fr, nl\n* a sentence-initial language token is required in the form of \`>>id<<\` (id = valid target language ID), e.g. \`>>fra<<\`, \`>>nld<<\`\n` },
  }));
  const config = JSON.parse(readFileSync(join(swish, "config.json"), "utf8"));
  add("test/opus-mt-en-xx-refused", folderFiles(swish, { replace: { "config.json": JSON.stringify({ ...config, normalize_before: true }, null, 2) } }));
  add("test/opus-mt-en-xx-novocab", folderFiles(swish, { without: ["vocab.json"] }));
  // A pull request's revision (refs/pr/1) of opus-mt-en-de holding other weights (the
  // relu-copy fixture's): `hf:…@refs/pr/1` must get these, `main` the others.
  const pr = folderFiles(join(fixtures, "relu-copy"));
  models.set("Helsinki-NLP/opus-mt-en-de@refs/pr/1", { id: "Helsinki-NLP/opus-mt-en-de", ref: "refs/pr/1", files: pr, commit: sha("sha1", Buffer.concat([Buffer.from("pr 1"), ...pr.values()])) });
  // A gated repository: its files only for a token that accepted its conditions.
  add("test/gated-en-de", folderFiles(swish));
  // A fine-tuned model under its author's own name whose card gives a licence but no
  // languages: the caller states them (options.languages, the page's ?from=&to=).
  add("someone/marian-finetuned-news", folderFiles(swish, {
    replace: { "README.md": card.replace(/^language:\n(- .*\n)+/m, "").replace("# transduce Marian fixture (swish)", "# A Marian model fine-tuned on news") },
  }));
  if (opusSize) {
    const files = new Map();
    for (const name of readdirSync(opusSize)) if (SERVED.includes(name)) files.set(name, readFileSync(join(opusSize, name)));
    add("opus-size/opus-mt-en-de", files);
  }
  return models;
}

const MODES = ["slow", "cut", "short", "corrupt", "html", "moved", "noapi", "real", "limited", "down"];

// A renamed repository: its old name answers with a relative 307 to the new one, as the
// hub does (huggingface_hub's _http.py follows relative redirects for this reason).
const RENAMED = new Map([["Helsinki-NLP/opus-mt-en-de-renamed-from", "Helsinki-NLP/opus-mt-en-de"]]);
// Gated repositories, and the token that accepted their conditions. Anonymous: 401 with
// X-Error-Code GatedRepo; a token that did not accept: 403 with it (huggingface_hub's
// _http.py raises GatedRepoError on that code, whatever the status).
const GATED = new Set(["test/gated-en-de"]);
export const GRANTED_TOKEN = "hf_testtokengranted";

/**
 * The version of `id` at `rev` ("main", a commit, or a ref such as refs/pr/1): the model
 * entry, null where there is no such repository, undefined where it has no such revision.
 */
function version(models, id, rev) {
  const main = models.get(id);
  if (!main || main.ref) return null;
  if (rev === "main" || rev === main.commit) return main;
  for (const m of models.values()) if (m.id === id && (m.ref === rev || m.commit === rev)) return m;
  return undefined;
}

/** The files of `id` at a commit (the CDN and resolve-cache address them so). */
const atCommit = (models, id, commit) => [...models.values()].find((m) => m.id === id && m.commit === commit)?.files;

/** A gated repository's answer to a request without access, or null where it may pass. */
function gate(req, id) {
  if (!GATED.has(id)) return null;
  const token = (req.headers.authorization ?? "").replace(/^Bearer\s+/i, "");
  if (token === GRANTED_TOKEN) return null;
  const status = token ? 403 : 401;
  const message = token
    ? `Access to model ${id} is restricted and you are not in the authorized list. Visit https://huggingface.co/${id} to ask for access.`
    : `Access to model ${id} is restricted. You must have access to it and be authenticated to access it. Please log in.`;
  return { status, headers: { "content-type": "application/json", "x-error-code": "GatedRepo", "x-error-message": message }, body: JSON.stringify({ error: message }) };
}

/** Starts the hub; resolves to { url, port, close() }. */
export async function startHub({ port = 0, host = "127.0.0.1", opusSize } = {}) {
  const models = catalog(opusSize);
  // `limit(429)` / `limit(503)`: every answer of the hub (not its CDN) is that status from
  // then on, until `limit(null)`: the real hub's rate limit and outages, for a model that
  // may already be cached.
  const state = { status: null };
  const sockets = new Set();
  const serve = (handler) => {
    const server = createServer((req, res) => Promise.resolve(handler(req, res)).catch((e) => {
      if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
      res.end(String(e));
    }));
    server.on("connection", (s) => {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
    });
    return server;
  };
  const listen = (server, at) => new Promise((done) => server.listen(at, host, () => done(server.address().port)));
  // ~real's CDN: another origin (another port), as the hub's large files come from one.
  const cdn = { url: null };
  const cdnServer = serve((req, res) => handleCdn(models, req, res));
  cdn.url = `http://${host}:${await listen(cdnServer, 0)}`;
  const server = serve(async (req, res) => (state.status ? limited(req, res, state.status) : handle(models, cdn, req, res)));
  const bound = await listen(server, port);
  return {
    url: `http://${host}:${bound}`,
    port: bound,
    cdnUrl: cdn.url,
    models,
    limit: (status) => {
      state.status = status;
    },
    close: () => new Promise((done) => {
      for (const s of sockets) s.destroy();
      cdnServer.close(() => server.close(() => done()));
    }),
  };
}

// The hub's exposed headers (huggingface.js's and the hub's CORS answers).
const REAL_EXPOSED = "X-Repo-Commit, X-Request-Id, X-Error-Code, X-Error-Message, X-Total-Count, ETag, Link, Accept-Ranges, Content-Range, X-Linked-Size, X-Linked-ETag, X-Xet-Hash";
// A Xet hash: 64 hex digits as a sha256 is, of another thing (what the CDN gives as ETag).
const xetHash = (bytes) => sha("sha256", Buffer.concat([Buffer.from("xet merkle "), bytes]));

/** ~real's CDN: `/xet-bridge-us/ORG/NAME/COMMIT/FILE`, ETag the Xet hash, CORS `*`. */
async function handleCdn(models, req, res) {
  if (req.method === "OPTIONS") return send(res, 204, {});
  const whole = decodeURIComponent(new URL(req.url, "http://cdn").pathname);
  const misbehaviour = whole.match(/^\/~([a-z]+)(\/.*)$/);
  const mode = misbehaviour && MODES.includes(misbehaviour[1]) ? misbehaviour[1] : null;
  const path = mode ? misbehaviour[2] : whole;
  const m = path.match(/^\/xet-bridge-us\/([^/]+\/[^/]+)\/([0-9a-f]{40})\/(.+)$/);
  const model = m && models.get(m[1]);
  const bytes = model && m[2] === model.commit ? model.files.get(m[3]) : undefined;
  if (!bytes) return notFound(res, "no such object");
  return serveBytes(req, res, bytes, mode, { etag: `"${xetHash(bytes)}"` });
}

const CORS = {
  "access-control-allow-origin": "*",
  "access-control-allow-headers": "range, if-range, authorization",
  "access-control-expose-headers": "X-Repo-Commit, X-Linked-Etag, X-Linked-Size, X-Error-Code, X-Error-Message, ETag, Content-Length, Content-Range, Accept-Ranges, Link",
};

function send(res, status, headers, body = "") {
  res.writeHead(status, { ...CORS, ...headers });
  res.end(body);
}

const notFound = (res, what) => send(res, 404, { "content-type": "application/json", "x-error-code": "EntryNotFound" }, JSON.stringify({ error: what }));

async function handle(models, cdn, req, res) {
  if (req.method === "OPTIONS") return send(res, 204, {});
  if (req.method !== "GET" && req.method !== "HEAD") return send(res, 405, {});
  const url = new URL(req.url, "http://hub");
  let path = decodeURIComponent(url.pathname);
  // ~MODE, or ~real+MODE: the real hub's answers with a CDN that misbehaves.
  let mode = null;
  let real = false;
  const m = path.match(/^\/~([a-z+]+)(\/.*)$/);
  if (m && m[1].split("+").every((x) => MODES.includes(x))) {
    const modes = m[1].split("+");
    real = modes.includes("real");
    mode = modes.find((x) => x !== "real") ?? null;
    path = m[2];
  }
  const base = m && (mode || real) ? `/~${m[1]}` : "";
  if (mode === "limited") return limited(req, res, 429);
  if (mode === "down") return limited(req, res, 503);

  // The model search (huggingface_hub's list_models, huggingface.js's listModels): the
  // author's models whose names contain the text, `limit` at a time, the next page named by
  // a `Link: <…>; rel="next"` header with an opaque cursor, as the hub pages.
  if (path === "/api/models") {
    if (mode === "noapi") return notFound(res, "no search here");
    const author = url.searchParams.get("author");
    const text = (url.searchParams.get("search") ?? "").toLowerCase();
    const limit = Math.max(1, Math.min(1000, Number(url.searchParams.get("limit")) || 1000));
    const from = Number(url.searchParams.get("cursor") ?? 0) || 0;
    const all = [...models.keys()]
      .filter((id) => !id.includes("@") && (!author || id.startsWith(`${author}/`)) && id.split("/")[1].toLowerCase().includes(text))
      .sort();
    const page = all.slice(from, from + limit).map((id) => ({ _id: sha("sha1", id).slice(0, 24), id, modelId: id, private: false, tags: ["marian", "translation"], pipeline_tag: "translation", library_name: "transformers" }));
    const next = new URL(url);
    next.searchParams.set("cursor", String(from + limit));
    const link = from + limit < all.length ? { link: `<${base}${next.pathname}${next.search}>; rel="next"` } : {};
    const headers = { "content-type": "application/json", ...link };
    return real ? realSend(req, res, 200, headers, JSON.stringify(page)) : send(res, 200, headers, JSON.stringify(page));
  }

  // The listing.
  let api = path.match(/^\/api\/models\/([^/]+\/[^/]+?)(?:\/revision\/(.+))?$/);
  if (api) {
    if (mode === "noapi") return notFound(res, "no listing here");
    if (RENAMED.has(api[1])) return renamedTo(req, res, url, api[1], real);
    const denied = gate(req, api[1]);
    if (denied) return (real ? realSend : sendPlain)(req, res, denied.status, denied.headers, denied.body);
    const rev = api[2] ?? "main";
    const model = version(models, api[1], rev);
    if (model === null && real) return realMissing(req, res);
    if (model === null) return send(res, 404, { "content-type": "application/json" }, JSON.stringify({ error: "Repository not found" }));
    if (!model) return send(res, 404, { "content-type": "application/json", "x-error-code": "RevisionNotFound" }, JSON.stringify({ error: "Invalid rev id" }));
    if (mode === "html") return send(res, 200, { "content-type": "text/html" }, "<!doctype html><html><body><h1>Welcome</h1><p>This is not the API.</p></body></html>");
    const siblings = [...model.files].map(([name, bytes]) => ({
      rfilename: name,
      size: bytes.length,
      blobId: gitBlob(bytes),
      ...(LFS(name) ? { lfs: { sha256: sha("sha256", bytes), size: bytes.length } } : {}),
    }));
    return send(res, 200, { "content-type": "application/json" }, JSON.stringify({ id: model.id, sha: model.commit, siblings }));
  }

  // The CDN a large file is redirected to.
  const blob = path.match(/^\/cdn\/([^/]+\/[^/]+)\/([0-9a-f]{40})\/(.+)$/);
  if (blob) {
    const bytes = atCommit(models, blob[1], blob[2])?.get(blob[3]);
    if (!bytes) return notFound(res, "no such blob");
    return serveBytes(req, res, bytes, mode, { etag: `"${sha("sha256", bytes)}"` });
  }

  // ~real's second hop for small files.
  const cached = path.match(/^\/api\/resolve-cache\/models\/([^/]+\/[^/]+)\/([0-9a-f]{40})\/(.+)$/);
  if (cached && real) {
    const bytes = atCommit(models, cached[1], cached[2])?.get(cached[3]);
    if (!bytes) return notFound(res, "no such file");
    return serveText(req, res, bytes, { etag: `"${gitBlob(bytes)}"`, "x-linked-etag": `"${gitBlob(bytes)}"`, "x-repo-commit": cached[2] });
  }

  // A revision is one path segment, refs/pr/N aside (the clients send it %2F-encoded).
  const resolve = path.match(/^\/([^/]+\/[^/]+)\/resolve\/(refs\/pr\/\d+|[^/]+)\/(.+)$/);
  if (!resolve) return notFound(res, "not a hub path");
  if (RENAMED.has(resolve[1])) return renamedTo(req, res, url, resolve[1], real);
  const denied = gate(req, resolve[1]);
  if (denied) return (real ? realSend : sendPlain)(req, res, denied.status, denied.headers, denied.body);
  const rev = resolve[2];
  const model = version(models, resolve[1], rev);
  if (model === null && real) return realMissing(req, res);
  if (model === null) return send(res, 404, { "x-error-code": "RepoNotFound" }, "Repository not found");
  if (!model) return send(res, 404, { "x-error-code": "RevisionNotFound" }, "Revision not found");
  const name = resolve[3];
  const bytes = model.files.get(name);
  // Another commit's answers, as when the branch moves between the listing and a download.
  const commit = mode === "moved" ? sha("sha1", `${model.commit} moved`) : model.commit;
  if (!bytes) return send(res, 404, { "x-error-code": "EntryNotFound", "x-repo-commit": commit }, "Entry not found");
  if (real) return realResolve(req, res, model, name, bytes, cdn, mode, base);
  if (LFS(name)) {
    return send(res, 302, {
      location: `${base}/cdn/${model.id}/${model.commit}/${name}`,
      "x-repo-commit": commit,
      "x-linked-etag": `"${sha("sha256", bytes)}"`,
      "x-linked-size": String(bytes.length),
    });
  }
  // The transfer misbehaviours are the CDN's (where the large files come from).
  return serveBytes(req, res, bytes, null, { etag: `"${gitBlob(bytes)}"`, "x-repo-commit": commit });
}

/**
 * The hub rate-limiting (429, with `RateLimit` and `Retry-After` as the hub sends them:
 * huggingface_hub's `_http.py` reads both) or down (503).
 */
function limited(req, res, status) {
  if (req.method === "OPTIONS") return send(res, 204, {});
  const headers = status === 429
    ? { "retry-after": "42", ratelimit: '"api";r=0;t=42', "ratelimit-policy": '"fixed window";"api";q=500;w=300', "x-error-message": "You have exceeded our rate limit" }
    : {};
  return realSend(req, res, status, { "content-type": "text/plain", ...headers }, status === 429 ? "Too Many Requests" : "Service Unavailable");
}

/** The hub's CORS answer: the page's Origin echoed, exactly its exposed list. */
function realCors(req) {
  return {
    "access-control-allow-origin": req.headers.origin ?? "*",
    "access-control-allow-credentials": "true",
    "access-control-expose-headers": REAL_EXPOSED,
    vary: "Origin",
  };
}

function realSend(req, res, status, headers, body = "") {
  res.writeHead(status, { ...realCors(req), ...headers });
  res.end(body);
}

/** A repository the hub does not have: 401, as to a caller without the rights to it. */
/** A renamed repository's answer: a relative 307 to the same path under the new name. */
function renamedTo(req, res, url, from, real) {
  const location = `${url.pathname.replace(from, RENAMED.get(from))}${url.search}`;
  return (real ? realSend : sendPlain)(req, res, 307, { location, "content-type": "text/plain" }, `Temporary Redirect. Redirecting to ${location}`);
}

const sendPlain = (req, res, status, headers, body) => send(res, status, headers, body);

function realMissing(req, res) {
  return realSend(req, res, 401, { "content-type": "application/json", "x-request-id": "Root=1-test" }, JSON.stringify({ error: "Invalid username or password." }));
}

/** ~real's first hop: a relative 307 for small files, a 302 to the CDN for large ones. */
function realResolve(req, res, model, name, bytes, cdn, mode, base) {
  if (LFS(name)) {
    return realSend(req, res, 302, {
      location: `${cdn.url}${mode ? `/~${mode}` : ""}/xet-bridge-us/${model.id}/${model.commit}/${name}`,
      "x-repo-commit": model.commit,
      "x-linked-etag": `"${sha("sha256", bytes)}"`,
      "x-linked-size": String(bytes.length),
      "x-xet-hash": xetHash(bytes),
    });
  }
  return realSend(req, res, 307, {
    location: `${base}/api/resolve-cache/models/${model.id}/${model.commit}/${encodeURIComponent(name)}?etag=${gitBlob(bytes)}`,
    "x-repo-commit": model.commit,
    "x-linked-etag": `"${gitBlob(bytes)}"`,
  });
}

/** A small file as the hub's resolve-cache sends it: gzipped where accepted, no length. */
function serveText(req, res, bytes, headers) {
  const gzip = /\bgzip\b/.test(req.headers["accept-encoding"] ?? "");
  res.writeHead(200, { ...realCors(req), ...headers, "content-type": "text/plain; charset=utf-8", ...(gzip ? { "content-encoding": "gzip" } : {}) });
  if (req.method === "HEAD") return res.end();
  // Written in pieces, so the answer is chunked: no Content-Length.
  const body = gzip ? gzipSync(bytes) : bytes;
  res.write(body.subarray(0, body.length >> 1));
  res.end(body.subarray(body.length >> 1));
}

function serveBytes(req, res, bytes, mode, headers) {
  let body = bytes;
  let status = 200;
  const extra = { ...headers, "accept-ranges": "bytes", "content-type": "application/octet-stream" };
  const range = req.headers.range?.match(/^bytes=(\d+)-$/);
  const ifRange = req.headers["if-range"];
  if (range && (!ifRange || ifRange === headers.etag) && Number(range[1]) < bytes.length) {
    const from = Number(range[1]);
    body = bytes.subarray(from);
    status = 206;
    extra["content-range"] = `bytes ${from}-${bytes.length - 1}/${bytes.length}`;
  }
  if (mode === "corrupt") {
    body = Buffer.from(body);
    body[body.length >> 1] ^= 0xff;
  }
  const length = mode === "short" ? body.length + 100 : body.length;
  res.writeHead(status, { ...CORS, ...extra, "content-length": String(length) });
  if (req.method === "HEAD") return res.end();
  const chunk = 1 << 16;
  const stop = mode === "cut" ? body.length >> 1 : body.length;
  let at = 0;
  const pump = () => {
    while (at < stop) {
      const piece = body.subarray(at, Math.min(at + chunk, stop));
      at += piece.length;
      const more = res.write(piece);
      if (mode === "slow") return setTimeout(pump, 20);
      if (!more) return res.once("drain", pump);
    }
    // A body that ends before its Content-Length: the connection is dropped, as a broken
    // transfer drops it.
    if (mode === "cut" || mode === "short") res.destroy();
    else res.end();
  };
  pump();
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const arg = (name) => {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 ? process.argv[i + 1] : undefined;
  };
  const hub = await startHub({ port: Number(arg("port") ?? 0), opusSize: arg("opus-size") });
  console.log(`test hub: ${hub.url}`);
  for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => hub.close().then(() => process.exit(0)));
}
