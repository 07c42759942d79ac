// @ts-check
// A page translated in place, markup kept:
//
//   import { translateElement } from "transduce/element.js";
//   const page = translateElement(document.body, { to: "de" });
//   await page.ready;      // what the visitor sees is in German
//   page.restore();        // the original DOM, exactly
//
// The content is grouped into blocks (blocks.js); each block is translated as one line
// of a request, and where it holds inline elements (links, emphasis, line breaks) the
// decoder's cross-attention puts each element's text where the translation put its words
// (placement.js). The original elements are moved into the translation, not re-created, so
// their attributes and event listeners stay. Blocks the visitor sees go first, the rest as
// they scroll near; content added later is translated when it appears. The model is a
// loaded Transduce, a Translator of translator.js, or the pair's Translator, made here.
import { collect } from "./blocks.js";
import { alignSentence, averageHeads, place } from "./placement.js";
import { Translator, stagesOf } from "./translator.js";

/** @typedef {import("./blocks.js").PageBlock} PageBlock */
/** @typedef {import("./placement.js").Item} Item */
/** @typedef {import("./transduce.js").Transduce} Transduce */
/** @typedef {import("./element.js").TranslateElementOptions} Options */
/** @typedef {{ engine: Transduce, token: string | null | undefined }} Stage a model, and its target token (translator.js's stagesOf) */
/** @typedef {{ resolve: (value: void) => void, reject: (e: unknown) => void }} Ready `ready`'s ends */

/** The characters one request carries at most: a decoder batch's worth of sentences. */
const REQUEST_CHARS = 1500;
/** The first request's characters: the visitor's first block comes back at once. */
const FIRST_REQUEST_CHARS = 300;
/** The blocks one request carries at most. */
const REQUEST_BLOCKS = 24;

/**
 * A block translated: what it was (to put back) and what it is now.
 * @typedef {{ block: PageBlock, fresh: Node[], children: Map<Element, Node[]>, anchor: Node | null, lang: string | null, value: string | null }} Applied
 */

/**
 * Translates the content of `root` (an element, itself included) into `options.to` in
 * place. options:
 *   to: the target language (BCP 47, e.g. "de").
 *   from: the source language; default: the nearest `lang` attribute above `root`.
 *   translator: a loaded Transduce (one model) or a Translator (translator.js) to use;
 *     default: Translator.create() for the pair (a model by name from the hub, or the
 *     registry's), destroyed by stop() and restore().
 *   lazy: blocks far below the view wait until the visitor scrolls near them (default
 *     true); false: all of them, those in view first.
 *   onProgress({ translated, total }): after every request.
 *   decode: { beam, alpha, maxExtra } for every request (default: the model's own).
 *   alignmentLayer: the decoder layer whose cross-attention places elements (default: the
 *     last, the layer Marian's guided alignment trains).
 * Returns a PageTranslation at once; its `ready` says when the blocks in view are done.
 * @param {Element} root
 * @param {Options} options
 */
export function translateElement(root, options) {
  if (!root || root.nodeType !== 1) throw new TypeError("translateElement: root must be an element");
  const { to, from, translator, lazy = true, onProgress, alignmentLayer, decode = {} } = options ?? /** @type {Partial<Options>} */ ({});
  if (typeof decode !== "object" || decode === null || Object.keys(decode).some((k) => !["beam", "alpha", "maxExtra"].includes(k))) {
    throw new TypeError("translateElement: options.decode must be { beam, alpha, maxExtra }");
  }
  if (typeof to !== "string" || !/^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]+)*$/.test(to)) {
    throw new TypeError(`translateElement: options.to must be a language tag such as "de", not ${JSON.stringify(to)}`);
  }
  if (onProgress !== undefined && typeof onProgress !== "function") throw new TypeError("translateElement: options.onProgress must be a function");
  if (alignmentLayer !== undefined && !Number.isInteger(alignmentLayer)) throw new TypeError("translateElement: options.alignmentLayer must be a whole number");
  const source = from ?? root.closest("[lang]")?.getAttribute("lang") ?? undefined;
  if (!translator && !source) {
    throw new TypeError("translateElement: options.from is needed: no lang attribute on or above the element says its language");
  }
  return new PageTranslation(root, { to, from: source, translator, lazy: lazy !== false, onProgress, alignmentLayer, decode });
}

