// The JavaScript API given bad input: every bad call is a rejected promise with a
// TransduceError that says what is wrong, and the worker keeps working: the next good call
// gives native's translation.
import { assertEqual, step, test } from "../harness.mjs";
import * as references from "../references.mjs";

export const name = "api";

/** On the session's page (backend=cpu), the origin /transduce.js is imported from. */
export const badInput = step(name, async ({ page }) => {
  const expected = await references.expected();
  const run = (body, arg) => page.evaluate(body, arg);
  const check = (found, want) => {
    const wrong = Object.entries(want)
      .filter(([name, pattern]) => !(found[name]?.startsWith("TransduceError: ") && pattern.test(found[name])))
      .map(([name, pattern]) => `${name}: expected a TransduceError matching ${pattern}, got ${found[name]}`);
    if (wrong.length) throw new Error(wrong.join("\n"));
  };
  await test("api: wrong types, bad options and huge inputs are rejected with a message; the worker stays usable", async () => {
    const found = await run(async ({ model, sentence }) => {
      const { Transduce } = await import("/transduce.js");
      const t = await Transduce.load(`/models/${model}/`, { backend: "cpu" });
      const cases = {
        number: () => t.translate(42),
        object: () => t.translate({ text: sentence }),
        emptyTextBadBeam: () => t.translate("", { beam: 0 }),
        beamString: () => t.translate(sentence, { beam: "four" }),
        beamHuge: () => t.translate(sentence, { beam: 1e9 }),
        alphaNegative: () => t.translate(sentence, { alpha: -1 }),
        unknownOption: () => t.translate(sentence, { bogus: 1 }),
        optionsString: () => t.translate(sentence, "fast"),
        optionsArray: () => t.translate(sentence, [1]),
        functionOption: () => t.translate(sentence, { beam: () => 4 }),
        onPartialNotFunction: () => t.translate(sentence, { onPartial: 1 }),
        huge: () => t.translate("word ".repeat(40_000)),
        parseOnTranslator: () => t.parse("The dog barks ."),
        attentionNothing: () => t.attention(),
        attentionBadIds: () => t.attention({ sourceIds: "abc", targetIds: [1] }),
        attentionOutOfVocab: () => t.attention({ sourceIds: [4_000_000_000], targetIds: [] }),
      };
      const out = {};
      for (const [name, call] of Object.entries(cases)) {
        try {
          await call();
          out[name] = "resolved";
        } catch (e) {
          out[name] = `${e.name}: ${e.message}`;
        }
      }
      out.after = (await t.translate(sentence, { beam: 1 })).text;
      t.free();
      return out;
    }, { model: expected.model, sentence: expected.sentence });
    check(found, {
      number: /text must be a string, not number/,
      object: /text must be a string, not object/,
      emptyTextBadBeam: /beam/,
      beamString: /options: .*invalid type/,
      beamHuge: /beam must be between 1 and 64/,
      alphaNegative: /alpha must be a non-negative number/,
      unknownOption: /unknown field `bogus`/,
      optionsString: /options must be an object, not string/,
      optionsArray: /options must be an object, not an array/,
      functionOption: /cannot send translate\(\) its arguments/,
      onPartialNotFunction: /onPartial must be a function/,
      huge: /200000 characters; at most 100000/,
      parseOnTranslator: /call translate\(\)/,
      attentionNothing: /attention\(\) takes a sentence/,
      attentionBadIds: /sourceIds must be a list of token ids/,
      attentionOutOfVocab: /vocabulary/,
    });
    assertEqual(found.after, expected.greedy, "translation after the bad calls");
  });
  if (expected.channel) {
    await test("api: a channel model the wrong way round, a bad weight or a channel option without one are refused", async () => {
      const found = await run(async ({ model, reverse, sentence }) => {
        const { Transduce } = await import("/transduce.js");
        const out = {};
        const attempt = async (name, call) => {
          try {
            await call();
            out[name] = "resolved";
          } catch (e) {
            out[name] = `${e.name}: ${e.message}`;
          }
        };
        await attempt("sameDirection", () => Transduce.load(`/models/${model}/`, { backend: "cpu", channel: `/models/${model}/` }));
        await attempt("weightString", () => Transduce.load(`/models/${model}/`, { backend: "cpu", channel: `/models/${reverse}/`, channelWeight: "0.3" }));
        await attempt("weightAlone", () => Transduce.load(`/models/${model}/`, { backend: "cpu", channelWeight: 0.3 }));
        await attempt("channelNumber", () => Transduce.load(`/models/${model}/`, { backend: "cpu", channel: 7 }));
        await attempt("missingReverse", () => Transduce.load(`/models/${model}/`, { backend: "cpu", channel: "/models/no-such-model/" }));
        const t = await Transduce.load(`/models/${model}/`, { backend: "cpu" });
        await attempt("noChannelLoaded", () => t.translate(sentence, { channel: true }));
        await attempt("channelNotBoolean", () => t.translate(sentence, { channel: "yes" }));
        t.free();
        const c = await Transduce.load(`/models/${model}/`, { backend: "cpu", channel: `/models/${reverse}/` });
        out.weight = c.channel.weight;
        out.recorded = c.config.channel.weight;
        const plain = await c.translate(sentence, { channel: false });
        out.plainFlag = plain.channel;
        out.checkedFlag = (await c.translate(sentence)).channel;
        c.free();
        return out;
      }, { model: expected.model, reverse: expected.channel.id, sentence: expected.sentence });
      check(found, {
        sameDirection: /needs a model from/,
        weightString: /channelWeight must be a finite number/,
        weightAlone: /channelWeight needs options.channel/,
        channelNumber: /options.channel needs a bundle URL/,
        missingReverse: /no-such-model.*HTTP 404/,
        noChannelLoaded: /no reverse model was loaded/,
        channelNotBoolean: /channel must be true or false/,
      });
      assertEqual(found.weight, found.recorded, "the weight config.json records");
      assertEqual([found.plainFlag, found.checkedFlag].join(), "false,true", "result.channel");
    });
  }
  await test("api: bundles that are not bundles, or whose config lies, are refused with a message", async () => {
    const found = await run(async ({ model, sentence }) => {
      const { Transduce } = await import("/transduce.js");
      const file = async (name) => new Uint8Array(await (await fetch(`/models/${model}/${name}`)).arrayBuffer());
      const [configBytes, tokenizer, weights] = await Promise.all(
        ["config.json", "tokenizer.json", "model.safetensors"].map(file),
      );
      const config = JSON.parse(new TextDecoder().decode(configBytes));
      const lying = (edit) => {
        const c = structuredClone(config);
        edit(c);
        return { config: new TextEncoder().encode(JSON.stringify(c)), tokenizer, weights };
      };
      const cpu = { backend: "cpu" };
      const cases = {
        notABundle: () => Transduce.load(42),
        wrongTypes: () => Transduce.load({ config: "x", tokenizer: 1, weights: 2 }, cpu),
        unknownBackend: () => Transduce.load(`/models/${model}/`, { backend: "tpu" }),
        brokenJson: () => Transduce.load({ config: new TextEncoder().encode('{"format": 1,'), tokenizer, weights }, cpu),
        // About 3·10⁸ parameters (1.2 GB as f32): counted and refused, never allocated.
        hugeSizes: () => Transduce.load(lying((c) => { c.model.d_model = 4096; c.model.vocab_size = 65536; }), cpu),
        overflowingSizes: () => Transduce.load(lying((c) => { c.model.n_layers = 2 ** 53; c.model.d_model = 2 ** 40; }), cpu),
        moreLayers: () => Transduce.load(lying((c) => { c.model.n_layers += 1; }), cpu),
        smallVocabulary: () => Transduce.load(lying((c) => { c.model.vocab_size = 10; }), cpu),
        hugeBeam: () => Transduce.load(lying((c) => { c.decoding.beam = 1e9; }), cpu),
        truncatedWeights: () => Transduce.load({ config: configBytes, tokenizer, weights: weights.subarray(0, 1000) }, cpu),
      };
      const out = {};
      for (const [name, call] of Object.entries(cases)) {
        try {
          (await call()).free();
          out[name] = "resolved";
        } catch (e) {
          out[name] = `${e.name}: ${e.message}`;
        }
      }
      const t = await Transduce.load({ config: configBytes, tokenizer, weights }, cpu);
      out.after = (await t.translate(sentence, { beam: 1 })).text;
      t.free();
      return out;
    }, { model: expected.model, sentence: expected.sentence });
    check(found, {
      notABundle: /needs a bundle URL/,
      wrongTypes: /config: expected an ArrayBuffer or Uint8Array/,
      unknownBackend: /unknown backend "tpu"/,
      brokenJson: /line 1 column/,
      hugeSizes: /far more than/,
      // wasm32's usize is 32 bits: 2^53 is not one.
      overflowingSizes: /more parameters than this machine can count|expected usize/,
      moreLayers: /tensor/,
      smallVocabulary: /vocab_size/,
      hugeBeam: /decoding\.beam/,
      truncatedWeights: /sha256|checksum/,
    });
    assertEqual(found.after, expected.greedy, "translation of a good bundle after the bad ones");
  });
});
