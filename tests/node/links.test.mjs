// @ts-check
// The Markdown link check (links.mjs): its anchor rules against GitHub's, computed by hand,
// and then every Markdown file the repository tracks.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { anchors, brokenLinks, links, slug } from "./links.mjs";

const repo = join(dirname(fileURLToPath(import.meta.url)), "../..");

test("headings become GitHub's anchors", () => {
  assert.equal(slug("Imported OPUS-MT models (at opus-mt-en-de's size)"), "imported-opus-mt-models-at-opus-mt-en-des-size");
  assert.equal(slug("The test command"), "the-test-command");
  assert.equal(slug("`--quick`: the inner loop"), "--quick-the-inner-loop");
  assert.equal(slug("Über größe"), "über-größe");
  const text = "# A\n## A\n```\n# not a heading\n```\n### A [link](x.md) and *b*\n";
  assert.deepEqual([...anchors(text)], ["a", "a-1", "a-link-and-b"]);
});

test("links are the relative ones outside code", () => {
  const text = "[a](docs/A.md) `[b](no.md)` [c](https://x.org) [d](#here)\n```\n[e](no.md)\n```\n[f](<B.md> \"t\")";
  assert.deepEqual(
    links(text).map((l) => [l.target, l.line]),
    [["docs/A.md", 1], ["#here", 1], ["B.md", 5]],
  );
});

test("a missing file and a missing heading are each reported with file and line", () => {
  const root = mkdtempSync(join(tmpdir(), "links-"));
  mkdirSync(join(root, "docs"));
  writeFileSync(join(root, "docs/A.md"), "# Top\n\n[ok](B.md#there) [gone](C.md)\n[bad](B.md#nowhere) [self](#top)\n");
  writeFileSync(join(root, "docs/B.md"), "## There\n");
  assert.deepEqual(brokenLinks(root, ["docs/A.md", "docs/B.md"]), [
    "docs/A.md:3: C.md: no such file",
    "docs/A.md:4: B.md#nowhere: no heading with that anchor in docs/B.md",
  ]);
});

test("every relative link of the repository's Markdown files resolves", () => {
  const files = execFileSync("git", ["ls-files", "*.md"], { cwd: repo, encoding: "utf8" }).split("\n").filter(Boolean);
  assert.ok(files.length > 10, `only ${files.length} Markdown files tracked`);
  assert.deepEqual(brokenLinks(repo, files), []);
});