/**
 * The whole document: translateElement(document.documentElement) with the document's
 * `lang` (the source by default) set to the target while translated.
 * @param {Options} options
 * @param {Document} [doc]
 */
export function translateDocument(options, doc = globalThis.document) {
  const html = doc.documentElement;
  const page = translateElement(html, { ...options, from: options?.from ?? (html.getAttribute("lang") || undefined) });
  const lang = html.getAttribute("lang");
  page.ready.then(() => html.setAttribute("lang", options.to), () => {});
  page.onRestore(() => (lang === null ? html.removeAttribute("lang") : html.setAttribute("lang", lang)));
  return page;
}

/** A translation of a page's content in progress: its progress, stop() and restore(). */
export class PageTranslation {
  #root;
  #to;
  #lazy;
  #layer;
  #decode;
  #onProgress;
  /** @type {Promise<Stage[]>} */
  #stages;
  /**
   * A Translator made here: destroyed when done with.
   * @type {Translator | null}
   */
  #own = null;
  /** @type {PageBlock[]} */
  #queue = [];
  /**
   * Blocks waiting for the visitor to scroll near, by the element observed.
   * @type {Map<Element, PageBlock[]>}
   */
  #waiting = new Map();
  /** @type {Applied[]} */
  #applied = [];
  /**
   * Nodes and attributes already queued or translated, so nothing is translated twice.
   * @type {WeakSet<Node>}
   */
  #seen = new WeakSet();
  /** @type {WeakMap<Element, Set<string>>} */
  #attributesSeen = new WeakMap();
  #total = 0;
  #translated = 0;
  /** Blocks at the queue's head that are in view: a request takes them alone. */
  #urgent = 0;
  /** Blocks of the document's <head> (its title), queued before the observer reports. */
  #heads = 0;
  /** `ready` resolves when this many blocks are translated. */
  #readyAt = Infinity;
  #running = false;
  #stopped = false;
  /** @type {(() => void)[]} */
  #restoreHooks = [];
  /** @type {{ resolve: () => void, reject: (e: unknown) => void }[]} */
  #idle = [];
  /** @type {Ready} set in the constructor (the executor runs at once) */
  #visible = /** @type {Ready} */ (/** @type {unknown} */ (null));
  /** Resolves once the blocks wanted at the start are queued (the observer's first report). */
  #reported = Promise.resolve();
  /** @type {IntersectionObserver | null} */
  #intersection = null;
  /** @type {MutationObserver | null} */
  #mutation = null;

