// The byte helpers the worker and the hub client share (web/bytes.js, web/store.js).
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { concat, errorMessage, frame, readBody, sha256, unframe } from "../../web/bytes.js";
import { openCache } from "../../web/store.js";

test("sha256 is the hex digest node:crypto computes", async () => {
  for (const text of ["", "abc", "é".repeat(1000)]) {
    const bytes = new TextEncoder().encode(text);
    assert.equal(await sha256(bytes), createHash("sha256").update(bytes).digest("hex"));
  }
  // FIPS 180-2's first example.
  assert.equal(await sha256(new TextEncoder().encode("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
});

test("concat joins in order; nothing gives an empty array", () => {
  assert.deepEqual([...concat([Uint8Array.of(1, 2), new Uint8Array(0), Uint8Array.of(3)])], [1, 2, 3]);
  assert.equal(concat([]).length, 0);
});

test("a framed entry unframes to its head and rest, as views", () => {
  const head = new TextEncoder().encode('{"a":1}');
  const framed = frame(head, Uint8Array.of(9, 8), Uint8Array.of(7));
  assert.equal(framed.length, 4 + head.length + 3);
  // The head's length, little-endian, first: the format entries already stored use.
  assert.deepEqual([...framed.subarray(0, 4)], [head.length, 0, 0, 0]);
  const { head: h, rest } = unframe(framed);
  assert.deepEqual(h, head);
  assert.deepEqual([...rest], [9, 8, 7]);
  assert.equal(rest.buffer, framed.buffer);
  // At an offset inside a larger buffer, as a Response's bytes may be.
  const inner = concat([Uint8Array.of(0xff, 0xff), framed]).subarray(2);
  assert.deepEqual([...unframe(inner).rest], [9, 8, 7]);
});

test("what cannot be an entry unframes to null", () => {
  assert.equal(unframe(new Uint8Array(3)), null);
  assert.equal(unframe(Uint8Array.of(10, 0, 0, 0, 1, 2)), null);
  assert.deepEqual([...unframe(Uint8Array.of(0, 0, 0, 0)).rest], []);
});

test("readBody reads a streamed body whole and reports the bytes so far", async () => {
  const parts = [Uint8Array.of(1, 2, 3), Uint8Array.of(4), Uint8Array.of(5, 6)];
  const stream = new ReadableStream({
    start(c) {
      for (const p of parts) c.enqueue(p);
      c.close();
    },
  });
  const seen = [];
  const bytes = await readBody(new Response(stream), (n) => seen.push(n));
  assert.deepEqual([...bytes], [1, 2, 3, 4, 5, 6]);
  assert.deepEqual(seen, [3, 4, 6]);
});

test("a body that breaks off rejects with the stream's error", async () => {
  let sent = false;
  const stream = new ReadableStream({
    pull(c) {
      if (!sent) {
        sent = true;
        c.enqueue(Uint8Array.of(1));
      } else {
        c.error(new Error("connection reset"));
      }
    },
  });
  const seen = [];
  await assert.rejects(readBody(new Response(stream), (n) => seen.push(n)), /connection reset/);
  assert.deepEqual(seen, [1]);
});

test("errorMessage takes an Error's message and anything else as text", () => {
  assert.equal(errorMessage(new TypeError("bad")), "bad");
  assert.equal(errorMessage("plain"), "plain");
  assert.equal(errorMessage(42), "42");
});

test("openCache is null where there is no Cache API or it is turned off", async () => {
  assert.equal(typeof caches, "undefined");
  assert.equal(await openCache("x"), null);
  globalThis.caches = { open: async (name) => ({ name }) };
  try {
    assert.deepEqual(await openCache("x"), { name: "x" });
    assert.equal(await openCache("x", false), null);
    globalThis.caches = { open: async () => { throw new DOMException("denied", "SecurityError"); } };
    assert.equal(await openCache("x"), null);
  } finally {
    delete globalThis.caches;
  }
});
