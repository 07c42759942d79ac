// The hub's names and addresses (web/hub.js): pure functions, no browser needed.
import assert from "node:assert/strict";
import { test } from "node:test";
import { HubError, listingUrl, parseReference, referenceText, resolveUrl, retryAfter } from "../../web/hub.js";

test("an hf: name is an organisation, a name and an optional revision", () => {
  assert.deepEqual(parseReference("hf:Helsinki-NLP/opus-mt-en-de"), { org: "Helsinki-NLP", name: "opus-mt-en-de", revision: null });
  assert.deepEqual(parseReference("hf:Helsinki-NLP/opus-mt-tc-big-en-fr@refs/pr/3"), {
    org: "Helsinki-NLP",
    name: "opus-mt-tc-big-en-fr",
    revision: "refs/pr/3",
  });
  assert.equal(referenceText(parseReference("hf:a/b@v1.0")), "hf:a/b@v1.0");
});

test("anything that is not an hf: name is a bundle URL (null)", () => {
  assert.equal(parseReference("https://example.org/models/en-de/"), null);
  assert.equal(parseReference(undefined), null);
});

test("a malformed name is one HubError with code bad-name, naming the input", () => {
  for (const bad of ["hf:opus-mt-en-de", "hf:a/b/c", "hf:a/..", "hf:a b/c", "hf:a/b@", "hf:a/b@x//y", "hf:a/b@../main"]) {
    assert.throws(
      () => parseReference(bad),
      (e) => e instanceof HubError && e.code === "bad-name" && e.message.includes(JSON.stringify(bad)),
      bad,
    );
  }
});

test("files resolve at the revision (main by default), listings ask for blobs", () => {
  const ref = parseReference("hf:Helsinki-NLP/opus-mt-en-de");
  assert.equal(resolveUrl(ref, "http://127.0.0.1:9/", "config.json"), "http://127.0.0.1:9/Helsinki-NLP/opus-mt-en-de/resolve/main/config.json");
  assert.equal(listingUrl(ref, undefined), "https://huggingface.co/api/models/Helsinki-NLP/opus-mt-en-de?blobs=true");
  const pr = parseReference("hf:Helsinki-NLP/opus-mt-en-de@refs/pr/3");
  assert.equal(resolveUrl(pr, "https://hub.example", "vocab.json"), "https://hub.example/Helsinki-NLP/opus-mt-en-de/resolve/refs%2Fpr%2F3/vocab.json");
  assert.equal(listingUrl(pr, "https://hub.example"), "https://hub.example/api/models/Helsinki-NLP/opus-mt-en-de/revision/refs%2Fpr%2F3?blobs=true");
});

test("a 429's wait comes from Retry-After, else the RateLimit header's t=", () => {
  const h = (o) => new Headers(o);
  assert.equal(retryAfter(h({ "retry-after": "42", ratelimit: '"api";r=0;t=7' })), 42);
  assert.equal(retryAfter(h({ ratelimit: '"api";r=0;t=7' })), 7);
  assert.equal(retryAfter(h({ "retry-after": "0" })), 0);
  assert.equal(retryAfter(h({ "retry-after": "soon" })), null);
  assert.equal(retryAfter(h({})), null);
});

test("the test hub's pull-request revision, rename and gate reach the listing as the hub's do", async () => {
  const { startHub, GRANTED_TOKEN } = await import("../support/test-hub.mjs");
  const { fetchListing } = await import("../../web/hub.js");
  const hub = await startHub();
  try {
    const main = await fetchListing(parseReference("hf:Helsinki-NLP/opus-mt-en-de"), hub.url);
    const pr = await fetchListing(parseReference("hf:Helsinki-NLP/opus-mt-en-de@refs/pr/1"), hub.url);
    assert.notEqual(pr.commit, main.commit, "refs/pr/1 is another commit");
    assert.notEqual(pr.files.get("model.safetensors").sha256, main.files.get("model.safetensors").sha256);
    await assert.rejects(fetchListing(parseReference("hf:Helsinki-NLP/opus-mt-en-de@refs/pr/9"), hub.url), (e) => e.code === "not-found" && e.message.includes("refs/pr/9"));
    // A rename: the relative 307 is followed, to the new name's commit.
    const renamed = await fetchListing(parseReference("hf:Helsinki-NLP/opus-mt-en-de-renamed-from"), hub.url);
    assert.equal(renamed.commit, main.commit);
    const gated = parseReference("hf:test/gated-en-de");
    await assert.rejects(fetchListing(gated, hub.url), (e) => e.code === "gated" && e.message.includes("accept its conditions") && e.message.includes("options.token"));
    await assert.rejects(fetchListing(gated, hub.url, { token: "hf_someoneelse" }), (e) => e.code === "gated" && e.message.includes("not been granted"));
    assert.ok((await fetchListing(gated, hub.url, { token: GRANTED_TOKEN })).commit);
  } finally {
    await hub.close();
  }
});
