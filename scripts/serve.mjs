// A small static file server for the demo page and the browser tests (no dependencies).
//   node scripts/serve.mjs [--dir dist] [--port 8080] [--host 127.0.0.1] [--isolate 0]
// The page is served cross-origin isolated (COOP same-origin, COEP require-corp), which
// SharedArrayBuffer and so the CPU decoder's threads need (docs/WEB.md, "Threads"); a page
// requested with ?isolate=0, or every page with --isolate 0, is served without, and decodes
// on one thread.
// Code and text go out brotli- or gzip-compressed when the browser accepts it (the CPU wasm
// module: about a third of its size); model weights go out as they are (they barely
// compress, and the page's download progress counts their bytes).
import { createServer } from "node:http";
import { readFile, stat } from "node:fs/promises";
import { extname, join, normalize, resolve, sep } from "node:path";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";

const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".wasm": "application/wasm",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ts": "text/plain; charset=utf-8",
  ".md": "text/markdown; charset=utf-8",
  ".safetensors": "application/octet-stream",
};

const COMPRESSIBLE = new Set([".html", ".js", ".mjs", ".css", ".wasm", ".svg", ".ts", ".md"]);
// Compressed bodies by encoding, path and modification time: each file is compressed once.
const compressed = new Map();

/** The body to send for `file` and its content-encoding, as the request accepts. */
function encode(req, file, mtime, body) {
  if (!COMPRESSIBLE.has(extname(file)) || body.length < 1024) return [body, null];
  const accepted = String(req.headers["accept-encoding"] ?? "");
  const encoding = /\bbr\b/.test(accepted) ? "br" : /\bgzip\b/.test(accepted) ? "gzip" : null;
  if (!encoding) return [body, null];
  const key = `${encoding} ${file} ${mtime}`;
  let out = compressed.get(key);
  if (!out) {
    out =
      encoding === "br"
        ? brotliCompressSync(body, {
            params: {
              // Quality 9: within a few percent of 11, a second instead of a minute for the
              // WebGPU module.
              [constants.BROTLI_PARAM_QUALITY]: 9,
              [constants.BROTLI_PARAM_SIZE_HINT]: body.length,
            },
          })
        : gzipSync(body, { level: 9 });
    compressed.set(key, out);
  }
  return [out, encoding];
}

/** Serves `mounts` ({ "/prefix/": "/abs/dir" }, longest prefix first); resolves to the server. */
export function serve({ mounts, port = 8080, host = "127.0.0.1", quiet = true, isolate = true }) {
  const entries = Object.entries(mounts).sort((a, b) => b[0].length - a[0].length);
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, "http://x");
    let path = decodeURIComponent(url.pathname);
    const mount = entries.find(([prefix]) => path.startsWith(prefix));
    if (!mount) return send(res, 404, "not found");
    const root = resolve(mount[1]);
    let file = normalize(join(root, path.slice(mount[0].length)));
    if (file !== root && !file.startsWith(root + sep)) return send(res, 403, "forbidden");
    try {
      let info = await stat(file);
      if (info.isDirectory()) {
        file = join(file, "index.html");
        info = await stat(file);
      }
      const [body, encoding] = encode(req, file, info.mtimeMs, await readFile(file));
      res.writeHead(200, {
        "content-type": TYPES[extname(file)] ?? "application/octet-stream",
        "content-length": body.length,
        "cache-control": "no-cache",
        vary: "accept-encoding",
        ...(encoding ? { "content-encoding": encoding } : {}),
        ...isolation(isolate && url.searchParams.get("isolate") !== "0"),
      });
      res.end(req.method === "HEAD" ? undefined : body);
      if (!quiet) console.log(`200 ${path}`);
    } catch {
      send(res, 404, "not found");
      if (!quiet) console.log(`404 ${path}`);
    }
  });
  return new Promise((ok, fail) => {
    server.once("error", fail);
    server.listen(port, host, () => ok(server));
  });
}

/**
 * Cross-origin isolation: a document with both headers is isolated; its workers (each
 * script with COEP) are too. CORP cross-origin lets an isolated page elsewhere embed these
 * files (the npm package from a CDN, a bundle folder).
 */
function isolation(on) {
  const corp = { "cross-origin-resource-policy": "cross-origin" };
  return on
    ? { ...corp, "cross-origin-opener-policy": "same-origin", "cross-origin-embedder-policy": "require-corp" }
    : corp;
}

function send(res, code, text) {
  res.writeHead(code, { "content-type": "text/plain" });
  res.end(text);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const arg = (name, fallback) => {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 ? process.argv[i + 1] : fallback;
  };
  const dir = arg("dir", "dist");
  const port = Number(arg("port", "8080"));
  const host = arg("host", "127.0.0.1");
  try {
    await serve({ mounts: { "/": dir }, port, host, quiet: true, isolate: arg("isolate", "1") !== "0" });
  } catch (e) {
    console.error(`cannot serve on ${host}:${port}: ${e.message}`);
    process.exit(1);
  }
  console.log(`transduce demo: http://${host}:${port}/  (serving ${dir}; Ctrl-C stops)`);
}
