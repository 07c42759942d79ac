// @ts-check
// The demo page: plain JavaScript over the same API an embedding site uses.
import { Transduce } from "./transduce.js";
import { Translator, configure as configureTranslators } from "./translator.js";
import { DEFAULT_HUB, searchModels } from "./hub.js";
import { pairsOf, reachable } from "./routes.js";

/**
 * The page's element with this id. The page asks only for ids index.html has, mostly form
 * controls: typed as one, so that reading `.value` or setting `.disabled` is checked.
 * @typedef {HTMLElement & { value: string, checked: boolean, disabled: boolean }} Control
 * @type {(id: string) => Control}
 */
const $ = (id) => /** @type {Control} */ (document.getElementById(id));

/**
 * A model the page lists: models/index.json's entries (as read), the ?model= and ?parser=
 * bundles, and the models opened by name or by language pair.
 * @typedef {object} Entry
 * @property {string} id
 * @property {string} title
 * @property {"translate" | "parse"} task
 * @property {string} [url] where the bundle is (else models/ID/), or an `hf:` name
 * @property {string} [licence]
 * @property {string} [source] the languages, from index.json or the loaded config
 * @property {string} [target]
 * @property {[string, string]} [pair] a pair through the Translator polyfill
 * @property {{ model?: string } | null} [channel] config.json's `channel`, once read (null: none)
 */
/**
 * A pair through the Translator polyfill (pairEngine), with the surface the page uses of a
 * Transduce; what only a Transduce has reads as undefined.
 * @typedef {object} PairEngine
 * @property {Translator} translator
 * @property {"translate"} task
 * @property {"cpu"} backend
 * @property {string} device
 * @property {any} config the last model's config.json, its task the pair's
 * @property {{ card: string, reference: string, warning: undefined, cached?: undefined, offline?: undefined }} hub
 * @property {boolean} pivot two models through English
 * @property {string | undefined} choice
 * @property {(text: string, options?: { onPartial?: (p: { text: string, index: number, count: number }) => void }) => Promise<{ text: string, sentences: import("./transduce.js").SentenceTranslation[], ms: number, channel?: undefined }>} translate
 * @property {null} adaptation
 * @property {Translator["adapt"]} adapt
 * @property {() => Promise<void>} reset
 * @property {() => void} free
 * @property {undefined} [why]
 * @property {undefined} [fallbackReason]
 * @property {undefined} [threads]
 */
/**
 * A loaded model: a Transduce, or a pair through the Translator polyfill.
 * @typedef {(Transduce & { pivot?: undefined }) | PairEngine} Engine
 */
/**
 * A loaded model in its slot, with the backend and the reverse model (its id) it was loaded with.
 * @typedef {{ id: string, backend: import("./transduce.js").Backend, channel: string | null, engine: Engine }} Slot
 */
/**
 * What a load throws: a TransduceError (with `code` and `file` where known), or the
 * Translator polyfill's error.
 * @typedef {Error & { code?: import("./transduce.js").ErrorCode | null, file?: string | null }} LoadError
 */

const params = new URLSearchParams(location.search);
const SVG = "http://www.w3.org/2000/svg";

// What people type first: everyday sentences, then the caption style of Multi30k. Written
// for this page, not taken from any training or test set.
/** @type {{ en: string[], de: string[], [language: string]: string[] | undefined }} */
const EXAMPLES = {
  en: [
    "Where is the train station?",
    "I'm sorry, I don't understand.",
    "Could you help me with my bags?",
    "We should go home before it starts to rain.",
    "My sister lives in Berlin and works at a hospital.",
    "A man in an orange hat is looking at something.",
    "Two children are playing soccer on the beach.",
  ],
  de: [
    "Wo ist der Bahnhof?",
    "Entschuldigung, das verstehe ich nicht.",
    "Kannst du mir mit meinen Taschen helfen?",
    "Wir sollten nach Hause gehen, bevor es anfängt zu regnen.",
    "Meine Schwester wohnt in Berlin und arbeitet in einem Krankenhaus.",
    "Ein Mann mit einem orangefarbenen Hut schaut sich etwas an.",
    "Zwei Kinder spielen am Strand Fußball.",
  ],
};
const allExamples = new Set(Object.values(EXAMPLES).flat());

// Where `hf:` names come from (?hub=URL; by default the Hugging Face hub).
const HUB = params.get("hub") ?? undefined;

