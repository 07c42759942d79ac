// @ts-check
// The Markdown link check: every relative link of the repository's Markdown files names a
// file that exists and, with a `#fragment` into a Markdown file, a heading that is there,
// by the anchors GitHub gives headings.

import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";

/**
 * GitHub's anchor of a heading: lower case, every character but letters, digits, spaces,
 * `-` and `_` dropped, spaces as `-`.
 * @param {string} heading
 */
export function slug(heading) {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/**
 * Markdown text with its fenced code blocks blanked (lines kept, so line numbers hold).
 * @param {string} text
 */
function withoutFences(text) {
  return text.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, (block) => block.replace(/[^\n]/g, ""));
}

/**
 * The anchors of a Markdown text's headings (`#`…`######` lines), with GitHub's `-1`, `-2`
 * suffixes for repeated ones.
 * @param {string} text
 * @returns {Set<string>}
 */
export function anchors(text) {
  const seen = new Map();
  const out = new Set();
  for (const line of withoutFences(text).split("\n")) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    // A heading's own inline markup (links, emphasis) counts by its text.
    const heading = m[1].replace(/\[([^\]]*)\]\([^)]*\)/g, "$1").replace(/[*_]{1,2}([^*_]+)[*_]{1,2}/g, "$1");
    const base = slug(heading);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/**
 * The relative links of a Markdown text: `[text](target)` outside code, without web,
 * mail or data URLs, as { target, line }.
 * @param {string} text
 * @returns {{ target: string, line: number }[]}
 */
export function links(text) {
  const out = [];
  // Inline code is not a link either.
  const lines = withoutFences(text)
    .split("\n")
    .map((line) => line.replace(/`[^`]*`/g, ""));
  lines.forEach((line, i) => {
    for (const m of line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = m[1];
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      out.push({ target, line: i + 1 });
    }
  });
  return out;
}

/**
 * Every broken link of `files` (paths relative to `root`), as "file:line: why".
 * @param {string} root
 * @param {string[]} files
 * @returns {string[]}
 */
export function brokenLinks(root, files) {
  const texts = new Map();
  const read = (/** @type {string} */ path) => {
    if (!texts.has(path)) texts.set(path, readFileSync(join(root, path), "utf8"));
    return /** @type {string} */ (texts.get(path));
  };
  const broken = [];
  for (const file of files) {
    for (const { target, line } of links(read(file))) {
      const [path, fragment] = target.split("#", 2);
      const decoded = decodeURIComponent(path);
      const to = path ? relative(root, join(root, dirname(file), decoded)) : file;
      const where = `${file}:${line}`;
      if (to.startsWith("..")) continue; // outside the repository (../shared): not ours to check
      if (!existsSync(join(root, to))) {
        broken.push(`${where}: ${target}: no such file`);
        continue;
      }
      if (fragment && to.endsWith(".md") && statSync(join(root, to)).isFile() && !anchors(read(to)).has(fragment)) {
        broken.push(`${where}: ${target}: no heading with that anchor in ${to}`);
      }
    }
  }
  return broken;
}
