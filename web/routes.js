// @ts-check
// Which Helsinki-NLP model translates a pair, chosen on purpose (pure: the hub is asked
// elsewhere, translator.js). OPUS-MT names its models by family:
//   opus-mt-{s}-{t}               the 2020 models (transformer base)
//   opus-mt-tc-base-{s}-{t}       Tatoeba-Challenge, base
//   opus-mt-tc-big-{s}-{t}        Tatoeba-Challenge, transformer-big: OPUS-MT's strongest
//   opus-mt_tiny_{s3}-{t3}        the 6/2 students Firefox Translations' shape, three-letter codes
//   opus-mt-tc-bible-big-{S}-{T}  many languages a side (S, T: codes joined by "_", or an
//                                 ISO 639-5 family), the target chosen by a >>xxx<< token
// with two-letter codes where a language has one, three-letter ones (ISO 639-3) otherwise
// (and always for the students). A pair with no direct model goes through English.
import { THREE } from "./iso639.js";

/** @typedef {"tiny" | "base" | "tc-base" | "tc-big" | "tc-bible"} Family */

/**
 * Each family's shape, and the parameters it gives (int8: about a byte each, so the bytes
 * a visitor downloads). `quality` orders them: OPUS-MT's own scores put tc-big first and
 * the students last.
 * @type {Record<Family, { params: number, quality: number, shape: string }>}
 */
export const FAMILIES = {
  // d_model 256, FFN 1536, 6 encoder and 2 decoder layers, ~32k vocabulary.
  tiny: { params: 17e6, quality: 1, shape: "6/2 student, d_model 256" },
  // d_model 512, FFN 2048, 6 and 6 layers, ~58k vocabulary (tied).
  base: { params: 74e6, quality: 3, shape: "transformer base (2020)" },
  "tc-base": { params: 74e6, quality: 4, shape: "transformer base (Tatoeba-Challenge)" },
  // d_model 1024, FFN 4096, 16 heads, 6 and 6 layers, ~57k vocabulary.
  "tc-big": { params: 234e6, quality: 5, shape: "transformer-big (Tatoeba-Challenge)" },
  // tc-big's shape with a larger vocabulary, shared by many languages: below a model of
  // the pair's own of any size but the student's.
  "tc-bible": { params: 250e6, quality: 1.5, shape: "transformer-big of many languages (Tatoeba-Challenge)" },
};

/** How a pair's model is chosen: fewest bytes to download (default), or the best first. */
/** @typedef {"small" | "quality"} Prefer */

/**
 * The ISO 639-3 code of a primary language subtag (`de` → `deu`; `deu` stays).
 * @param {string} code
 * @returns {string | null}
 */
export const threeLetter = (code) => (code.length === 2 ? /** @type {Record<string, string>} */ (THREE)[code] ?? null : code);

/** ISO 639-3 → ISO 639-1, the table the other way, built once. */
/** @type {Map<string, string>} */
const TWO = new Map(Object.entries(THREE).map(([two, three]) => [three, two]));

/**
 * The ISO 639-1 code of a three-letter one where it has one (`deu` → `de`), else the code.
 * @param {string} code
 */
export const twoLetter = (code) => (code.length === 3 ? TWO.get(code) ?? code : code);

/**
 * `{ family, source, target }` of a Helsinki-NLP model's name, codes as written (tc-bible:
 * `sources` and `targets` too, its groups split), or null for a name of another shape (the
 * 2020 models of many languages, such as `opus-mt-en-ROMANCE`, name no codes).
 * @param {string} id "Helsinki-NLP/NAME" or NAME
 * @returns {{ family: Family, source: string, target: string, sources?: string[], targets?: string[] } | null}
 */
