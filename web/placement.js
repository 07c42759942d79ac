// @ts-check
// Where a block's inline elements land in its translation (pure: no DOM; web/element.js
// applies the result). A block is its text, whitespace collapsed as the browser shows it,
// and the inline elements inside it (links, emphasis, spans, line breaks). The decoder's
// cross-attention says which source piece each target piece was written from; a target
// piece then belongs to the innermost element around that source, and each element gets
// the one contiguous run of target pieces that holds most of its own, so the original
// element can be moved (not re-created) into the translation. Bergamot's HTML mode places
// tags by the same alignment; OPUS-MT's models are trained with guided alignment (Marian's
// --guided-alignment), which makes the attention an alignment.

/**
 * An inline element of a block: its parent (an index into the block's elements, or -1 for
 * the block itself) and its text as [start, end) in the block's text. `opaque`: its content
 * is kept as it is (`<code>`, `translate="no"`): the model reads it, the translation of it
 * is dropped. `empty`: an element with no text (`<br>`, `<img>`), placed by position.
 * @typedef {{ parent: number, start: number, end: number, opaque?: boolean, empty?: boolean }} Span
 */

/**
 * A block: its text and inline elements in document order (an element before its
 * descendants).
 * @typedef {{ text: string, elements: Span[] }} Block
 */

/**
 * A target piece: its text (a leading space where it starts a word), the block's character
 * its aligned source piece starts at (-1: none), the innermost element around that
 * character (-1: the block), and the attention it gives each element's source
 * (`mass[k]`, descendants included).
 * @typedef {{ text: string, source: number, owner: number, mass: number[] }} Target
 */

/**
 * The translation laid out: text, and the block's elements each with its own layout
 * (`items` is absent for an opaque or empty element, whose content stays).
 * @typedef {{ text: string } | { element: number, items?: Item[] }} Item
 */

const SPACE = "\u2581"; // SentencePiece's word marker, "▁"
/** A piece of punctuation or symbols only. */
const PUNCTUATION = /^\s*[\p{P}\p{S}]+$/u;

/** Pieces that stand for no text: the end of a sentence, a target-language token. */
/** @param {string} piece */
const silent = (piece) => piece === "</s>" || piece === "<s>" || piece === "<pad>" || /^>>[^<>\s]+<<$/.test(piece);

/**
 * The text of SentencePiece pieces and each piece's [start, end) in it: "▁" is a space,
 * `<0xNN>` pieces are UTF-8 bytes (byte fallback), decoded together with the bytes around
 * them (the characters count as the last byte's), silent pieces are empty.
 * @param {string[]} pieces
 * @returns {{ text: string, spans: [number, number][] }}
 */
export function piecesText(pieces) {
  let text = "";
  /** @type {[number, number][]} */
  const spans = [];
  /** @type {number[]} */
  let bytes = [];
  const flush = () => {
    if (!bytes.length) return;
    const chars = new TextDecoder().decode(Uint8Array.from(bytes));
    const start = text.length;
    text += chars;
    spans[spans.length - 1] = [start, text.length];
    bytes = [];
  };
  for (const piece of pieces) {
    const byte = piece.match(/^<0x([0-9A-Fa-f]{2})>$/);
    if (byte) {
      bytes.push(parseInt(byte[1], 16));
      spans.push([text.length, text.length]);
      continue;
    }
    flush();
    const start = text.length;
    if (!silent(piece)) text += piece.replaceAll(SPACE, " ");
    spans.push([start, text.length]);
  }
  flush();
  return { text, spans };
}

/**
 * Where each source piece's text starts and ends in `text` (the sentence it was cut from),
 * or null where it cannot be found (a silent piece, `<unk>`, a character the tokenizer's
 * normalization changed). Pieces are found in order, each after the last.
 * @param {string[]} pieces
 * @param {string} text
 * @returns {([number, number] | null)[]}
 */
export function sourceSpans(pieces, text) {
  let at = 0;
  const { text: joined, spans } = piecesText(pieces);
  return spans.map(([start, end]) => {
    const word = joined.slice(start, end).trim();
    if (!word) return null;
    // A piece is looked for a little way ahead only: a character that normalization changed
    // must not make a later piece match far away.
    const found = text.indexOf(word, at);
    if (found < 0 || found - at > 8) return null;
    at = found + word.length;
    return [found, at];
  });
}

/**
 * The innermost element of `block` around character `c` (-1: the block itself); opaque
 * elements count, their insides are not listed.
 * @param {Block} block
 * @param {number} c
 */
export function ownerAt(block, c) {
  let owner = -1;
  block.elements.forEach((e, k) => {
    if (!e.empty && e.start <= c && c < e.end) owner = k;
  });
  return owner;
}

/**
 * Whether element `owner` (or -1) is `k` or inside it.
 * @param {Span[]} elements @param {number} owner @param {number} k
 */
function within(elements, owner, k) {
  for (let e = owner; e >= 0; e = elements[e].parent) if (e === k) return true;
  return false;
}

