// @ts-check
// A page's content as the blocks a translator reads, grouped as Firefox's full-page
// translation groups them (translations-document.sys.mjs): an element whose content is
// text and inline elements only (a paragraph, a list item, a cell, a heading, a button, a
// label) is one block; an element that mixes blocks with loose text gives each run of its
// loose text and inline elements a block of its own; the `alt`, `title`, `placeholder`,
// `aria-label` (and a button input's `value`) attributes are blocks of their own. What
// the page marks as not to be translated is skipped. Elements are told apart by their
// tags, not their computed styles, so this runs without layout (and in node's tests).

/** @typedef {import("./placement.js").Block} Block */
/** @typedef {import("./placement.js").Span} Span */

/** Inline elements: part of the block around them. */
const INLINE = new Set([
  "A", "ABBR", "B", "BDI", "BDO", "BIG", "CITE", "DATA", "DEL", "DFN", "EM", "FONT", "I", "INS", "MARK", "Q", "RP", "RT", "RUBY", "S", "SMALL", "SPAN", "STRONG", "SUB", "SUP", "TIME", "TT", "U",
  ...["CODE", "KBD", "SAMP", "VAR"], // opaque: below
  ...["BR", "IMG", "WBR", "INPUT", "METER", "PROGRESS", "SELECT"], // empty: below
]);
/** Inline elements whose content is kept as it is: the model reads it, nothing replaces it. */
const OPAQUE = new Set(["CODE", "KBD", "SAMP", "VAR", "SELECT"]);
/** Inline elements without text, placed by position. */
const EMPTY = new Set(["BR", "IMG", "WBR", "INPUT", "METER", "PROGRESS"]);
/** Never translated, nor anything inside. */
const SKIPPED = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "PRE", "TEXTAREA", "SVG", "MATH", "IFRAME", "OBJECT", "CANVAS", "VIDEO", "AUDIO"]);
/** Attributes people read, by where they are read. */
const ATTRIBUTES = ["alt", "title", "placeholder", "aria-label"];

/**
 * A block of elements' content: `nodes` are the children of `parent` it is made of (all of
 * them when `whole`), `block` its text and inline elements for placement.js, `elements`
 * the DOM elements behind `block.elements`, in the same order.
 * @typedef {{ kind: "nodes", parent: Element, nodes: Node[], whole: boolean, block: Block, elements: Element[] }} NodesBlock
 */
/** An attribute to translate. @typedef {{ kind: "attribute", element: Element, name: string, block: Block, elements: Element[] }} AttributeBlock */
/** @typedef {NodesBlock | AttributeBlock} PageBlock */

const ELEMENT = 1;
const TEXT = 3;

/** The primary language subtag of a BCP 47 tag, lower case ("de" of "de-CH"). */
/** @param {string | null | undefined} tag */
export const primary = (tag) => String(tag ?? "").split(/[-_]/)[0].toLowerCase();

/**
 * Whether `el` is left as it is, with everything inside: not for translation
 * (`translate="no"`, code, scripts, styles), edited by the visitor, or already in `to`.
 * @param {Element} el
 * @param {string} to
 */
export function skipped(el, to) {
  if (SKIPPED.has(el.tagName.toUpperCase())) return true;
  if (el.getAttribute("translate") === "no") return true;
  const editable = el.getAttribute("contenteditable");
  if (editable !== null && editable !== "false") return true;
  const lang = el.getAttribute("lang");
  return lang !== null && lang !== "" && primary(lang) === primary(to);
}

/**
 * Whether a node is inline content (text, or an inline element with no block inside).
 * @param {Node} node @param {string} to
 * @returns {boolean}
 */
function isInline(node, to) {
  if (node.nodeType === TEXT) return true;
  if (node.nodeType !== ELEMENT) return true; // a comment: inside a block, dropped while translated
  const el = /** @type {Element} */ (node);
  const tag = el.tagName.toUpperCase();
  if (!INLINE.has(tag)) return false;
  if (OPAQUE.has(tag) || EMPTY.has(tag) || skipped(el, to)) return true;
  return [...el.childNodes].every((c) => c.nodeType !== ELEMENT || isInline(c, to));
}

/**
 * Text and inline elements as a Block: whitespace collapsed as the browser collapses it,
 * each element's [start, end), skipped and opaque ones with their text but no insides.
 * @param {Node[]} nodes
 * @param {string} to
 * @returns {{ block: Block, elements: Element[] }}
 */