const state = {
  /** @type {Entry[]} */
  models: [],
  /** @type {import("./transduce.js").Backend} */
  backend: /** @type {any} */ (params.get("backend") ?? "auto"),
  // Rerank with the reverse translator the bundle names (`channel.model` in its config.json).
  channel: params.get("channel") === "1",
  /** @type {Slot | null} */
  translator: null, // { id, backend, channel, engine }
  loading: false, // a translator is loading
  /** @type {Slot | null} */
  parser: null,
  /** @type {import("./transduce.js").SentenceTranslation[]} */
  lastSentences: [],
  /** @type {AbortController | null} */
  adapting: null, // the AbortController of an adaptation under way
};
/** @type {any} */ (window).transduceDemo = state; // for tests and the console

/** @param {string} message */
function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

/** @param {string} text */
function status(text) {
  $("status").textContent = text;
}

/** @param {Entry} entry */
function modelUrl(entry) {
  return entry.url ?? `models/${entry.id}/`;
}

async function loadIndex() {
  /** @type {Entry[]} */
  let models = [];
  try {
    const response = await fetch("models/index.json", { cache: "no-cache" });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    models = await response.json();
  } catch (e) {
    showError(`Cannot read the model list models/index.json: ${/** @type {Error} */ (e).message}`);
  }
  // ?model=URL and ?parser=URL add bundles from elsewhere.
  for (const [key, task] of /** @type {const} */ ([["model", "translate"], ["parser", "parse"]])) {
    const value = params.get(key);
    if (value && !models.some((m) => m.id === value)) {
      models.unshift({ id: value, title: value, task, url: value });
    }
  }
  state.models = models;
  const select = $("model");
  select.replaceChildren(
    ...models.map((m) => new Option(m.licence ? `${m.title} · ${m.licence}` : m.title, m.id)),
  );
  return models;
}

/** @param {Engine | null} engine */
function badge(engine) {
  const el = $("badge");
  if (!engine) {
    el.textContent = "no model";
    el.className = "badge";
    return;
  }
  const gpu = engine.backend === "webgpu";
  const why = engine.why ?? engine.fallbackReason;
  const threads = engine.threads;
  const cores = threads ? (threads.threads > 1 ? `${threads.threads} threads` : threads.reason) : undefined;
  el.textContent = gpu ? `WebGPU · ${engine.device}` : `CPU${why ? ` · ${why}` : ""}${cores ? ` · ${cores}` : ""}`;
  el.title = why ?? engine.device;
  el.className = `badge ${gpu ? "gpu" : "cpu"}`;
  el.dataset.backend = engine.backend;
  el.dataset.device = engine.device;
}

/**
 * The listed translator that checks `entry`'s translations (its config.json's
 * `channel.model`), once known: from a loaded config, or read now when the box is ticked.
 * @param {Entry} entry
 * @returns {Promise<Entry | null>}
 */
async function channelOf(entry) {
  if (entry.task !== "translate") return null;
  if (entry.channel === undefined && state.channel) {
    try {
      const response = await fetch(new URL("config.json", new URL(modelUrl(entry), location.href)), { cache: "no-cache" });
      entry.channel = response.ok ? ((await response.json()).channel ?? null) : null;
    } catch {
      entry.channel = null;
    }
  }
  return state.models.find((m) => m.task === "translate" && m.id === entry.channel?.model) ?? null;
}

/**
 * The box offers the check where the bundle names a listed reverse translator.
 * @param {Entry} entry
 * @param {Entry | null} reverse
 */
function showChannel(entry, reverse) {
  $("channel-box").hidden = !reverse;
  $("channel").checked = state.channel;
  $("channel-name").textContent = reverse ? `${reverse.id} (${reverse.title})` : "";
}

/**
 * The model card of a model loaded by name: its licence and the credit it asks for.
 * @param {Engine} engine
 */
function showCard(engine) {
  const card = engine?.hub?.card;
  $("card").hidden = !card;
  if (!card) return;
  const p = engine.config.provenance;
  $("card-summary").textContent = `${p.imported_from} · licence ${p.licence}${engine.hub.offline ? " · offline, from this browser's cache" : engine.hub.cached ? " · from this browser's cache" : ""}`;
  $("card-text").textContent = card;
}

/**
 * A pair through the Translator polyfill (Helsinki-NLP's OPUS-MT models, or two through
 * English), with the surface the page uses of a Transduce.
 * @param {string} source
 * @param {string} target
 * @param {(fraction: number) => void} onProgress
 * @returns {Promise<PairEngine>}
 */
