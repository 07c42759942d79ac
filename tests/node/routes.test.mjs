// Which Helsinki-NLP model a pair gets (web/routes.js), the language codes both ways
// (web/iso639.js, generated from Debian's iso-codes), and the hub's model search against
// the test hub (web/hub.js searchModels).
import assert from "node:assert/strict";
import { test } from "node:test";
import { nextPage, searchModels } from "../../web/hub.js";
import { THREE } from "../../web/iso639.js";
import { FAMILIES, choose, direct, pairsOf, parseName, reachable, same, searches, threeLetter, twoLetter } from "../../web/routes.js";
import { startHub } from "../support/test-hub.mjs";

test("two- and three-letter codes map both ways, as ISO 639 has them", () => {
  // ISO 639-3's own examples of languages with a 639-1 code.
  for (const [two, three] of [["de", "deu"], ["en", "eng"], ["ko", "kor"], ["nl", "nld"], ["fr", "fra"], ["zh", "zho"], ["fa", "fas"]]) {
    assert.equal(threeLetter(two), three);
    assert.equal(twoLetter(three), two);
  }
  // No two-letter code: the three-letter one is the BCP 47 subtag itself.
  assert.equal(twoLetter("gsw"), "gsw");
  assert.equal(threeLetter("gsw"), "gsw");
  assert.equal(threeLetter("xx"), null);
  assert.ok(Object.keys(THREE).length >= 180, "every ISO 639-1 code");
  assert.ok(same("de", "deu") && same("eng", "en") && !same("de", "nl"));
});

test("Helsinki-NLP's names parse by family; other shapes are not a pair", () => {
  assert.deepEqual(parseName("Helsinki-NLP/opus-mt-en-de"), { family: "base", source: "en", target: "de" });
  assert.deepEqual(parseName("Helsinki-NLP/opus-mt-tc-big-en-fr"), { family: "tc-big", source: "en", target: "fr" });
  assert.deepEqual(parseName("opus-mt-tc-base-uk-fi"), { family: "tc-base", source: "uk", target: "fi" });
  assert.deepEqual(parseName("Helsinki-NLP/opus-mt_tiny_kor-eng"), { family: "tiny", source: "kor", target: "eng" });
  assert.deepEqual(parseName("Helsinki-NLP/opus-mt-tc-bible-big-deu_eng_nld-gem"), {
    family: "tc-bible", source: "deu_eng_nld", target: "gem", sources: ["deu", "eng", "nld"], targets: ["gem"],
  });
  for (const other of ["Helsinki-NLP/opus-mt-en-ROMANCE", "Helsinki-NLP/opus-mt-en-de-fine-tuned", "x/y"]) {
    assert.equal(parseName(other), null, other);
  }
});

test("a pair is searched by its two- and its three-letter codes", () => {
  assert.deepEqual(searches("en", "de"), ["en-de", "eng-deu", "tc-bible-big"]);
  assert.deepEqual(searches("gsw", "en"), ["gsw-en", "gsw-eng", "tc-bible-big"]);
  const ids = ["Helsinki-NLP/opus-mt-en-de", "Helsinki-NLP/opus-mt_tiny_eng-deu", "Helsinki-NLP/opus-mt-tc-big-en-de", "Helsinki-NLP/opus-mt-de-en", "Helsinki-NLP/opus-mt-en-deu_nld"];
  assert.deepEqual(direct(ids, "en", "de").map((m) => m.family), ["base", "tiny", "tc-big"]);
});

test("a tc-bible model serves a pair its groups name, with the target's token where it has several", () => {
  const ids = ["H/opus-mt-tc-bible-big-en-deu_nld", "H/opus-mt-tc-bible-big-deu_eng_nld-gem", "H/opus-mt-tc-bible-big-fra-eng"];
  assert.deepEqual(direct(ids, "en", "nl"), [{ id: "H/opus-mt-tc-bible-big-en-deu_nld", family: "tc-bible", token: ">>nld<<" }]);
  assert.deepEqual(direct(ids, "fr", "en"), [{ id: "H/opus-mt-tc-bible-big-fra-eng", family: "tc-bible" }]);
  // An ISO 639-5 family (gem) is not looked into.
  assert.deepEqual(direct(ids, "nl", "de"), []);
  const only = (a, b) => direct(ids, a, b);
  const enNl = choose(only, "en", "nl");
  assert.deepEqual(enNl.ids, ["H/opus-mt-tc-bible-big-en-deu_nld"]);
  assert.deepEqual(enNl.tokens, [">>nld<<"]);
  assert.match(enNl.why, /with >>nld<</);
  // Below a model of the pair's own when the best is asked for.
  const withBig = (a, b) => [...direct(ids, a, b), ...(a === "en" && b === "nl" ? [{ id: "H/opus-mt-tc-big-en-nl", family: "tc-big" }] : [])];
  assert.deepEqual(choose(withBig, "en", "nl", "quality").ids, ["H/opus-mt-tc-big-en-nl"]);
});

const HUB = {
  "en-de": [{ id: "H/opus-mt-en-de", family: "base" }, { id: "H/opus-mt_tiny_eng-deu", family: "tiny" }, { id: "H/opus-mt-tc-big-en-de", family: "tc-big" }],
  "fr-en": [{ id: "H/opus-mt-fr-en", family: "base" }, { id: "H/opus-mt-tc-big-fr-en", family: "tc-big" }],
  "fr-de": [{ id: "H/opus-mt-tc-big-fr-de", family: "tc-big" }],
  "ko-en": [{ id: "H/opus-mt_tiny_kor-eng", family: "tiny" }],
};
const pairs = (a, b) => HUB[`${a}-${b}`] ?? [];