export function describe(nodes, to) {
  let text = "";
  /** @type {Span[]} */
  const spans = [];
  /** @type {Element[]} */
  const elements = [];
  /** @param {string} data */
  const add = (data) => {
    for (const ch of data) {
      if (/\s/.test(ch)) {
        if (text && !text.endsWith(" ")) text += " ";
      } else text += ch;
    }
  };
  /** @param {Node} node @param {number} parent @returns {void} */
  const walk = (node, parent) => {
    if (node.nodeType === TEXT) return add(/** @type {Text} */ (node).data);
    if (node.nodeType !== ELEMENT) return;
    const el = /** @type {Element} */ (node);
    const tag = el.tagName.toUpperCase();
    const k = spans.length;
    const empty = EMPTY.has(tag);
    const opaque = !empty && (OPAQUE.has(tag) || skipped(el, to));
    spans.push({ parent, start: text.length, end: text.length, ...(empty ? { empty } : {}), ...(opaque ? { opaque } : {}) });
    elements.push(el);
    if (tag === "BR") add(" ");
    else if (opaque) add(el.textContent ?? "");
    else if (!empty) for (const child of el.childNodes) walk(child, k);
    spans[k].end = text.length;
  };
  for (const node of nodes) walk(node, -1);
  // A trailing space belongs to no word; a leading one cannot occur (add skips it).
  if (text.endsWith(" ")) text = text.slice(0, -1);
  for (const s of spans) {
    s.start = Math.min(s.start, text.length);
    s.end = Math.min(s.end, text.length);
  }
  return { block: { text, elements: spans }, elements };
}

/** Whether a block has anything to translate: a letter outside opaque elements. */
/** @param {Block} block */
function hasWords({ text, elements }) {
  let rest = text;
  for (const e of elements) if (e.opaque && e.parent === -1) rest = rest.slice(0, e.start) + " ".repeat(e.end - e.start) + rest.slice(e.end);
  return /\p{L}/u.test(rest);
}

/**
 * The blocks under `root` (itself included), in document order, skipping what `skip`
 * answers true for (nodes already translated) and what is not for translation into `to`.
 * @param {Element} root
 * @param {{ to: string, skip?: (node: Node) => boolean }} options
 * @returns {PageBlock[]}
 */
export function collect(root, { to, skip = () => false }) {
  /** @type {PageBlock[]} */
  const out = [];
  /** @param {Element} el */
  const attributes = (el) => {
    for (const name of [...ATTRIBUTES, "value"]) {
      if (name === "value" && !(el.tagName.toUpperCase() === "INPUT" && ["button", "submit", "reset"].includes((el.getAttribute("type") ?? "").toLowerCase()))) continue;
      const value = el.getAttribute(name);
      if (!value || !/\p{L}/u.test(value) || skip(el)) continue;
      const { block } = describe([el.ownerDocument.createTextNode(value)], to);
      out.push({ kind: "attribute", element: el, name, block, elements: [] });
    }
  };
  /** @param {Node} node @returns {void} */
  const inlineAttributes = (node) => {
    if (node.nodeType !== ELEMENT || skipped(/** @type {Element} */ (node), to)) return;
    attributes(/** @type {Element} */ (node));
    for (const child of node.childNodes) inlineAttributes(child);
  };
  /** @param {Element} parent @param {Node[]} nodes @param {boolean} whole */
  const run = (parent, nodes, whole) => {
    if (!nodes.length || nodes.every(skip)) return;
    const { block, elements } = describe(nodes, to);
    if (hasWords(block)) out.push({ kind: "nodes", parent, nodes, whole, block, elements });
    nodes.forEach(inlineAttributes);
  };
  /** @param {Element} el @returns {void} */
  const visit = (el) => {
    // A text area's content is the visitor's; its placeholder and title are the site's.
    if (el.tagName.toUpperCase() === "TEXTAREA" && !skip(el)) attributes(el);
    if (skipped(el, to) || skip(el)) return;
    attributes(el);
    const children = [...el.childNodes];
    if (children.every((c) => isInline(c, to))) return run(el, children, true);
    /** @type {Node[]} */
    let loose = [];
    for (const child of children) {
      if (isInline(child, to)) {
        loose.push(child);
        continue;
      }
      run(el, loose, false);
      loose = [];
      if (child.nodeType === ELEMENT) visit(/** @type {Element} */ (child));
    }
    run(el, loose, false);
  };
  visit(root);
  return out;
}