/**
 * One alignment matrix of a layer of cross-attention, its heads averaged: rows the target
 * pieces (the row predicting each piece), columns the source pieces.
 * @param {{ heads: number, rows: number, cols: number, data: ArrayLike<number> }} layer
 * @returns {Float32Array[]}
 */
export function averageHeads(layer) {
  const { heads, rows, cols, data } = layer;
  return Array.from({ length: rows }, (_, r) => {
    const row = new Float32Array(cols);
    for (let h = 0; h < heads; h++) {
      const base = (h * rows + r) * cols;
      for (let c = 0; c < cols; c++) row[c] += data[base + c] / heads;
    }
    return row;
  });
}

/**
 * The target pieces of one sentence of a block, aligned: `offset` is where the sentence's
 * source starts in the block's text, `alignment` (from averageHeads) the attention of each
 * target piece over the source pieces, or null where there is none (a pivot's two models): then by position.
 * @param {Block} block
 * @param {{ offset: number, source: string, sourceTokens: string[], targetTokens: string[], alignment: Float32Array[] | null }} sentence
 * @returns {Target[]}
 */
export function alignSentence(block, { offset, source, sourceTokens, targetTokens, alignment }) {
  const spans = sourceSpans(sourceTokens, source);
  const starts = spans.map((s) => (s ? offset + s[0] : -1));
  const owners = starts.map((c) => (c >= 0 ? ownerAt(block, c) : -1));
  const { text, spans: targetSpans } = piecesText(targetTokens);
  const rows = alignment ?? diagonal(spans, targetSpans);
  // Words, not pieces, are placed: an element never ends inside a word. A word's pieces
  // share its attention; punctuation is a word of its own (a link ends before its period).
  /** @type {{ text: string, rows: ArrayLike<number>[] }[]} */
  const words = [];
  targetTokens.forEach((_, j) => {
    const [a, b] = targetSpans[j];
    if (a === b) return; // silent, or a byte whose character is counted on a later one
    const piece = text.slice(a, b);
    const last = words[words.length - 1];
    if (last && !piece.startsWith(" ") && !PUNCTUATION.test(piece) && !PUNCTUATION.test(last.text)) {
      last.text += piece;
      if (rows[j]) last.rows.push(rows[j]);
    } else words.push({ text: piece, rows: rows[j] ? [rows[j]] : [] });
  });
  /** @type {Target[]} */
  const targets = [];
  for (const word of words) {
    let best = -1;
    const mass = block.elements.map(() => 0);
    const row = new Float32Array(spans.length);
    for (const r of word.rows) for (let i = 0; i < spans.length && i < r.length; i++) row[i] += r[i];
    for (let i = 0; i < spans.length; i++) {
      if (!spans[i]) continue;
      if (best < 0 || row[i] > row[best]) best = i;
      for (let e = owners[i]; e >= 0; e = block.elements[e].parent) mass[e] += row[i];
    }
    if (!word.rows.length) best = -1;
    const target = { source: best >= 0 ? starts[best] : -1, owner: best >= 0 ? owners[best] : -1, mass };
    // A piece may hold a word's end and its punctuation ("e."): the punctuation is split off,
    // aligned as the word is, so that an element can end before it.
    const tail = word.text.match(/^(.*[^\p{P}\p{S}\s])([\p{P}\p{S}]+)$/u);
    if (tail) targets.push({ text: tail[1], ...target }, { text: tail[2], ...target });
    else targets.push({ text: word.text, ...target });
  }
  return targets;
}

/**
 * An alignment by position alone, for a translation without attention (through a pivot
 * language): target piece j of T looks at the source piece j/T of the way along.
 * @param {([number, number] | null)[]} sources
 * @param {[number, number][]} targets
 */
function diagonal(sources, targets) {
  const found = sources.flatMap((s, i) => (s ? [i] : []));
  const words = targets.flatMap(([a, b], j) => (b > a ? [j] : []));
  const rows = targets.map(() => new Float32Array(sources.length));
  words.forEach((j, n) => {
    if (!found.length) return;
    rows[j][found[Math.min(found.length - 1, Math.floor(((n + 0.5) * found.length) / words.length))]] = 1;
  });
  return rows;
}

/**
 * Of an element's target pieces (indices, ascending), the largest run without a gap of two
 * or more other pieces: a piece aligned far from the rest is a stray, not a reason to
 * stretch the element over the words between.
 * @param {number[]} mine
 */
function core(mine) {
  let best = [0, 1];
  let from = 0;
  for (let i = 1; i <= mine.length; i++) {
    if (i < mine.length && mine[i] - mine[i - 1] <= 2) continue;
    if (i - from > best[1] - best[0]) best = [from, i];
    from = i;
  }
  return [mine[best[0]], mine[best[1] - 1] + 1];
}

/**
 * The layout of a block's translation: its target pieces (all sentences', in order) as
 * text and elements, each element once, in one contiguous run, nested as in the original.
 * @param {Block} block
 * @param {Target[]} targets
 * @returns {Item[]}
 */