export function parseName(id) {
  const name = id.includes("/") ? id.slice(id.indexOf("/") + 1) : id;
  const bible = name.match(/^opus-mt-tc-bible-big-([a-z]{2,3}(?:_[a-z]{2,3})*)-([a-z]{2,3}(?:_[a-z]{2,3})*)$/);
  if (bible) return { family: "tc-bible", source: bible[1], target: bible[2], sources: bible[1].split("_"), targets: bible[2].split("_") };
  const code = "([a-z]{2,3})";
  const forms = /** @type {[RegExp, Family][]} */ ([
    [new RegExp(`^opus-mt_tiny_${code}-${code}$`), "tiny"],
    [new RegExp(`^opus-mt-tc-base-${code}-${code}$`), "tc-base"],
    [new RegExp(`^opus-mt-tc-big-${code}-${code}$`), "tc-big"],
    [new RegExp(`^opus-mt-${code}-${code}$`), "base"],
  ]);
  for (const [re, family] of forms) {
    const m = name.match(re);
    if (m) return { family, source: m[1], target: m[2] };
  }
  return null;
}

/** Whether two codes (two- or three-letter) name one language. */
/** @param {string} a @param {string} b */
export const same = (a, b) => a === b || threeLetter(a) === threeLetter(b);

/**
 * The searches (substrings of model names) that find every model of a pair in one family
 * or another: `{s}-{t}` (the 2020 and tc models with two-letter codes) and `{s3}-{t3}`
 * (the students, and tc models of languages without a two-letter code).
 * @param {string} source @param {string} target
 * @returns {string[]}
 */
export function searches(source, target) {
  const out = [`${source}-${target}`];
  const s3 = threeLetter(source);
  const t3 = threeLetter(target);
  if (s3 && t3 && `${s3}-${t3}` !== out[0]) out.push(`${s3}-${t3}`);
  // The tc-bible models, all of them (one search for every pair: the answer is kept).
  out.push("tc-bible-big");
  return out;
}

/**
 * The models among `ids` that translate `source` → `target` directly, by family; a
 * tc-bible model whose groups name both languages (an ISO 639-5 family such as `gem` is not
 * looked into) with the target's token where it has several targets.
 * @param {Iterable<string>} ids model ids ("Helsinki-NLP/NAME")
 * @param {string} source @param {string} target
 * @returns {{ id: string, family: Family, token?: string }[]}
 */
export function direct(ids, source, target) {
  const out = [];
  const seen = new Set();
  for (const id of ids) {
    const p = parseName(id);
    if (!p || seen.has(id)) continue;
    seen.add(id);
    if (p.family === "tc-bible") {
      const sources = p.sources ?? [];
      const targets = p.targets ?? [];
      if (!sources.some((c) => same(c, source)) || !targets.some((c) => same(c, target))) continue;
      const token = targets.length > 1 ? `>>${targets.find((c) => same(c, target))}<<` : undefined;
      out.push({ id, family: p.family, ...(token ? { token } : {}) });
    } else if (same(p.source, source) && same(p.target, target)) {
      out.push({ id, family: p.family });
    }
  }
  return out;
}

/**
 * @typedef {object} Choice
 * @property {string[]} ids the models in order: one, or two through English
 * @property {(string | undefined)[]} tokens each model's target token (tc-bible), or undefined
 * @property {Family[]} families
 * @property {number} params their parameters together (≈ int8 bytes)
 * @property {string} why
 */

/**
 * The route for a pair: among the direct models (`pairs(s, t)`) and, where the preference
 * allows, two through English, the one `prefer` asks for. "small": fewest parameters (so
 * fewest bytes), the better family on a tie; "quality": the best family, direct before
 * through English. `pairs(a, b)` gives the models of a pair (`direct` over a hub's search).
 * @param {(a: string, b: string) => { id: string, family: Family }[]} pairs
 * @param {string} source @param {string} target
 * @param {Prefer} [prefer]
 * @returns {Choice | null}
 */