async function pairEngine(source, target, onProgress) {
  // ?prefer=quality: the best family first (tc-big); by default the fewest bytes.
  const prefer = params.get("prefer") === "quality" ? "quality" : "small";
  configureTranslators({ hub: HUB, opusMt: true, backend: state.backend, prefer });
  const availability = await Translator.availability({ sourceLanguage: source, targetLanguage: target });
  if (availability === "unavailable") {
    throw new Error(`the hub has no OPUS-MT model for ${source} → ${target}, direct or through English`);
  }
  const translator = await Translator.create({
    sourceLanguage: source,
    targetLanguage: target,
    monitor: (m) => m.addEventListener("downloadprogress", (e) => onProgress(e.loaded)),
  });
  const models = translator.models;
  const last = models[models.length - 1];
  return {
    translator,
    task: "translate",
    backend: "cpu",
    device: models.length > 1 ? `two models through English: ${models.map((m) => m.reference).join(" → ")}` : /** @type {string} a model by name */ (models[0].reference),
    config: { ...last.config, task: { kind: "translate", source, target } },
    hub: { card: models.map((m) => m.card).join("\n\n---\n\n"), reference: models.map((m) => m.reference).join(" → "), warning: undefined },
    pivot: models.length > 1,
    // Which of the hub's models, and why (shown when it is ready).
    choice: translator.model?.why,
    async translate(text, { onPartial = undefined } = {}) {
      const started = performance.now();
      let done = "";
      const stream = translator.translateStreaming(text);
      for await (const chunk of stream) {
        done += chunk;
        onPartial?.({ text: done, index: 0, count: 1 });
      }
      return { text: done, sentences: [], ms: performance.now() - started };
    },
    adaptation: null,
    adapt: (pairs, options) => translator.adapt(pairs, options),
    reset: () => translator.reset(),
    free: () => translator.destroy(),
  };
}

/**
 * @param {Entry} entry
 * @returns {Promise<Engine>}
 */
async function load(entry) {
  const slot = entry.task === "parse" ? "parser" : "translator";
  const checker = state.channel ? await channelOf(entry) : null;
  if (state[slot]?.id === entry.id && state[slot].backend === state.backend && state[slot].channel === (checker?.id ?? null)) {
    return state[slot].engine;
  }
  // The model loaded now stays until the new one has loaded: a load that fails leaves it.
  const previous = state[slot];
  showError("");
  const button = entry.task === "parse" ? $("parse") : $("translate");
  button.disabled = true;
  status(`Loading ${entry.title}…`);
  const started = performance.now();
  if (slot === "translator") state.loading = true;
  const checkerUrl = checker ? modelUrl(checker) : undefined;
  // The reverse model's files report progress too: their URLs start with this.
  const checkerBase = checkerUrl ? new URL(checkerUrl, location.href).href : null;
  try {
    const engine = entry.pair
      ? await pairEngine(entry.pair[0], entry.pair[1], (f) => status(`Loading ${entry.title}: ${Math.round(100 * f)}%`))
      : await Transduce.load(modelUrl(entry), {
      backend: state.backend,
      hub: HUB,
      // ?calibrate=1 measures one sentence and a paragraph; ?calibrate=1&calibrate-sizes=1 one
      // sentence only.
      calibrate: params.get("calibrate") === "1" && (params.get("calibrate-sizes")?.split(",").map(Number) ?? true),
      relaxedSimd: params.get("relaxed") !== "0",
      channel: checkerUrl,
      // ?from=en&to=de: the languages of a model by name whose name and card do not say.
      ...(params.get("from") && params.get("to") ? { languages: { source: /** @type {string} checked above */ (params.get("from")), target: /** @type {string} */ (params.get("to")) } } : {}),
      onProgress: ({ file, url, loaded, total, cached, converting }) => {
        const pct = total ? ` ${Math.round((100 * loaded) / total)}%` : ` ${(loaded / 1e6).toFixed(1)} MB`;
        const reverse = checkerBase && url?.startsWith(checkerBase);
        status(`Loading ${reverse ? /** @type {Entry} `reverse` only with a checker */ (checker).title : entry.title}: ${file}${cached ? " (cached)" : converting ? "…" : pct}`);
      },
    });
    previous?.engine.free();
    state[slot] = { id: entry.id, backend: state.backend, channel: checker?.id ?? null, engine };
    const checked = checker ? `, checked by ${checker.title}` : "";
    const warning = engine.hub?.warning ? ` (${engine.hub.warning.message})` : "";
    const choice = "choice" in engine && engine.choice ? `: ${engine.choice}` : "";
    status(`${entry.title}${checked} ready in ${((performance.now() - started) / 1000).toFixed(1)} s${warning}${choice}`);
    badge(engine);
    showCard(engine);
    if (engine.task === "translate") {
      adaptedBadge(engine);
      const t = engine.config.task;
      entry.source = t.source;
      entry.target = t.target;
      showExamples(t.source);
      $("swap").hidden = !reverseOf(entry);
      $("source").lang = t.source;
      $("langs").textContent = `${t.source} → ${t.target}`;
      $("target").lang = t.target;
      $("beam").value = engine.config.decoding.beam;
      $("alpha").value = engine.config.decoding.alpha;
      entry.channel = engine.config.channel ?? null;
      const reverse = await channelOf(entry);
      showChannel(entry, reverse);
      state.loading = false;
      // The box changed while this loaded: load again as it now says.
      if ((state.channel ? (reverse?.id ?? null) : null) !== /** @type {Slot} set above; a backend change while channelOf ran clears it, and this throws as before */ (state.translator).channel) return load(entry);
    }
    button.disabled = false;
    return engine;
  } catch (e) {
    if (slot === "translator") state.loading = false;
    status(previous ? `${previous.id} is still loaded` : "");
    const where = /** @type {LoadError} */ (e).code ? ` [${/** @type {LoadError} */ (e).code}${/** @type {LoadError} */ (e).file ? `, ${/** @type {LoadError} */ (e).file}` : ""}]` : "";
    showError(`Could not load ${entry.title}: ${/** @type {LoadError} */ (e).message}${where}`);
    if (previous) {
      // The earlier model stays in use: the list and the badge say so.
      $("model").value = previous.id;
      button.disabled = false;
      badge(previous.engine);
    } else {
      badge(null);
    }
    throw e;
  }
}