test('"small" takes the fewest bytes, through English where that is smaller', () => {
  const enDe = choose(pairs, "en", "de");
  assert.deepEqual(enDe.ids, ["H/opus-mt_tiny_eng-deu"]);
  assert.equal(enDe.params, FAMILIES.tiny.params);
  assert.match(enDe.why, /smallest/);
  // fr→de: tc-big direct (234M) against fr-en base + en-de student (74M + 17M).
  const frDe = choose(pairs, "fr", "de");
  assert.deepEqual(frDe.ids, ["H/opus-mt-fr-en", "H/opus-mt_tiny_eng-deu"]);
  assert.equal(frDe.params, FAMILIES.base.params + FAMILIES.tiny.params);
  assert.match(frDe.why, /through English, smaller than opus-mt-tc-big-fr-de/);
  // ko→de: nothing direct.
  assert.deepEqual(choose(pairs, "ko", "de").ids, ["H/opus-mt_tiny_kor-eng", "H/opus-mt_tiny_eng-deu"]);
  assert.equal(choose(pairs, "de", "ko"), null);
});

test('"quality" takes the best family, direct before through English', () => {
  assert.deepEqual(choose(pairs, "en", "de", "quality").ids, ["H/opus-mt-tc-big-en-de"]);
  assert.deepEqual(choose(pairs, "fr", "de", "quality").ids, ["H/opus-mt-tc-big-fr-de"]);
  assert.deepEqual(choose(pairs, "ko", "de", "quality").ids, ["H/opus-mt_tiny_kor-eng", "H/opus-mt-tc-big-en-de"]);
  assert.throws(() => choose(pairs, "en", "de", "fast"), RangeError);
});

test("the Link header's next page", () => {
  assert.equal(nextPage('<https://hub.example/api/models?cursor=abc>; rel="next"', "https://hub.example/api/models"), "https://hub.example/api/models?cursor=abc");
  assert.equal(nextPage('</api/models?cursor=2>; rel="next"', "http://127.0.0.1:9/api/models?x=1"), "http://127.0.0.1:9/api/models?cursor=2");
  assert.equal(nextPage(null, "http://x/"), null);
  assert.equal(nextPage('<http://x/a>; rel="prev"', "http://x/"), null);
});

test("the test hub's search answers as the hub's: the author's models whose names contain the text, page by page", async () => {
  const hub = await startHub();
  try {
    const ids = await searchModels("Helsinki-NLP", "en-de", hub.url);
    // A substring search: tc-bible's en-deu_nld matches too (direct() leaves it out).
    assert.deepEqual(ids.sort(), ["Helsinki-NLP/opus-mt-en-de", "Helsinki-NLP/opus-mt-tc-bible-big-en-deu_nld", "Helsinki-NLP/opus-mt-tc-big-en-de"]);
    assert.deepEqual(await searchModels("Helsinki-NLP", "eng-deu", hub.url), ["Helsinki-NLP/opus-mt_tiny_eng-deu"]);
    assert.deepEqual(await searchModels("Helsinki-NLP", "xx-yy", hub.url), []);
    assert.deepEqual(await searchModels("Helsinki-NLP", "tc-bible-big", hub.url), ["Helsinki-NLP/opus-mt-tc-bible-big-en-deu_nld"]);
    // Two at a time: the Link header carries the rest.
    const response = await fetch(`${hub.url}/api/models?author=Helsinki-NLP&search=opus-mt&limit=2`);
    const first = await response.json();
    assert.equal(first.length, 2);
    const next = nextPage(response.headers.get("link"), response.url);
    assert.ok(next?.includes("cursor=2"), String(next));
    // A hub without the search (404): null, and the route probes names instead.
    assert.equal(await searchModels("Helsinki-NLP", "en-de", `${hub.url}/~noapi`), null);
  } finally {
    await hub.close();
  }
});

test("the pairs a hub's names give, and the targets a source reaches directly or through English", () => {
  const ids = ["Helsinki-NLP/opus-mt-en-de", "Helsinki-NLP/opus-mt-fr-en", "Helsinki-NLP/opus-mt_tiny_eng-deu", "Helsinki-NLP/opus-mt-tc-bible-big-en-deu_nld", "Helsinki-NLP/opus-mt-en-ROMANCE", "Helsinki-NLP/opus-mt-de-en"];
  const pairs = pairsOf(ids);
  assert.deepEqual([...pairs.keys()].sort(), ["de", "en", "fr"]);
  // eng-deu and deu_nld come out as two-letter codes, once each.
  assert.deepEqual([...pairs.get("en")].sort(), ["de", "nl"]);
  assert.deepEqual(reachable(pairs, "fr"), [{ target: "en", via: "direct" }, { target: "de", via: "en" }, { target: "nl", via: "en" }]);
  assert.deepEqual(reachable(pairs, "de"), [{ target: "en", via: "direct" }, { target: "nl", via: "en" }]);
  assert.deepEqual(reachable(pairs, "en"), [{ target: "de", via: "direct" }, { target: "nl", via: "direct" }]);
  assert.deepEqual(reachable(pairs, "xx"), []);
});