export function choose(pairs, source, target, prefer = "small") {
  if (prefer !== "small" && prefer !== "quality") throw new RangeError(`prefer must be "small" or "quality", not ${JSON.stringify(prefer)}`);
  /** @param {Family} family */
  const size = (family) => FAMILIES[family].params;
  /** @param {Family} family */
  const rank = (family) => FAMILIES[family].quality;
  /** @typedef {{ id: string, family: Family, token?: string }} Model */
  /** @type {(a: Model, b: Model) => number} */
  const better = prefer === "small"
    ? (a, b) => size(a.family) - size(b.family) || rank(b.family) - rank(a.family)
    : (a, b) => rank(b.family) - rank(a.family) || size(a.family) - size(b.family);
  /** @param {{ id: string, family: Family, token?: string }[]} models */
  const best = (models) => [...models].sort(better)[0] ?? null;
  const one = best(pairs(source, target));
  const viaEnglish = () => {
    if (same(source, "en") || same(target, "en")) return null;
    const a = best(pairs(source, "en"));
    const b = a && best(pairs("en", target));
    return a && b ? [a, b] : null;
  };
  /** @param {{ id: string, family: Family, token?: string }} m */
  const label = (m) => `${m.id.split("/").pop()}${m.token ? ` with ${m.token}` : ""} (${FAMILIES[m.family].shape})`;
  if (one && prefer === "quality") {
    return { ids: [one.id], tokens: [one.token], families: [one.family], params: size(one.family), why: `the best of the pair's models: ${label(one)}` };
  }
  const two = one && prefer === "quality" ? null : viaEnglish();
  const twoParams = two ? size(two[0].family) + size(two[1].family) : Infinity;
  if (one && size(one.family) <= twoParams) {
    return { ids: [one.id], tokens: [one.token], families: [one.family], params: size(one.family), why: `the smallest of the pair's models: ${label(one)}` };
  }
  if (two) {
    const why = one
      ? `through English, smaller than ${label(one)}: ${two.map(label).join(" then ")}`
      : `no direct model; through English: ${two.map(label).join(" then ")}`;
    return { ids: two.map((m) => m.id), tokens: two.map((m) => m.token), families: two.map((m) => m.family), params: twoParams, why };
  }
  return null;
}

/**
 * Every direct pair among `ids` (model names parsed; a tc-bible model gives each of its
 * sources with each of its targets), codes written as two letters where a language has
 * them: a Map from source to its targets.
 * @param {Iterable<string>} ids
 * @returns {Map<string, Set<string>>}
 */
export function pairsOf(ids) {
  /** @type {Map<string, Set<string>>} */
  const pairs = new Map();
  /** @param {string} s @param {string} t */
  const add = (s, t) => {
    const [a, b] = [twoLetter(s), twoLetter(t)];
    if (a === b) return;
    if (!pairs.has(a)) pairs.set(a, new Set());
    pairs.get(a)?.add(b);
  };
  for (const id of ids) {
    const p = parseName(id);
    if (!p) continue;
    if (p.family === "tc-bible") for (const s of p.sources ?? []) for (const t of p.targets ?? []) add(s, t);
    else add(p.source, p.target);
  }
  return pairs;
}

/**
 * The targets `source` reaches (from pairsOf): directly, or through English where it
 * translates into English and English into the target. Sorted by code; direct first.
 * @param {Map<string, Set<string>>} pairs
 * @param {string} source
 * @returns {{ target: string, via: "direct" | "en" }[]}
 */
export function reachable(pairs, source) {
  const s = twoLetter(source);
  const direct = [...(pairs.get(s) ?? [])].sort();
  const pivot = s !== "en" && pairs.get(s)?.has("en") ? [...(pairs.get("en") ?? [])].filter((t) => t !== s && !direct.includes(t)).sort() : [];
  return [...direct.map((target) => ({ target, via: /** @type {const} */ ("direct") })), ...pivot.map((target) => ({ target, via: /** @type {const} */ ("en") }))];
}
