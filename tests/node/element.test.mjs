// A page translated in place (web/blocks.js, web/placement.js, web/element.js), in node:
// linkedom gives the DOM, and a stand-in model whose translation and alignment are known by
// construction (each word upper-cased, the words of a sentence in reverse order, each
// target word attending only to its source word) says where every element must land. The
// browser tests run the real models.
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseHTML } from "linkedom";
import { collect, describe } from "../../web/blocks.js";
import { alignSentence, piecesText, place, sourceSpans, layoutText } from "../../web/placement.js";
import { translateBlocks, translateElement } from "../../web/element.js";

/** A model that reverses each sentence's words and upper-cases them; attention one-hot. */
function reverser({ calls = [] } = {}) {
  const sentencesOf = (line) => line.split(/(?<=\.) /).filter((s) => s.trim());
  return {
    calls,
    async translate(text, options = {}) {
      calls.push(text);
      const sentences = [];
      text.split("\n").forEach((line, l) => {
        for (const source of sentencesOf(line)) {
          const words = source.trim().split(/\s+/);
          const sourceTokens = words.map((w) => `\u2581${w}`);
          const order = words.map((_, i) => words.length - 1 - i);
          const targetTokens = order.map((i) => `\u2581${words[i].toUpperCase()}`);
          sentences.push({ source, target: targetTokens.join("").replaceAll("\u2581", " ").trim(), sourceTokens, targetTokens, sourceIds: words.map((_, i) => i), targetIds: order, line: l, prefix: options.prefix });
        }
      });
      return { text: "", sentences };
    },
    async attention(sentence) {
      const rows = sentence.targetIds.length + 1;
      const cols = sentence.sourceIds.length + 1;
      const data = new Float32Array(rows * cols);
      sentence.targetIds.forEach((i, j) => (data[j * cols + i] = 1));
      data[(rows - 1) * cols + cols - 1] = 1;
      return { cross: [{ heads: 1, rows, cols, data }] };
    },
  };
}

const page = (body) => parseHTML(`<!doctype html><html lang="en"><body>${body}</body></html>`).document;

test("pieces give their text and spans; byte pieces decode together", () => {
  const { text, spans } = piecesText(["\u2581Ha", "us", "<0xC3>", "<0xA4>", "</s>"]);
  assert.equal(text, " Hausä");
  assert.deepEqual(spans, [[0, 3], [3, 5], [5, 5], [5, 6], [6, 6]]);
  assert.deepEqual(sourceSpans(["\u2581The", "\u2581ca", "r", ">>deu<<", "\u2581."], "The car ."), [[0, 3], [4, 6], [6, 7], null, [8, 9]]);
});

test("blocks are grouped as Firefox groups them, skipped content left out", () => {
  const doc = page(`
    <h1>A title</h1>
    <div>Loose <b>text</b> here <p>A paragraph with <a href="#">a link</a>.</p> and after</div>
    <ul><li>One</li><li translate="no">Two</li></ul>
    <pre>code block</pre><p>Use <code>npm test</code> now.</p>
    <p lang="de">Schon deutsch.</p>
    <img alt="A red car" src="x.png"><input placeholder="Your name"><button title="Send it">Send</button>
    <div contenteditable="true">typed by the visitor</div>`);
  const blocks = collect(doc.body, { to: "de" });
  const texts = blocks.map((b) => (b.kind === "attribute" ? `@${b.name}:${b.block.text}` : b.block.text));
  assert.deepEqual(texts, ["A title", "Loose text here", "A paragraph with a link.", "and after", "One", "Use npm test now.", "@alt:A red car", "@placeholder:Your name", "@title:Send it", "Send"]);
  const link = blocks[2];
  assert.equal(link.kind, "nodes");
  assert.deepEqual(link.block.elements, [{ parent: -1, start: 17, end: 23 }]);
  // <code> is read, not replaced.
  assert.deepEqual(blocks[5].block.elements, [{ parent: -1, start: 4, end: 12, opaque: true }]);
});