export function place(block, targets) {
  const { elements } = block;
  /**
   * The items of element `e` (or -1) over target pieces [lo, hi).
   * @param {number} e @param {number} lo @param {number} hi
   * @returns {Item[]}
   */
  const layout = (e, lo, hi) => {
    const children = elements.flatMap((c, k) => (c.parent === e ? [k] : []));
    const runs = children.map((k) => ({ k, ...interval(k, lo, hi) }));
    // In the translation's order; a tie keeps the original order.
    runs.sort((a, b) => a.start - b.start || a.k - b.k);
    /** @type {Item[]} */
    const items = [];
    let at = lo;
    /** @param {number} from @param {number} to */
    const text = (from, to) => {
      if (to > from) items.push({ text: targets.slice(from, to).map((t) => t.text).join("") });
    };
    for (const run of runs) {
      // Runs never overlap: a later one starts where the last ended at the earliest, and
      // one that had pieces keeps at least one where any are left.
      const start = Math.min(Math.max(run.start, at), hi);
      let end = Math.min(Math.max(run.end, start), hi);
      if (end === start && run.end > run.start && start < hi) end = start + 1;
      text(at, start);
      const span = elements[run.k];
      if (span.empty) items.push({ element: run.k });
      else if (span.opaque) {
        // Its content stays, with the spaces the original had around it (tidy merges them
        // with the words' own).
        if (block.text[span.start - 1] === " " || (end > start && targets[start].text.startsWith(" "))) items.push({ text: " " });
        items.push({ element: run.k });
        if (block.text[span.end] === " ") items.push({ text: " " });
      } else items.push({ element: run.k, items: layout(run.k, start, end) });
      at = end;
    }
    text(at, hi);
    return items;
  };

  /** Where element k's run lies among pieces [lo, hi): [start, end), maybe empty. */
  /** @param {number} k @param {number} lo @param {number} hi @returns {{ start: number, end: number }} */
  const interval = (k, lo, hi) => {
    const mine = [];
    for (let j = lo; j < hi; j++) if (within(elements, targets[j].owner, k)) mine.push(j);
    if (mine.length) {
      let [start, end] = core(mine);
      // Punctuation the element's own text does not have stays outside it ("<a>See</a>.").
      const own = block.text.slice(elements[k].start, elements[k].end).trim();
      if (!PUNCTUATION.test(own.slice(-1))) while (end - start > 1 && PUNCTUATION.test(targets[end - 1].text)) end--;
      if (!PUNCTUATION.test(own.slice(0, 1))) while (end - start > 1 && PUNCTUATION.test(targets[start].text)) start++;
      return { start, end };
    }
    if (!elements[k].empty) {
      // Text no piece was aligned with: the piece that attends to it most, if any does.
      let best = -1;
      for (let j = lo; j < hi; j++) if ((targets[j].mass[k] ?? 0) > (best < 0 ? 0 : targets[best].mass[k])) best = j;
      if (best >= 0) return { start: best, end: best + 1 };
    }
    // By position: after the piece aligned with the nearest source before it.
    const at = elements[k].start;
    let pos = lo;
    let nearest = -1;
    for (let j = lo; j < hi; j++) {
      const s = targets[j].source;
      if (s >= 0 && s < at && s >= nearest) {
        nearest = s;
        pos = j + 1;
      }
    }
    return { start: pos, end: pos };
  };

  return tidy(layout(-1, 0, targets.length), true);
}

/**
 * Spaces where a reader expects them: a word's leading space moves out in front of the
 * element it starts, the block's first space goes, neighbouring texts merge, empty ones go.
 * @param {Item[]} items
 * @param {boolean} first the block's own items: no leading space
 * @returns {Item[]}
 */
function tidy(items, first) {
  /** @type {Item[]} */
  const out = [];
  /** @param {string} text */
  const push = (text) => {
    if (!text) return;
    const last = out[out.length - 1];
    if (last && "text" in last) last.text += text;
    else out.push({ text });
  };
  for (const item of items) {
    if ("text" in item) push(item.text);
    else if (item.items) {
      const inner = tidy(item.items, false);
      const head = inner[0];
      if (head && "text" in head && head.text.startsWith(" ")) {
        push(" ");
        head.text = head.text.slice(1);
        if (!head.text) inner.shift();
      }
      out.push({ element: item.element, items: inner });
    } else out.push(item);
  }
  if (first) {
    const head = out[0];
    if (head && "text" in head) {
      head.text = head.text.trimStart();
      if (!head.text) out.shift();
    }
  }
  // Two spaces where a moved space meets a word's own.
  for (const item of out) if ("text" in item) item.text = item.text.replace(/ {2,}/g, " ");
  return out;
}

/** The plain text of a layout (elements' text included; opaque and empty ones as ""). */
/** @param {Item[]} items @returns {string} */
export function layoutText(items) {
  return items.map((i) => ("text" in i ? i.text : i.items ? layoutText(i.items) : "")).join("");
}