/**
 * The "any OPUS-MT model" field: an `hf:` name (or a plain ORG/NAME), or a pair such as
 * "fr-de" or "fr → de" (Helsinki-NLP's model, or two through English).
 * @param {string} text
 */
async function openByName(text) {
  const value = text.trim();
  if (!value) return;
  const pair = value.match(/^([a-z]{2,3}(?:-[A-Za-z]{2,4})?)\s*(?:→|->|>|\s)\s*([a-z]{2,3}(?:-[A-Za-z]{2,4})?)$/) ??
    value.match(/^([a-z]{2,3})-([a-z]{2,3})$/);
  /** @type {Entry} */
  let entry;
  if (pair) {
    const id = `pair:${pair[1]}-${pair[2]}`;
    entry = state.models.find((m) => m.id === id) ?? { id, title: `${pair[1]} → ${pair[2]} (OPUS-MT)`, task: "translate", pair: [pair[1], pair[2]] };
  } else {
    const name = value.startsWith("hf:") ? value : `hf:${value}`;
    entry = state.models.find((m) => m.id === name) ?? { id: name, title: name, task: "translate", url: name };
  }
  if (!state.models.includes(entry)) {
    state.models.unshift(entry);
    $("model").prepend(new Option(entry.title, entry.id));
  }
  $("model").value = entry.id;
  await load(entry);
}

// ---- the language pickers: every pair the hub's OPUS-MT models serve ------------------

/** The hub's Helsinki-NLP pairs (pairsOf), asked once, when the picker is first opened. */
let hubPairs = null;
function listPairs() {
  hubPairs ??= searchModels("Helsinki-NLP", "opus-mt", HUB ?? DEFAULT_HUB)
    .then((ids) => pairsOf(ids ?? []))
    .catch((e) => {
      hubPairs = null;
      throw e;
    });
  return hubPairs;
}

const languageNames = new Intl.DisplayNames(["en"], { type: "language" });
/**
 * "French (fr)", or the code alone where the browser has no name for it.
 * @param {string} code
 */
function languageLabel(code) {
  let name = code;
  try {
    name = languageNames.of(code) ?? code;
  } catch {
    // a code Intl does not know
  }
  return name === code ? code : `${name} (${code})`;
}

/** The source picker's languages, from the hub's listing of Helsinki-NLP's models. */
async function fillSources() {
  const from = /** @type {HTMLSelectElement} */ (document.getElementById("open-from"));
  if (from.options.length > 1 || from.dataset.loading) return;
  from.dataset.loading = "true";
  try {
    const pairs = await listPairs();
    const labelled = [...pairs.keys()].map((code) => ({ code, label: languageLabel(code) }));
    labelled.sort((a, b) => a.label.localeCompare(b.label));
    from.append(...labelled.map(({ code, label }) => new Option(label, code)));
    from.dataset.count = String(labelled.length);
  } catch (e) {
    showError(`cannot list the hub's languages: ${/** @type {Error} */ (e).message}`);
  } finally {
    delete from.dataset.loading;
  }
}