test("whitespace collapses as the browser shows it; a line break is a space and an empty element", () => {
  const doc = page("<p>  Two\n   lines<br>and <b> bold </b> end  </p>");
  const { block } = describe([...doc.querySelector("p").childNodes], "de");
  assert.equal(block.text, "Two lines and bold end");
  assert.deepEqual(block.elements, [{ parent: -1, start: 9, end: 10, empty: true }, { parent: -1, start: 14, end: 19 }]);
});

test("each element lands on the words aligned with its own, nested elements inside their parents", () => {
  const block = { text: "The very red car", elements: [{ parent: -1, start: 4, end: 12 }, { parent: 0, start: 9, end: 12 }] };
  // A translation in reverse: CAR RED VERY THE.
  const targets = alignSentence(block, {
    offset: 0,
    source: block.text,
    sourceTokens: ["\u2581The", "\u2581very", "\u2581red", "\u2581car"],
    targetTokens: ["\u2581CAR", "\u2581RED", "\u2581VERY", "\u2581THE"],
    alignment: [3, 2, 1, 0].map((i) => Float32Array.from([0, 1, 2, 3, 4], (c) => (c === i ? 1 : 0))),
  });
  assert.deepEqual(targets.map((t) => t.owner), [-1, 1, 0, -1]);
  const items = place(block, targets);
  assert.deepEqual(items, [{ text: "CAR " }, { element: 0, items: [{ element: 1, items: [{ text: "RED" }] }, { text: " VERY" }] }, { text: " THE" }]);
  assert.equal(layoutText(items), "CAR RED VERY THE");
});

test("an element whose words were dropped keeps the piece that attends to it most; an empty one goes by position", () => {
  const block = { text: "Go home now", elements: [{ parent: -1, start: 3, end: 7 }, { parent: -1, start: 7, end: 7, empty: true }] };
  // "home" is aligned with no piece, but the second piece looks at it most.
  const targets = [
    { text: "GEH", source: 0, owner: -1, mass: [0.1, 0] },
    { text: " NACH", source: 8, owner: -1, mass: [0.6, 0] },
    { text: " JETZT", source: 8, owner: -1, mass: [0.2, 0] },
  ];
  const items = place(block, targets);
  assert.deepEqual(items, [{ text: "GEH " }, { element: 0, items: [{ text: "NACH" }] }, { element: 1 }, { text: " JETZT" }]);
});

test("a stray piece does not stretch an element over the words between", () => {
  const block = { text: "a b c d e", elements: [{ parent: -1, start: 0, end: 3 }] };
  const owners = [0, 0, -1, -1, -1, 0];
  const targets = owners.map((owner, j) => ({ text: ` w${j}`, source: j, owner, mass: [owner === 0 ? 1 : 0] }));
  const items = place(block, targets);
  assert.deepEqual(items, [{ element: 0, items: [{ text: "w0 w1" }] }, { text: " w2 w3 w4 w5" }]);
});

test("translateElement moves the original elements, keeps their listeners, and restore() is exact", async () => {
  const doc = page(`<article><h2>Big news</h2><p id="p">The <a href="/x" class="k">red</a> car <em>drives <b>fast</b></em>. It stops.</p>
    <p>Run <code>npm test</code> first.</p><img alt="A cat" src="c.png"><pre>kept as is</pre></article>`);
  const before = doc.body.innerHTML;
  const link = doc.querySelector("a");
  const bold = doc.querySelector("b");
  let clicks = 0;
  link.addEventListener("click", () => clicks++);
  const model = reverser();
  const translation = translateElement(doc.querySelector("article"), { to: "de", translator: model });
  await translation.ready;
  assert.deepEqual(translation.progress, { translated: 4, total: 4 });
  const p = doc.getElementById("p");
  assert.equal(p.textContent, "FAST. DRIVES CAR RED THE STOPS. IT");
  assert.equal(p.innerHTML, '<em><b>FAST</b>. DRIVES</em> CAR <a href="/x" class="k">RED</a> THE STOPS. IT');
  assert.equal(p.getAttribute("lang"), "de");
  // The same nodes, moved.
  assert.equal(p.querySelector("a"), link);
  assert.equal(p.querySelector("b"), bold);
  link.dispatchEvent(new doc.defaultView.Event("click"));
  assert.equal(clicks, 1);
  // <code> kept, the attribute translated, <pre> untouched.
  assert.equal(doc.querySelector("code").textContent, "npm test");
  assert.equal(doc.querySelector("img").getAttribute("alt"), "CAT A");
  assert.equal(doc.querySelector("pre").textContent, "kept as is");
  // One request for all four blocks.
  assert.equal(model.calls.length, 1);
  translation.restore();
  assert.equal(doc.body.innerHTML, before);
  assert.equal(doc.querySelector("a"), link);
});

