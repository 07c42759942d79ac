// The independent reference: what the native CLI (--bin, the debug `transduce`) gives for
// the inputs the browser tests give the page, so the browser is checked against another
// build of the decoder. Each is computed once, on first use; run.mjs asks for all of them
// before the first test unless --only picks features.
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { existsSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { gunzipSync } from "node:zlib";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { arg, repo } from "./harness.mjs";

/** The translator the page loads by default, and most tests use. */
export const MODEL = "en-de";

const once = (compute) => {
  let promise;
  return () => (promise ??= compute());
};
/** The native outputs (`translate` with the bundle's arithmetic) for the CPU tests. */
export const expected = once(() => expectations(arg("bin")));
// The GPU decoder multiplies in f32 (an int8 bundle's weights as q·scale), and so does the
// CPU of an engine that carries it: the WebGPU tests expect native's `--compute f32`.
export const expectedF32 = once(() => expectations(arg("bin"), "f32"));
/** Native `transduce adapt`'s losses and translations, for the adaptation tests. */
export const adaptation = once(() => adaptExpectations(arg("bin")));

/** The native CLI's outputs for the inputs the browser gets: the independent reference. */
async function expectations(bin, compute) {
  if (!bin) throw new Error("--bin (the native transduce binary) is required");
  const data = join(repo, "..", "shared", "data", "multi30k", "test2016.en.gz");
  let lines;
  try {
    lines = gunzipSync(await readFile(data)).toString("utf8").split("\n");
  } catch {
    if (!compute) console.log(`SKIP: ${data} not found; using the committed fixture sentences`);
    lines = (await readFile(join(repo, "tests", "fixtures", "browser-sentences.en"), "utf8")).split("\n");
  }
  const run = (args, input) => {
    const arithmetic = compute ? ["--compute", compute] : [];
    const r = spawnSync(bin, [...args, ...arithmetic, "--quiet"], { input, encoding: "utf8" });
    if (r.status !== 0) throw new Error(`${bin} ${args.join(" ")} failed: ${r.stderr}`);
    return r.stdout;
  };
  const model = MODEL;
  const sentence = lines[0].trim();
  const greedy = (text) =>
    run(["translate", "--model", join(repo, "web", "models", model), "--beam", "1"], `${text}\n`).trim();
  const out = {
    model,
    sentence,
    nativeGreedy: greedy,
    greedy: greedy(sentence),
    longText: lines.slice(1, 9).map((l) => l.trim()).join(" "),
  };
  // The same eight sentences, each translated alone by the CLI: what the page's batched
  // decoding of them as one text must reproduce.
  const eight = lines.slice(1, 9).map((l) => l.trim()).join("\n") + "\n";
  for (const beam of [1, 4]) {
    out[`longText${beam}`] = run(["translate", "--model", join(repo, "web", "models", model), "--beam", String(beam),
      "--batch-size", "1"], eight).trim().split("\n").join(" ");
  }
  // The Translator API translates with the bundle's own decoding defaults.
  // The Translator API's examples (README, examples/translator) use the freely licensed
  // en-de-free bundle, with its own defaults.
  out.nativeFree = (text) =>
    run(["translate", "--model", join(repo, "web", "models", "en-de-free")], `${text}\n`).trim();
  out.eight = lines.slice(1, 9).map((l) => l.trim());
  out.eightBeam4 = run(["translate", "--model", join(repo, "web", "models", model), "--batch-size", "1"], eight)
    .trim()
    .split("\n");
  // The listed translator the other way, for the ⇄ button.
  const index = JSON.parse(await readFile(join(repo, "web", "models", "index.json"), "utf8"));
  const entry = index.find((m) => m.id === model);
  const reverse = index.find((m) => m.task === "translate" && m.source === entry?.target && m.target === entry?.source);
  // Every other listed translator: its first eight Multi30k test2016 sentences (or the
  // committed fixture), each translated alone by the CLI, greedy and beam 4.
  out.others = [];
  for (const m of index.filter((m) => m.task === "translate" && m.id !== model)) {
    const file = join(repo, "..", "shared", "data", "multi30k", `test2016.${m.source}.gz`);
    let text;
    try {
      text = gunzipSync(await readFile(file)).toString("utf8");
    } catch {
      if (!compute) console.log(`SKIP: ${file} not found; ${m.id} is tested on tests/fixtures/browser-sentences.${m.source}`);
      text = await readFile(join(repo, "tests", "fixtures", `browser-sentences.${m.source}`), "utf8");
    }
    const eight = text.split("\n").slice(1, 9).map((l) => l.trim());
    const other = { id: m.id, text: eight.join(" ") };
    for (const beam of [1, 4]) {
      other[`beam${beam}`] = run(["translate", "--model", join(repo, "web", "models", m.id), "--beam", String(beam),
        "--batch-size", "1"], eight.join("\n") + "\n").trim().split("\n").join(" ");
    }
    out.others.push(other);
  }
  if (reverse) {
    out.reverse = {
      id: reverse.id,
      source: reverse.source,
      translate: (text, beam) =>
        run(["translate", "--model", join(repo, "web", "models", reverse.id), "--beam", String(beam)], `${text}\n`).trim(),
    };
  }
  // Noisy-channel reranking: the bundle's recorded reverse model, its defaults (beam,
  // α, weight). Test sentences where the check changes native's output (up to 3) and
  // where it does not (2), each on its own line.
  const config = JSON.parse(await readFile(join(repo, "web", "models", model, "config.json"), "utf8"));
  if (config.channel && index.some((m) => m.id === config.channel.model)) {
    const pool = lines.slice(1, 61).map((l) => l.trim()).filter(Boolean);
    const input = pool.join("\n") + "\n";
    const bundle = join(repo, "web", "models", model);
    const plain = run(["translate", "--model", bundle], input).trimEnd().split("\n");
    const checked = run(["translate", "--model", bundle, "--channel", join(repo, "web", "models", config.channel.model)], input)
      .trimEnd()
      .split("\n");
    const changed = pool.map((_, i) => i).filter((i) => plain[i] !== checked[i]).slice(0, 3);
    const same = pool.map((_, i) => i).filter((i) => plain[i] === checked[i]).slice(0, 2);
    const pick = [...changed, ...same].sort((a, b) => a - b);
    out.channel = {
      id: config.channel.model,
      changed: changed.length,
      text: pick.map((i) => pool[i]).join("\n"),
      want: pick.map((i) => checked[i]).join("\n"),
      plain: pick.map((i) => plain[i]).join("\n"),
    };
  }
  // The Translator polyfill's `channel: true` with the free pair: sentences written for
  // this test, the first two of which the check changes (native, beam 4).
  const free = (args, text) => run(["translate", "--model", join(repo, "web", "models", "en-de-free"), ...args], text)
    .trimEnd()
    .split("\n");
  const freeSentences = [
    "We should leave before it starts raining.",
    "I have never been to Japan, but I would like to go.",
    "Two dogs are running through the snow.",
  ];
  out.channelFree = {
    sentences: freeSentences,
    plain: free([], freeSentences.join("\n") + "\n"),
    checked: free(["--channel", join(repo, "web", "models", "de-en-free")], freeSentences.join("\n") + "\n"),
  };
  const parser = join(repo, "web", "models", "ptb-parser");
  if (existsSync(join(parser, "config.json"))) {
    out.parseSentence = "The dog saw a man in the park .";
    const tree = run(["parse", "--model", parser, "--raw"], `${out.parseSentence}\n`).trim();
    // Native prints the treebank's outer bracket, `( (S ...) )`; the page does not.
    out.parseBracketed = tree.replace(/^\( /, "").replace(/ \)$/, "");
    out.parseNodes = out.parseBracketed.split("(").length - 1;
  }
  return out;
}

/**
 * Adaptation's references, from the native CLI: the shipped de-en's translations of the unseen
 * Wien sentences (tests/fixtures/adapt), and `transduce adapt --weights f32 --steps 10` on the
 * fixture pairs: its loss at every step and its translations of the fixture sentences.
 */
async function adaptExpectations(bin) {
  const fixtures = join(repo, "tests", "fixtures", "adapt");
  const model = join(repo, "web", "models", "de-en");
  const pairs = await readFile(join(fixtures, "wien.pairs.tsv"), "utf8");
  const unseen = (await readFile(join(fixtures, "wien.test.tsv"), "utf8")).trim().split("\n").map((l) => l.split("\t")[0]);
  const general = (await readFile(join(repo, "tests", "fixtures", "browser-sentences.de"), "utf8")).trim().split("\n");
  const dir = await mkdtemp(join(tmpdir(), "transduce-adapt-"));
  // 10 steps (of the recipe's 30) are enough to compare the two builds, and save 11 s.
  const adapted = spawnSync(bin, ["adapt", "--model", model, "--pairs", join(fixtures, "wien.pairs.tsv"), "--out", dir, "--weights", "f32", "--steps", "10"], {
    encoding: "utf8",
  });
  if (adapted.status !== 0) throw new Error(`transduce adapt failed: ${adapted.stderr}`);
  const losses = [...adapted.stderr.matchAll(/^step \d+\/\d+ +loss ([0-9.]+)/gm)].map((m) => Number(m[1]));
  const translate = (bundle, lines) => {
    const r = spawnSync(bin, ["translate", "--model", bundle, "--quiet"], { input: lines.join("\n") + "\n", encoding: "utf8" });
    if (r.status !== 0) throw new Error(`transduce translate failed: ${r.stderr}`);
    return r.stdout.trimEnd().split("\n");
  };
  const out = { pairs, unseen, shipped: translate(model, unseen), losses, sentences: [...general, ...unseen] };
  out.f32 = translate(dir, out.sentences);
  await rm(dir, { recursive: true, force: true });
  return out;
}