/** The target picker: what the chosen source reaches, directly or through English. */
async function fillTargets() {
  const source = /** @type {HTMLSelectElement} */ (document.getElementById("open-from")).value;
  const to = /** @type {HTMLSelectElement} */ (document.getElementById("open-to"));
  to.replaceChildren(new Option("language…", ""));
  to.disabled = true;
  if (!source) return;
  const list = reachable(await listPairs(), source);
  /** @type {(label: string, via: string) => HTMLOptGroupElement[]} */
  const group = (label, via) => {
    const g = document.createElement("optgroup");
    g.label = label;
    g.append(...list.filter((t) => t.via === via).map((t) => new Option(languageLabel(t.target), t.target)));
    return g.children.length ? [g] : [];
  };
  to.append(...group("direct", "direct"), ...group("through English", "en"));
  to.disabled = !list.length;
  to.dataset.count = String(list.length);
  to.dataset.source = source;
}

/**
 * Example buttons in the model's source language; an untouched example box follows along.
 * @param {string} language
 */
function showExamples(language) {
  const examples = EXAMPLES[language] ?? [];
  $("examples").replaceChildren(
    ...examples.map((text) => {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = text;
      b.addEventListener("click", () => {
        $("source").value = text;
        translate();
      });
      return b;
    }),
  );
  const current = $("source").value.trim();
  if (examples.length && (!current || (allExamples.has(current) && !examples.includes(current)))) {
    $("source").value = examples[0];
  }
}

/**
 * The listed translator for the other direction, if any (languages from index.json or the
 * loaded config), under the same licence when there is one.
 * @param {Entry | undefined} entry
 * @returns {Entry | null}
 */
function reverseOf(entry) {
  if (!entry?.source || !entry?.target) return null;
  const reverse = state.models.filter((m) => m.task === "translate" && m.source === entry.target && m.target === entry.source);
  return reverse.find((m) => m.licence === entry.licence) ?? reverse[0] ?? null;
}

async function swap() {
  const current = state.models.find((m) => m.id === state.translator?.id);
  const reverse = reverseOf(current);
  if (!reverse) return;
  const output = $("target").dataset.done === "true" ? $("target").textContent.trim() : "";
  $("model").value = reverse.id;
  $("target").textContent = "";
  delete $("target").dataset.done;
  if (output) $("source").value = output;
  await load(reverse);
  if (output) await translate();
}

async function translate() {
  const engine = state.translator?.engine;
  if (!engine || $("translate").disabled) return; // loading, or a translation is running
  showError("");
  $("translate").disabled = true;
  $("target").textContent = "";
  delete $("target").dataset.done;
  $("time").textContent = "translating…";
  try {
    // ?to=nld: the target of a model of many targets (its >>nld<< token). With ?from= the
    // two name a model's languages instead (for its conversion), and pick no token.
    const to = params.get("from") ? undefined : params.get("to") ?? undefined;
    const result = await engine.translate($("source").value, {
      beam: Number($("beam").value),
      alpha: Number($("alpha").value),
      ...(to ? { to } : {}),
      onPartial: ({ text, index, count }) => {
        $("target").textContent = text;
        $("time").textContent = `sentence ${index + 1} of ${count}…`;
      },
    });
    $("target").textContent = result.text;
    $("target").dataset.done = "true";
    // The pair to add starts from this translation, for the visitor to correct.
    $("adapt-correct").value = result.text.replace(/\s*\n\s*/g, " ");
    const checked = result.channel ? `, checked by ${/** @type {Slot} the translator that ran; a backend change meanwhile clears it, and this throws as before */ (state.translator).channel}` : engine.pivot ? ", through English" : "";
    $("time").textContent = `${(result.ms / 1000).toFixed(2)} s on ${engine.backend === "webgpu" ? "WebGPU" : "CPU"}${checked}`;
    badge(engine);
    state.lastSentences = result.sentences;
    $("attention-panel").hidden = !result.sentences.length;
    $("att-sentence").replaceChildren(
      ...result.sentences.map((s, i) => new Option(`${i + 1}: ${s.source.slice(0, 40)}`, String(i))),
    );
    await showAttention();
  } catch (e) {
    $("time").textContent = "";
    showError(`Translation failed: ${/** @type {Error} */ (e).message}`);
  } finally {
    $("translate").disabled = false;
  }
}

// ---- adaptation: the visitor's pairs, learned in the worker ------------------------------

/**
 * "adapted · N pairs" beside the backend badge while the translator's weights are adapted.
 * @param {Engine} engine
 */
function adaptedBadge(engine) {
  const adaptation = engine?.adaptation;
  const el = $("adapted");
  el.hidden = !adaptation;
  el.textContent = adaptation ? `adapted · ${adaptation.pairs} pair${adaptation.pairs === 1 ? "" : "s"}` : "";
  el.title = adaptation ? `fine-tuned here on your pairs (${adaptation.steps} steps); Reset restores the shipped model` : "";
  $("adapt-reset").hidden = !adaptation;
  adaptCount();
}