  /**
   * @param {Element} root
   * @param {Options & { lazy: boolean }} options
   */
  constructor(root, { to, from, translator, lazy, onProgress, alignmentLayer, decode }) {
    this.#decode = decode ?? {};
    this.#root = root;
    this.#to = to;
    this.#lazy = lazy;
    this.#layer = alignmentLayer;
    this.#onProgress = onProgress;
    this.#stages = this.#engines(translator, from, to);
    // Unhandled until someone waits: the same error reaches ready and idle().
    this.#stages.catch(() => {});
    /**
     * Resolves when the blocks in view at the start are translated (rejects if the model cannot load).
     * @type {Promise<void>}
     */
    this.ready = new Promise((resolve, reject) => (this.#visible = { resolve, reject }));
    this.ready.catch(() => {});
    this.#start();
  }

  /** { translated, total }: blocks done, and blocks found so far. */
  get progress() {
    return { translated: this.#translated, total: this.#total };
  }

  /** Resolves when no block is waiting for a request (lazy blocks out of view do not count). */
  async idle() {
    // The observer's first report says which blocks are wanted now.
    await this.#reported;
    if (!this.#running && !this.#queue.length) return this.#stages.then(() => {});
    return /** @type {Promise<void>} */ (new Promise((resolve, reject) => this.#idle.push({ resolve: () => resolve(undefined), reject })));
  }

  /** Stops: nothing more is translated; what is translated stays. */
  stop() {
    this.#stopped = true;
    this.#intersection?.disconnect();
    this.#mutation?.disconnect();
    this.#queue = [];
    this.#waiting.clear();
    if (this.#own) {
      this.#own.destroy();
      this.#own = null;
    }
    this.#visible.resolve();
    this.#settle();
  }

  /** Stops, and gives back the original DOM exactly: its nodes, text and attributes. */
  restore() {
    this.stop();
    for (const applied of this.#applied.reverse()) putBack(applied);
    this.#applied = [];
    for (const hook of this.#restoreHooks) hook();
  }

  /**
   * `hook` runs after restore() (translateDocument puts the document's lang back).
   * @param {() => void} hook
   */
  onRestore(hook) {
    this.#restoreHooks.push(hook);
  }

  /**
   * @param {Options["translator"]} translator
   * @param {string | undefined} from
   * @param {string} to
   * @returns {Promise<Stage[]>}
   */
  async #engines(translator, from, to) {
    if (translator && typeof /** @type {{ attention?: unknown }} */ (translator).attention === "function") return [{ engine: /** @type {Transduce} it has attention() */ (translator), token: null }];
    if (translator) return stagesOf(/** @type {Translator} not a Transduce */ (translator));
    const made = await Translator.create({ sourceLanguage: /** @type {string} translateElement checked it */ (from), targetLanguage: to });
    if (this.#stopped) {
      made.destroy();
      return [];
    }
    this.#own = made;
    return stagesOf(made);
  }

  #start() {
    const blocks = this.#collect(this.#root);
    // The root's own window (an iframe's element has its own).
    const view = /** @type {any} */ (this.#root.ownerDocument.defaultView ?? globalThis);
    /** @type {typeof IntersectionObserver | undefined} */
    const IO = view.IntersectionObserver;
    if (!IO) {
      // No layout to ask (node): document order, all of them.
      this.#enqueue(blocks);
      this.#stages.then(() => this.idle()).then(() => this.#visible.resolve(), (e) => this.#visible.reject(e));
    } else {
      let first = true;
      let reported = () => {};
      this.#reported = new Promise((resolve) => (reported = resolve));
      this.#intersection = new IO((entries) => {
        this.#seeing(entries, first);
        first = false;
        reported();
      }, { rootMargin: "50% 0px" });
      if (!blocks.length) reported();
      // The document's <title> has no box to scroll to: it goes with the first requests.
      /** @param {PageBlock} b */
      const unseen = (b) => (b.kind === "attribute" ? b.element : b.parent).closest("head");
      this.#heads = blocks.filter(unseen).length;
      this.#enqueue(blocks.filter(unseen));
      for (const block of blocks.filter((b) => !unseen(b))) this.#watch(block);
      if (!blocks.length) this.#visible.resolve();
    }
    /** @type {typeof MutationObserver | undefined} */
    const MO = view.MutationObserver;
    if (MO) {
      this.#mutation = new MO((records) => this.#added(records));
      this.#mutation.observe(this.#root, { childList: true, subtree: true });
    }
  }

  /**
   * The blocks under `node` not seen before, marked seen.
   * @param {Element} node
   */
  #collect(node) {
    /** @param {Node} n */
    const skip = (n) => this.#seen.has(n);
    const blocks = collect(node, { to: this.#to, skip }).filter((b) => {
      if (b.kind === "attribute") {
        const names = this.#attributesSeen.get(b.element) ?? new Set();
        if (names.has(b.name)) return false;
        this.#attributesSeen.set(b.element, names.add(b.name));
      } else {
        if (b.whole) this.#seen.add(b.parent);
        for (const n of b.nodes) this.#seen.add(n);
      }
      return true;
    });
    this.#total += blocks.length;
    return blocks;
  }

  /**
   * The element whose visibility says when a block is wanted.
   * @param {PageBlock} block
   */
  #watch(block) {
    const target = block.kind === "attribute" ? block.element : block.parent;
    const list = this.#waiting.get(target);
    if (list) list.push(block);
    else {
      this.#waiting.set(target, [block]);
      /** @type {IntersectionObserver} blocks are watched only where there is one */ (this.#intersection).observe(target);
    }
  }

  /**
   * The observer's report: blocks near the view go now; at the start, in view first.
   * @param {IntersectionObserverEntry[]} entries
   * @param {boolean} first
   */
  #seeing(entries, first) {
    /** @type {PageBlock[]} */
    const near = [];
    /** @type {PageBlock[]} */
    const far = [];
    for (const entry of entries) {
      const blocks = this.#waiting.get(entry.target);
      if (!blocks) continue;
      if (entry.isIntersecting) {
        // In view (not just near it) goes first.
        const rect = entry.boundingClientRect;
        const inView = rect.bottom > 0 && rect.top < (globalThis.innerHeight || Infinity);
        (inView ? near : far).push(...blocks);
        this.#waiting.delete(entry.target);
        /** @type {IntersectionObserver} it reports */ (this.#intersection).unobserve(entry.target);
      } else if (!this.#lazy) {
        far.push(...blocks);
        this.#waiting.delete(entry.target);
        /** @type {IntersectionObserver} it reports */ (this.#intersection).unobserve(entry.target);
      }
    }
    /** @param {PageBlock[]} list */
    const byOrder = (list) => list.sort((a, b) => order(a, b));
    if (first) {
      // `ready`: when the requests holding what is in view are done; they go alone, so the
      // visitor's first screen does not wait for blocks below it.
      this.#urgent = this.#queue.length + near.length;
      this.#readyAt = this.#heads + near.length;
      if (!near.length) this.#stages.then(() => this.#visible.resolve(), (e) => this.#visible.reject(e));
    }
    this.#enqueue(byOrder(near));
    this.#enqueue(byOrder(far));
  }

  /**
   * New content: its blocks, when it is not inside a block already handled.
   * @param {MutationRecord[]} records
   */
  #added(records) {
    if (this.#stopped) return;
    /** @type {PageBlock[]} */
    const blocks = [];
    for (const record of records) {
      for (const node of record.addedNodes) {
        if (!node.isConnected) continue;
        const container = node.nodeType === 1 ? /** @type {Element} */ (node) : node.parentElement;
        // Inline content added to a block translated already is left as it is.
        if (!container) continue;
        if (ancestorSeen(container, this.#seen)) continue;
        blocks.push(...this.#collect(container));
      }
    }
    if (!blocks.length) return;
    if (this.#intersection) for (const block of blocks) this.#watch(block);
    else this.#enqueue(blocks);
  }

  /** @param {PageBlock[]} blocks */
  #enqueue(blocks) {
    if (!blocks.length || this.#stopped) return;
    this.#queue.push(...blocks);
    this.#pump();
  }

  async #pump() {
    if (this.#running) return;
    this.#running = true;
    try {
      const stages = await this.#stages;
      while (this.#queue.length && !this.#stopped) {
        const batch = [];
        let chars = 0;
        const limit = this.#urgent > 0 ? Math.min(REQUEST_BLOCKS, this.#urgent) : REQUEST_BLOCKS;
        const most = this.#translated === 0 ? FIRST_REQUEST_CHARS : REQUEST_CHARS;
        while (this.#queue.length && batch.length < limit && (chars === 0 || chars + this.#queue[0].block.text.length <= most)) {
          const block = /** @type {PageBlock} */ (this.#queue.shift());
          this.#urgent = Math.max(0, this.#urgent - 1);
          chars += block.block.text.length;
          batch.push(block);
        }
        const layouts = await translateBlocks(stages, batch.map((b) => b.block), this.#layer, this.#decode);
        if (this.#stopped) break;
        batch.forEach((block, i) => {
          if (!layouts[i]) return;
          const applied = apply(block, layouts[i], this.#to);
          // The translation's own nodes are not content to translate.
          for (const node of applied.fresh) this.#seen.add(node);
          this.#applied.push(applied);
        });
        // Our own changes are not new content.
        this.#mutation?.takeRecords();
        this.#translated += batch.length;
        if (this.#translated >= this.#readyAt) this.#visible.resolve();
        this.#onProgress?.(this.progress);
      }
    } catch (e) {
      this.#running = false;
      for (const waiter of this.#idle.splice(0)) waiter.reject(e);
      this.#visible.reject(e);
      return;
    }
    this.#running = false;
    this.#settle();
  }

  #settle() {
    if (this.#running || (this.#queue.length && !this.#stopped)) return;
    for (const waiter of this.#idle.splice(0)) waiter.resolve();
  }
}

/**
 * Document order of two blocks.
 * @param {PageBlock} a @param {PageBlock} b
 */
function order(a, b) {
  /** @param {PageBlock} x */
  const node = (x) => (x.kind === "attribute" ? x.element : x.nodes[0]);
  const position = node(a).compareDocumentPosition(node(b));
  return position & 4 ? -1 : position & 2 ? 1 : 0;
}

/**
 * Whether `el` or an element above it is a translated block's parent, or one of its nodes.
 * @param {Element | null} el
 * @param {WeakSet<Node>} seen
 */
function ancestorSeen(el, seen) {
  for (let e = el; e; e = e.parentElement) if (seen.has(e)) return true;
  return false;
}

/**
 * Translates blocks (one line each) through the stages and lays each out: null for a block
 * that got no translation.
 * @param {Stage[]} stages
 * @param {import("./placement.js").Block[]} blocks
 * @param {number | undefined} layer
 * @param {{ beam?: number, alpha?: number, maxExtra?: number }} [decode]
 * @returns {Promise<(Item[] | null)[]>}
 */
export async function translateBlocks(stages, blocks, layer, decode = {}) {
  const [first, ...rest] = stages;
  /** @param {Stage} stage */
  const prefix = (stage) => (stage.token ? `${stage.token} ` : "");
  /** @param {Stage} stage */
  const options = (stage) => ({ ...decode, ...(stage.token ? { prefix: prefix(stage) } : {}) });
  const { sentences } = await first.engine.translate(blocks.map((b) => b.text).join("\n"), options(first));
  /** @type {import("./transduce.js").SentenceTranslation[][]} */
  const byLine = blocks.map(() => []);
  for (const sentence of sentences) byLine[sentence.line]?.push(sentence);
  // Through a pivot: the first model's lines through the rest; aligned by position.
  /** @type {import("./transduce.js").SentenceTranslation[][] | null} */
  let final = null;
  if (rest.length) {
    let lines = byLine.map((list) => list.map((s) => s.target).join(" "));
    for (const stage of rest) {
      const result = await stage.engine.translate(lines.join("\n"), options(stage));
      final = blocks.map(() => []);
      for (const sentence of result.sentences) final[sentence.line]?.push(sentence);
      lines = final.map((list) => list.map((s) => s.target).join(" "));
    }
  }
  const out = [];
  for (const [b, block] of blocks.entries()) {
    if (final) {
      // The last model's sentences of this line against the whole line's source, by position.
      const sourceTokens = byLine[b].flatMap((x) => x.sourceTokens);
      const targetTokens = final[b].flatMap((x, i) => (i > 0 ? ["\u2581", ...x.targetTokens] : x.targetTokens));
      const targets = alignSentence(block, { offset: 0, source: block.text, sourceTokens, targetTokens, alignment: null });
      out.push(targets.some((t) => t.text.trim()) ? place(block, targets) : null);
      continue;
    }
    const targets = [];
    let at = 0;
    for (const [s, sentence] of byLine[b].entries()) {
      const text = sentence.source.startsWith(prefix(first)) ? sentence.source.slice(prefix(first).length) : sentence.source;
      const found = block.text.indexOf(text.trim(), at);
      const offset = found >= 0 ? found : at;
      at = offset + text.trim().length;
      let alignment = null;
      // Attention only where an element lies in this sentence: a sentence of plain text
      // needs no alignment (and it costs a forward pass).
      const holds = block.elements.some((e) => e.start < at && e.end >= offset);
      if (holds && sentence.targetIds.length) {
        const attention = await first.engine.attention(sentence);
        const cross = attention.cross;
        alignment = averageHeads(cross[Math.min(cross.length - 1, Math.max(0, layer ?? cross.length - 1))]);
      }
      // Sentences after the first start a word.
      const targetTokens = s > 0 ? ["\u2581", ...sentence.targetTokens] : sentence.targetTokens;
      const rows = alignment && s > 0 ? [new Float32Array(0), ...alignment] : alignment;
      targets.push(...alignSentence(block, { offset, source: text, sourceTokens: sentence.sourceTokens, targetTokens, alignment: rows }));
    }
    out.push(targets.some((t) => t.text.trim()) ? place(block, targets) : null);
  }
  return out;
}

/**
 * Puts a block's layout into the page, moving its elements; returns what restore needs.
 * @param {PageBlock} block
 * @param {Item[]} items
 * @param {string} to
 * @returns {Applied}
 */
function apply(block, items, to) {
  if (block.kind === "attribute") {
    const text = items.map((i) => ("text" in i ? i.text : "")).join("");
    const value = block.element.getAttribute(block.name);
    block.element.setAttribute(block.name, text);
    return { block, fresh: [], children: new Map(), anchor: null, lang: null, value };
  }
  const doc = block.parent.ownerDocument;
  // Everything as it was, before anything moves.
  const children = new Map();
  for (const el of block.elements) children.set(el, [...el.childNodes]);
  const anchor = block.whole ? null : block.nodes[block.nodes.length - 1].nextSibling;
  const lang = block.whole ? block.parent.getAttribute("lang") : null;
  /** @param {Item[]} list @returns {Node[]} */
  const build = (list) =>
    list.map((item) => {
      if ("text" in item) return doc.createTextNode(item.text);
      const el = block.elements[item.element];
      if (item.items) el.replaceChildren(...build(item.items));
      return el;
    });
  const fresh = build(items);
  for (const [el] of children) if (!block.elements.includes(el)) children.delete(el);
  if (block.whole) {
    block.parent.replaceChildren(...fresh);
    block.parent.setAttribute("lang", to);
  } else {
    for (const node of block.nodes) if (node.parentNode === block.parent && !fresh.includes(node)) block.parent.removeChild(node);
    for (const node of fresh) block.parent.insertBefore(node, anchor);
  }
  return { block, fresh, children, anchor, lang, value: null };
}

/**
 * Gives a block back its original nodes, text and attributes.
 * @param {Applied} applied
 */
function putBack({ block, fresh, children, anchor, lang, value }) {
  if (block.kind === "attribute") {
    if (value === null) block.element.removeAttribute(block.name);
    else block.element.setAttribute(block.name, value);
    return;
  }
  for (const [el, nodes] of children) el.replaceChildren(...nodes);
  if (block.whole) {
    block.parent.replaceChildren(...block.nodes);
    if (lang === null) block.parent.removeAttribute("lang");
    else block.parent.setAttribute("lang", lang);
  } else {
    for (const node of fresh) if (node.parentNode === block.parent) block.parent.removeChild(node);
    for (const node of block.nodes) block.parent.insertBefore(node, anchor);
  }
}

