// @ts-check
// scripts/README.md names every script, DEVELOPING every module of web/: a file added
// without a row, or a row left for a file that is gone, fails here.

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const repo = join(dirname(fileURLToPath(import.meta.url)), "../..");

/** The files a Markdown table row's first cell names (`a.sh`, `build/b.sh`, `tests/support/c.mjs`, …). */
export function namedScripts(markdown) {
  const names = new Set();
  for (const line of markdown.split("\n")) {
    if (!line.startsWith("| `")) continue;
    const cell = line.split("|")[1];
    for (const [, code] of cell.matchAll(/`([^`]+)`/g)) names.add(code);
  }
  return names;
}

/** Every file under `dir` (relative to the repository, recursively), but caches and READMEs. */
function filesUnder(dir) {
  return readdirSync(join(repo, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name !== "README.md" && !e.parentPath.includes("__pycache__"))
    .map((e) => join(e.parentPath, e.name).slice(repo.length + 1));
}

test("a row's first cell gives its files; other cells and text do not", () => {
  const md = "# X\n| script | what |\n|---|---|\n| `a.sh`, `build/b.py` | two |\n| `c.mjs` | `d.sh` is not a name here |\nSee `e.sh`.\n";
  assert.deepEqual([...namedScripts(md)].sort(), ["a.sh", "build/b.py", "c.mjs"]);
});

test("scripts/README.md names every file of scripts/ and tests/support/, and no other", () => {
  const named = namedScripts(readFileSync(join(repo, "scripts/README.md"), "utf8"));
  const files = [
    ...filesUnder("scripts").map((f) => f.slice("scripts/".length)),
    ...filesUnder("tests/support"),
  ];
  assert.deepEqual(files.filter((f) => !named.has(f)), [], "files without a row in scripts/README.md");
  assert.deepEqual([...named].filter((n) => !files.includes(n)), [], "rows for files that do not exist");
});

test("DEVELOPING's table of the page's JavaScript names every web/*.js and no other", () => {
  const md = readFileSync(join(repo, "docs/DEVELOPING.md"), "utf8");
  const section = md.split(/^## The page's JavaScript$/m)[1]?.split(/^## /m)[0] ?? "";
  const named = new Set();
  for (const line of section.split("\n")) {
    if (!line.startsWith("| `")) continue;
    for (const [, code] of line.split("|")[1].matchAll(/`([^`]+\.js)`/g)) named.add(code);
  }
  const files = readdirSync(join(repo, "web")).filter((f) => f.endsWith(".js"));
  assert.deepEqual(files.filter((f) => !named.has(f)), [], "modules without a row in docs/DEVELOPING.md");
  assert.deepEqual([...named].filter((n) => !files.includes(n)), [], "rows for modules that do not exist");
});

test("every module of web/ is shipped: the page copies it (index.html), the package too (build-npm.sh) but the demo's app.js", () => {
  const html = readFileSync(join(repo, "index.html"), "utf8");
  const npm = readFileSync(join(repo, "scripts/build-npm.sh"), "utf8");
  const files = npm.match(/"files": \[([^\]]*)\]/)?.[1] ?? "";
  for (const f of readdirSync(join(repo, "web")).filter((n) => n.endsWith(".js"))) {
    assert.ok(html.includes(`href="web/${f}"`), `index.html does not copy web/${f}`);
    if (f === "app.js") continue;
    assert.ok(npm.includes(`web/${f}`), `scripts/build-npm.sh does not copy web/${f}`);
    assert.ok(files.includes(`"${f}"`), `the package's "files" does not list ${f}`);
  }
});