/** The pairs in the box (lines with text), and whether Adapt may start. */
function adaptCount() {
  const lines = $("adapt-pairs").value.split("\n").filter((l) => l.trim());
  const tabs = lines.filter((l) => l.includes("\t")).length;
  $("adapt-count").textContent = lines.length
    ? `${lines.length} pair${lines.length === 1 ? "" : "s"}${tabs < lines.length ? ` (${lines.length - tabs} without a tab)` : ""}`
    : "";
  $("adapt").disabled = !state.translator || state.adapting !== null || lines.length === 0;
}

function addPair() {
  const source = $("source").value.trim().replace(/\s*\n\s*/g, " ");
  const target = $("adapt-correct").value.trim();
  if (!source || !target) {
    showError("Adapt: write a sentence above and its correct translation first");
    return;
  }
  const box = $("adapt-pairs");
  box.value = `${box.value.replace(/\s*$/, "")}${box.value.trim() ? "\n" : ""}${source}\t${target}\n`;
  adaptCount();
}

async function adapt() {
  const engine = state.translator?.engine;
  if (!engine || state.adapting) return;
  showError("");
  const controller = new AbortController();
  state.adapting = controller;
  adaptCount();
  $("adapt-cancel").hidden = false;
  $("adapt-reset").disabled = true;
  const bar = /** @type {HTMLProgressElement} */ (document.getElementById("adapt-progress"));
  bar.hidden = false;
  bar.value = 0;
  $("adapt-status").textContent = "Loading the training module…";
  try {
    const result = await engine.adapt($("adapt-pairs").value, {
      signal: controller.signal,
      onProgress: ({ step, steps, loss, remainingMs }) => {
        bar.value = step / steps;
        const left = Math.ceil(remainingMs / 1000);
        $("adapt-status").textContent = `Step ${step} of ${steps} · loss ${loss.toFixed(3)} · about ${left} s left`;
      },
    });
    const kept = result.stored ? "kept in this browser for this model" : `not stored (${result.storeError ?? "no Cache API here"})`;
    $("adapt-status").textContent = `Adapted on ${result.adaptation.pairs} pairs in ${(result.ms / 1000).toFixed(1)} s; ${kept}. Translate to try it.`;
    adaptedBadge(engine);
  } catch (e) {
    $("adapt-status").textContent = controller.signal.aborted ? "Cancelled: the model is as it was." : "";
    if (!controller.signal.aborted) showError(`Adaptation failed: ${/** @type {Error} */ (e).message}`);
  } finally {
    state.adapting = null;
    bar.hidden = true;
    $("adapt-cancel").hidden = true;
    $("adapt-reset").disabled = false;
    adaptCount();
  }
}

async function resetAdaptation() {
  const engine = state.translator?.engine;
  if (!engine || state.adapting) return;
  showError("");
  try {
    await engine.reset();
    $("adapt-status").textContent = "Back to the shipped model.";
  } catch (e) {
    showError(`Reset failed: ${/** @type {Error} */ (e).message}`);
  }
  adaptedBadge(engine);
}

// ---- attention heat map (Figures 3–5) ------------------------------------------------

/** @type {import("./transduce.js").Attention | null} */
let attention = null;

async function showAttention() {
  const engine = state.translator?.engine;
  const sentence = state.lastSentences[Number($("att-sentence").value) || 0];
  if (!engine || !sentence || !sentence.targetIds) return;
  try {
    attention = await /** @type {Transduce} only a Transduce gives sentences */ (engine).attention(sentence);
  } catch (e) {
    showError(`Attention failed: ${/** @type {Error} */ (e).message}`);
    return;
  }
  const layers = attention.cross.length;
  const heads = attention.cross[0]?.heads ?? 0;
  /** @type {(sel: HTMLSelectElement, options: HTMLOptionElement[]) => void} */
  const keep = (sel, options) => {
    const old = sel.value;
    sel.replaceChildren(...options);
    if ([...sel.options].some((o) => o.value === old)) sel.value = old;
  };
  keep(/** @type {HTMLSelectElement} */ (document.getElementById("att-layer")), Array.from({ length: layers }, (_, i) => new Option(`${i + 1}`, String(i))));
  keep(/** @type {HTMLSelectElement} */ (document.getElementById("att-head")), [new Option("mean", "mean"), ...Array.from({ length: heads }, (_, i) => new Option(`${i + 1}`, String(i)))]);
  drawHeatmap();
}

