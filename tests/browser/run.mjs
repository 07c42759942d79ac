// Browser end-to-end tests: the built page (dist/) and the npm package example, in Debian's
// Chromium driven by playwright-core. Expected outputs come from the native CLI, so the
// browser is checked against an independent build of the decoder.
//
//   node tests/browser/run.mjs --bin path/to/transduce [--dist dist] [--artifacts DIR]
//   node tests/browser/run.mjs --bin path/to/transduce --url http://127.0.0.1:8080
//   node tests/browser/run.mjs --bin path/to/transduce --only webgpu,parse
//
// With --url the tests run against a page someone already serves (scripts/demo.sh); the
// two that need files only the test server has (a corrupt bundle, the embed example) are
// skipped and say so. --only runs the named features alone (the `name` of each module in
// features/: cpu, parse, bundles, api, webgpu, auto, embed, translator, adapt, imported, hub, site); the
// environment variable ONLY, a regular expression, picks tests by name; BROWSER_TIMEOUT
// (milliseconds, default 480,000) is each wait's limit, shorter while debugging one test.
//
// Prints "ok - NAME" / "not ok - NAME" per test and a final "browser: N passed, N failed".
//
// This file is the order of the run: each session below is one Chromium (flags, a fresh
// profile) with, where its steps need one, a page they share; the steps are the features'
// tests, in the order they run. Where steps share a page, each starts where the last left
// it, so the order matters. The harness (harness.mjs) serves the files and counts;
// references.mjs holds the native CLI's outputs.
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { arg, artifacts, browser, openPage, repo, startServer, stopServer, summary, waitReady } from "./harness.mjs";
import * as references from "./references.mjs";
import * as cpu from "./features/cpu.mjs";
import * as parse from "./features/parse.mjs";
import * as bundles from "./features/bundles.mjs";
import * as api from "./features/api.mjs";
import * as webgpu from "./features/webgpu.mjs";
import * as auto from "./features/auto.mjs";
import * as embed from "./features/embed.mjs";
import * as translator from "./features/translator.mjs";
import * as adapt from "./features/adapt.mjs";
import * as imported from "./features/imported.mjs";
import * as hub from "./features/hub.mjs";
import * as site from "./features/site.mjs";

const features = [cpu, parse, bundles, api, webgpu, auto, embed, translator, adapt, imported, hub, site];

// Chromium has its own Translator (with Google's on-device models); switched off, the page
// is what Firefox and Safari users get: install() defines the polyfill.
const NO_TRANSLATOR = ["--disable-blink-features=TranslationAPI"];

/**
 * The sessions, in order. `page`: the query of the page the steps share (opened before the
 * first); `backend`: where that page's model loads, which --only waits for when it leaves
 * out the session's first step (the one that waits in a full run).
 */
const sessions = [
  // Forced CPU.
  { page: "backend=cpu", backend: "cpu", steps: [cpu.translate, parse.onCpu, bundles.pageErrors, cpu.stress] },
  // The JavaScript API given bad input.
  { page: "backend=cpu", steps: [api.badInput, imported.onCpu] },
  // Forced WebGPU (SwiftShader), and auto where the only adapter is SwiftShader.
  {
    flags: ["--enable-unsafe-webgpu"],
    page: "backend=webgpu",
    backend: "webgpu",
    steps: [webgpu.translate, parse.onWebgpu, imported.onWebgpu, webgpu.deviceLost, auto.onSwiftShader, site.onWebgpu],
  },
  // Without WebGPU.
  { page: "backend=auto", backend: "cpu", steps: [auto.withoutWebgpu, webgpu.forcedWithoutWebgpu] },
  // The npm package, embedded by a third-party page; a site's page translated in place.
  { steps: [embed.example, site.onCpu] },
  // The Translator API polyfill: one fresh browser each, the last with Chromium's own.
  { flags: NO_TRANSLATOR, steps: [translator.example] },
  { flags: NO_TRANSLATOR, steps: [translator.readme] },
  { flags: NO_TRANSLATOR, steps: [translator.spec] },
  { steps: [translator.channelAndNative] },
  // Adaptation: the visitor's pairs, learned in the worker.
  { page: "backend=cpu&model=de-en", backend: "cpu", steps: [adapt.panel] },
  // OPUS-MT models by name from the test hub: the page, WebGPU, the Translator API for any
  // pair, every bad input.
  { steps: [hub.onCpu] },
  { flags: ["--enable-unsafe-webgpu"], steps: [hub.onWebgpu] },
  { flags: NO_TRANSLATOR, steps: [hub.translatorApi] },
  { steps: [hub.badInput] },
];

if (!arg("bin")) throw new Error("--bin (the native transduce binary) is required");
const only = arg("only")?.split(",").filter(Boolean);
const unknown = (only ?? []).filter((name) => !features.some((f) => f.name === name));
if (unknown.length) {
  console.error(`--only: no feature ${unknown.join(", ")}; the features: ${features.map((f) => f.name).join(", ")}`);
  process.exit(2);
}
const selected = (feature) => !only || only.includes(feature);

// The native references first (each is also computed on first use, so --only computes only
// what its features need).
if (!only) {
  await references.expected();
  await references.expectedF32();
  await references.adaptation();
}

await mkdir(artifacts, { recursive: true });

// The files the features' tests serve beside dist/ (the README's snippets as pages, a
// corrupt bundle), in a scratch directory.
const scratch = await mkdtemp(join(tmpdir(), "transduce-browser-"));
const mounts = { "/repo/": repo };
for (const feature of features) {
  if (feature.mount && selected(feature.name)) Object.assign(mounts, await feature.mount(scratch));
}
await startServer(mounts);

for (const session of sessions) {
  const steps = session.steps.filter((s) => selected(s.feature));
  if (!steps.length) continue;
  const b = await browser(session.flags);
  const page = session.page && steps.some((s) => !s.ownPage) ? await openPage(b.context, session.page) : undefined;
  if (page && session.backend && steps[0] !== session.steps[0]) await waitReady(page, session.backend);
  for (const s of steps) await s.run({ b, page });
  await b.close();
}

stopServer();
for (const feature of features) await feature.unmount?.();
await rm(scratch, { recursive: true, force: true });
process.exit(summary() ? 1 : 0);
