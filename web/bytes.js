// @ts-check
// Byte helpers the worker and the hub client share: a file's sha256, a streamed body read
// into one array, and the framing of the entries they store in the Cache API.

/**
 * The SHA-256 of `bytes` as lowercase hex, or null where the Web Crypto API is missing
 * (a page that is not a secure context: the wasm loader checks the sums anyway).
 * @param {BufferSource} bytes
 * @returns {Promise<string | null>}
 */
export async function sha256(bytes) {
  if (!globalThis.crypto?.subtle) return null;
  const digest = await globalThis.crypto.subtle.digest("SHA-256", bytes);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * The chunks, joined into one array.
 * @param {Uint8Array[]} chunks
 * @returns {Uint8Array<ArrayBuffer>}
 */
export function concat(chunks) {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/**
 * A response's body, read as it streams in: `onChunk(received)` after each chunk with the
 * bytes received so far (for progress). A body that breaks off rejects with the stream's
 * error.
 * @param {Response} response
 * @param {(received: number) => void} [onChunk]
 * @returns {Promise<Uint8Array<ArrayBuffer>>}
 */
export async function readBody(response, onChunk = () => {}) {
  if (!response.body) return new Uint8Array(await response.arrayBuffer());
  const chunks = [];
  let received = 0;
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    received += value.length;
    onChunk(received);
  }
  return concat(chunks);
}

/**
 * One stored entry: the head's length (4 bytes, little-endian), the head, then the rest.
 * @param {Uint8Array} head
 * @param {...Uint8Array} rest
 * @returns {Uint8Array<ArrayBuffer>}
 */
export function frame(head, ...rest) {
  const out = concat([new Uint8Array(4), head, ...rest]);
  new DataView(out.buffer).setUint32(0, head.length, true);
  return out;
}

/**
 * The head and the rest of an entry `frame` wrote (views, not copies), or null where
 * `bytes` is too short to be one.
 * @template {ArrayBufferLike} B
 * @param {Uint8Array<B>} bytes
 * @returns {{ head: Uint8Array<B>, rest: Uint8Array<B> } | null}
 */
export function unframe(bytes) {
  if (bytes.length < 4) return null;
  const n = new DataView(bytes.buffer, bytes.byteOffset, bytes.length).getUint32(0, true);
  if (4 + n > bytes.length) return null;
  return { head: bytes.subarray(4, 4 + n), rest: bytes.subarray(4 + n) };
}

/**
 * An error's message, whatever was thrown.
 * @param {unknown} e
 * @returns {string}
 */
export const errorMessage = (e) => (e instanceof Error ? e.message : String(e));