function drawHeatmap() {
  const box = $("heatmap");
  if (!attention) return;
  const kind = /** @type {"cross" | "encoderSelf" | "decoderSelf"} the select's options (index.html) */ ($("att-kind").value);
  const layer = attention[kind][Number($("att-layer").value) || 0];
  if (!layer) return;
  const src = attention.sourceTokens;
  const tgt = attention.targetTokens;
  const rowsLabels = kind === "encoderSelf" ? src : tgt;
  const colLabels = kind === "cross" || kind === "encoderSelf" ? src : ["<s>", ...tgt.slice(0, -1)];
  const head = $("att-head").value;
  const { heads, rows, cols, data } = layer;
  /** @type {(r: number, c: number) => number} */
  const value = (r, c) => {
    if (head !== "mean") return data[(Number(head) * rows + r) * cols + c];
    let s = 0;
    for (let h = 0; h < heads; h++) s += data[(h * rows + r) * cols + c];
    return s / heads;
  };
  const cell = 22, left = 110, top = 90;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("width", String(left + cols * cell + 10));
  svg.setAttribute("height", String(top + rows * cell + 10));
  svg.setAttribute("class", "heat");
  /** @type {(x: number, y: number, label: string, anchor: string, rotate: boolean) => void} */
  const text = (x, y, label, anchor, rotate) => {
    const t = document.createElementNS(SVG, "text");
    t.setAttribute("x", String(x));
    t.setAttribute("y", String(y));
    t.setAttribute("text-anchor", anchor);
    if (rotate) t.setAttribute("transform", `rotate(-60 ${x} ${y})`);
    t.textContent = label.replace(/^▁/, "");
    svg.append(t);
  };
  colLabels.forEach((l, c) => text(left + c * cell + cell / 2, top - 6, l, "start", true));
  rowsLabels.forEach((l, r) => text(left - 6, top + r * cell + cell * 0.7, l, "end", false));
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const v = value(r, c);
      const rect = document.createElementNS(SVG, "rect");
      rect.setAttribute("x", String(left + c * cell));
      rect.setAttribute("y", String(top + r * cell));
      rect.setAttribute("width", String(cell - 1));
      rect.setAttribute("height", String(cell - 1));
      rect.setAttribute("fill", `rgba(37, 99, 235, ${Math.max(0.03, v).toFixed(3)})`);
      const title = document.createElementNS(SVG, "title");
      title.textContent = `${rowsLabels[r]} → ${colLabels[c]}: ${v.toFixed(3)}`;
      rect.append(title);
      svg.append(rect);
    }
  }
  box.replaceChildren(svg);
}

// ---- parse tree as SVG ------------------------------------------------------------------

/**
 * A tree node placed: its depth, and its column (leaves 0, 1, …; a constituent between its children's).
 * @typedef {{ node: import("./transduce.js").TreeNode, depth: number, x: number, children?: Placed[] }} Placed
 */

/** @param {import("./transduce.js").TreeNode} tree */
function drawTree(tree) {
  // Leaves left to right; a constituent sits above the middle of its children.
  /** @type {Placed[]} */
  const nodes = [];
  let nextLeaf = 0;
  /** @type {(node: import("./transduce.js").TreeNode, depth: number) => Placed} */
  const place = (node, depth) => {
    /** @type {Placed} */
    const entry = { node, depth, x: 0 };
    nodes.push(entry);
    if (node.word !== undefined) {
      entry.x = nextLeaf++;
    } else {
      entry.children = (node.children ?? []).map((c) => place(c, depth + 1));
      const xs = entry.children.map((c) => c.x);
      entry.x = xs.length ? (Math.min(...xs) + Math.max(...xs)) / 2 : nextLeaf++;
    }
    return entry;
  };
  place(tree, 0);
  const depth = Math.max(...nodes.map((n) => n.depth)) + 1;
  const dx = 70, dy = 46, pad = 30;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("width", String(pad * 2 + Math.max(1, nextLeaf) * dx));
  svg.setAttribute("height", String(pad * 2 + (depth + 1) * dy));
  svg.setAttribute("class", "parse-tree");
  /** @type {(e: Placed) => number} */
  const X = (e) => pad + e.x * dx + dx / 2;
  /** @type {(e: Placed) => number} */
  const Y = (e) => pad + e.depth * dy;
  /** @type {(x1: number, y1: number, x2: number, y2: number) => void} */
  const line = (x1, y1, x2, y2) => {
    const l = document.createElementNS(SVG, "line");
    Object.entries({ x1, y1, x2, y2 }).forEach(([k, v]) => l.setAttribute(k, String(v)));
    svg.append(l);
  };
  /** @type {(g: Element, x: number, y: number, text: string, cls: string) => void} */
  const label = (g, x, y, text, cls) => {
    const t = document.createElementNS(SVG, "text");
    t.setAttribute("x", String(x));
    t.setAttribute("y", String(y));
    t.setAttribute("text-anchor", "middle");
    t.setAttribute("class", cls);
    t.textContent = text;
    g.append(t);
  };
  for (const e of nodes) {
    for (const c of e.children ?? []) line(X(e), Y(e) + 6, X(c), Y(c) - 14);
  }
  for (const e of nodes) {
    const g = document.createElementNS(SVG, "g");
    g.setAttribute("class", e.node.word !== undefined ? "node preterminal" : "node phrase");
    label(g, X(e), Y(e), e.node.label, "label");
    if (e.node.word !== undefined) {
      line(X(e), Y(e) + 6, X(e), pad + depth * dy - 14);
      label(g, X(e), pad + depth * dy, e.node.word, "word");
    }
    svg.append(g);
  }
  return svg;
}