test("a block added after the start is translated; the translation's own nodes are not", async () => {
  const doc = page(`<main><p>First one.</p></main>`);
  const main = doc.querySelector("main");
  const model = reverser();
  const translation = translateElement(main, { to: "de", translator: model });
  await translation.ready;
  assert.equal(main.innerHTML, '<p lang="de">ONE. FIRST</p>');
  const added = doc.createElement("p");
  added.innerHTML = "Added <i>later</i> on.";
  main.append(added);
  // linkedom delivers mutation records on a later task.
  await new Promise((r) => setTimeout(r, 20));
  await translation.idle();
  assert.equal(added.innerHTML, "ON. <i>LATER</i> ADDED");
  assert.equal(model.calls.length, 2);
  translation.restore();
  assert.equal(main.innerHTML, "<p>First one.</p><p>Added <i>later</i> on.</p>");
});

test("loose text beside blocks is translated in place, and restored in place", async () => {
  const doc = page(`<div id="d">Before <b>this</b><p>Inner text.</p>After that</div>`);
  const d = doc.getElementById("d");
  const before = d.innerHTML;
  const translation = translateElement(d, { to: "de", translator: reverser() });
  await translation.ready;
  assert.equal(d.innerHTML, '<b>THIS</b> BEFORE<p lang="de">TEXT. INNER</p>THAT AFTER');
  translation.restore();
  assert.equal(d.innerHTML, before);
});

test("through a pivot the elements are placed by position", async () => {
  const first = reverser();
  const second = reverser();
  const [items] = await translateBlocks([{ engine: first, token: null }, { engine: second, token: ">>deu<<" }], [{ text: "a <b> c", elements: [] }].map(() => ({ text: "one two three", elements: [{ parent: -1, start: 0, end: 3 }] })), undefined);
  // Reversed twice: the words in their order, the element on the first.
  assert.deepEqual(items, [{ element: 0, items: [{ text: "ONE" }] }, { text: " TWO THREE" }]);
  assert.equal(second.calls[0], "THREE TWO ONE");
});

test("bad options get one clear error", () => {
  const doc = page("<p>x</p>");
  assert.throws(() => translateElement(doc.querySelector("p"), { to: "German" }), /options.to must be a language tag/);
  assert.throws(() => translateElement(null, { to: "de" }), /root must be an element/);
  const orphan = parseHTML("<html><body><p>x</p></body></html>").document.querySelector("p");
  assert.throws(() => translateElement(orphan, { to: "de" }), /options.from is needed/);
});

test("an element ends at a word's end, and before punctuation its own text lacks", () => {
  const block = { text: "to the lake.", elements: [{ parent: -1, start: 7, end: 11 }] };
  // zum Se|e . : both pieces of "See" and the period look at "lake".
  const targets = alignSentence(block, {
    offset: 0,
    source: block.text,
    sourceTokens: ["\u2581to", "\u2581the", "\u2581lake", "."],
    targetTokens: ["\u2581zum", "\u2581Se", "e", "."],
    alignment: [
      [0.9, 0.1, 0, 0, 0],
      [0, 0, 1, 0, 0],
      [0, 0.6, 0.4, 0, 0],
      [0, 0, 0.7, 0.3, 0],
    ].map((r) => Float32Array.from(r)),
  });
  assert.deepEqual(targets.map((t) => t.text), [" zum", " See", "."]);
  assert.deepEqual(place(block, targets), [{ text: "zum " }, { element: 0, items: [{ text: "See" }] }, { text: "." }]);
});
