// A small static file server for the demo page and the browser tests (no dependencies).
//   node scripts/serve.mjs [--dir dist] [--port 8080] [--host 127.0.0.1]
import { createServer } from "node:http";
import { readFile, stat } from "node:fs/promises";
import { extname, join, normalize, resolve, sep } from "node:path";

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

/** Serves `mounts` ({ "/prefix/": "/abs/dir" }, longest prefix first); resolves to the server. */
export function serve({ mounts, port = 8080, host = "127.0.0.1", quiet = true }) {
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
      if ((await stat(file)).isDirectory()) file = join(file, "index.html");
      const body = await readFile(file);
      res.writeHead(200, {
        "content-type": TYPES[extname(file)] ?? "application/octet-stream",
        "content-length": body.length,
        "cache-control": "no-cache",
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
    await serve({ mounts: { "/": dir }, port, host, quiet: true });
  } catch (e) {
    console.error(`cannot serve on ${host}:${port}: ${e.message}`);
    process.exit(1);
  }
  console.log(`transduce demo: http://${host}:${port}/  (serving ${dir}; Ctrl-C stops)`);
}