async function parse() {
  showError("");
  $("parse").disabled = true;
  $("parse-time").textContent = "parsing…";
  try {
    const entry = state.models.find((m) => m.task === "parse" && m.id === (state.parser?.id ?? m.id));
    if (!entry) throw new Error("no parser model is listed in models/index.json");
    const engine = /** @type {Transduce} a parser: Transduce.load's */ (state.parser?.engine ?? (await load(entry)));
    const result = await engine.parse($("parse-input").value, { constrained: $("constrained").checked });
    $("tree").replaceChildren(drawTree(result.tree));
    $("tree").dataset.nodes = String(result.bracketed.split("(").length - 1);
    $("bracketed").textContent = result.bracketed;
    $("parse-time").textContent = `${(result.ms / 1000).toFixed(2)} s on ${engine.backend === "webgpu" ? "WebGPU" : "CPU"}${result.wellFormed ? "" : " (output repaired)"}`;
    badge(engine);
  } catch (e) {
    $("parse-time").textContent = "";
    showError(`Parsing failed: ${/** @type {Error} */ (e).message}`);
  } finally {
    $("parse").disabled = false;
  }
}

// ---- wiring -----------------------------------------------------------------------------

async function main() {
  $("backend").value = state.backend;
  const models = await loadIndex();
  $("translate").addEventListener("click", translate);
  $("parse").addEventListener("click", parse);
  $("swap").addEventListener("click", () => swap().catch(() => {}));
  $("open-from").addEventListener("focus", fillSources);
  $("open-from").addEventListener("pointerdown", fillSources);
  $("open-from").addEventListener("change", () => fillTargets().catch((e) => showError(e.message)));
  $("open-to").addEventListener("change", () => {
    const [source, target] = [$("open-from").value, $("open-to").value];
    if (source && target) openByName(`${source}-${target}`).catch(() => {});
  });
  $("open-form").addEventListener("submit", (event) => {
    event.preventDefault();
    openByName($("open-name").value).catch(() => {});
  });
  $("parse").disabled = false;
  $("adapt-pairs").addEventListener("input", adaptCount);
  $("adapt-add").addEventListener("click", addPair);
  $("adapt").addEventListener("click", adapt);
  $("adapt-cancel").addEventListener("click", () => state.adapting?.abort());
  $("adapt-reset").addEventListener("click", resetAdaptation);
  for (const id of ["att-kind", "att-layer", "att-head"]) $(id).addEventListener("change", drawHeatmap);
  $("att-sentence").addEventListener("change", showAttention);
  $("model").addEventListener("change", () => {
    const entry = state.models.find((m) => m.id === $("model").value);
    if (entry) load(entry).catch(() => {});
  });
  $("channel").addEventListener("change", () => {
    state.channel = $("channel").checked;
    // A load under way picks the new choice up when it ends (see load()).
    const entry = state.models.find((m) => m.id === state.translator?.id);
    if (entry && !state.loading) load(entry).catch(() => {});
  });
  $("backend").addEventListener("change", () => {
    // The select's options are the three backends (index.html).
    state.backend = /** @type {import("./transduce.js").Backend} */ ($("backend").value);
    const ids = [state.translator?.id, state.parser?.id].filter(Boolean);
    state.translator?.engine.free();
    state.parser?.engine.free();
    state.translator = state.parser = null;
    for (const id of ids) {
      const entry = state.models.find((m) => m.id === id);
      if (entry) load(entry).catch(() => {});
    }
  });
  // ?model= picks a listed translator by id (or is the bundle URL added above).
  const wanted = params.get("model");
  const first =
    models.find((m) => m.task === "translate" && (m.id === wanted || m.url === wanted)) ??
    models.find((m) => m.task === "translate");
  if (first) {
    $("model").value = first.id;
    await load(first).catch(() => {});
  }
}

main();
