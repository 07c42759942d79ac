#!/usr/bin/env python3
"""A transduce bundle as a CTranslate2 model directory, float32, through CTranslate2's own
specification API: the post-LN encoder-decoder with bias-free attention projections (q/k/v
fused for self-attention, k/v for encoder-decoder attention), LayerNorm ε 1e-5, ReLU
feed-forward, one embedding matrix shared by encoder, decoder and output projection,
embeddings scaled by √d_model, and the interleaved sinusoid table of §3.5 (PE(pos,2i) =
sin, PE(pos,2i+1) = cos, positions from 0) given explicitly, since CT2's built-in one puts
sin and cos in halves and starts at 1.

The `transduce` binary carries this file (a recipe's `ct2 = true` export stage writes it
out and runs it: recipe/kind/export.rs beside it), and scripts/ct2.py imports it for
its `export`, `check` and `race`:

    python3 ct2_export.py --bundle B --out DIR [--positions 1024]

It needs ctranslate2, tokenizers, safetensors and numpy.
"""
import argparse
import json
import os
import sys

import numpy as np

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"


# --- the bundle -------------------------------------------------------------------------


class Bundle:
    def __init__(self, path):
        from tokenizers import Tokenizer

        self.path = path
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            self.config = json.load(f)
        self.model = self.config["model"]
        self.decoding = {"beam": 4, "alpha": 0.6, "maxExtra": 50, **self.config.get("decoding", {})}
        self.tokenizer = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
        n = self.model["vocab_size"]
        if self.tokenizer.get_vocab_size(True) > n:
            sys.exit("the tokenizer has more tokens than the model's vocab_size")
        # Token strings in id order; ids the tokenizer lacks get placeholder names.
        self.tokens = []
        for i in range(n):
            t = self.tokenizer.id_to_token(i)
            self.tokens.append(t if t is not None else f"<unused{i}>")
        if len(set(self.tokens)) != n:
            sys.exit("the vocabulary has duplicate token strings: CT2 maps tokens by string")
        for i, t in enumerate((PAD, BOS, EOS, UNK)):
            if self.tokens[i] != t:
                sys.exit(f"expected {t} at id {i}, found {self.tokens[i]!r}")
        self.token_id = {t: i for i, t in enumerate(self.tokens)}
        # Imported Marian bundles (`transduce import`): sources closed by EOS, beams ranked
        # by |Y|^α. Their CT2 model comes from the original folder (ct2-transformers-converter).
        self.source_eos = self.model.get("source_eos", False)
        self.length_norm = self.decoding.get("lengthNorm", "gnmt")

    def imported_layout(self):
        """The fields of an imported Marian layout this bundle has (none for our own)."""
        m = self.model
        return [f for f, on in [("activation", m.get("activation", "relu") != "relu"),
                                ("attention_bias", m.get("attention_bias", False)),
                                ("output_bias", m.get("output_bias", False)),
                                ("source_eos", self.source_eos)] if on]


def sinusoid_table(positions, d_model):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...), pos from 0: the
    table of transduce's embedding.rs, computed in f64 and stored as f32 like it."""
    pos = np.arange(positions, dtype=np.float64)[:, None]
    i = (np.arange(d_model) // 2).astype(np.float64)[None, :]
    angle = pos / np.power(10000.0, 2.0 * i / d_model)
    table = np.where(np.arange(d_model)[None, :] % 2 == 0, np.sin(angle), np.cos(angle))
    return table.astype(np.float32)


# --- export ---------------------------------------------------------------------------


def export(args):
    from ctranslate2.specs import common_spec, transformer_spec
    from safetensors.numpy import load_file

    bundle = Bundle(args.bundle)
    m = bundle.model
    problems = []
    if bundle.imported_layout():
        sys.exit(f"{args.bundle}: an imported Marian bundle ({', '.join(bundle.imported_layout())}); "
                 "convert the original Hugging Face folder with CTranslate2's own converter instead: "
                 "ct2-transformers-converter --model DIR --quantization int8 --output_dir OUT")
    if m.get("positional", "sinusoid") != "sinusoid":
        problems.append(f"positional {m['positional']!r} (only sinusoid is exported)")
    if not m.get("share_embeddings", True):
        problems.append("untied embeddings (only shared ones are exported)")
    if m.get("word_focus"):
        problems.append("word_focus models")
    if m["d_k"] * m["n_heads"] != m["d_model"] or m["d_v"] != m["d_k"]:
        problems.append("d_k·n_heads != d_model or d_v != d_k")
    if problems:
        sys.exit("cannot export: " + "; ".join(problems))

    stored = load_file(os.path.join(args.bundle, "model.safetensors"))
    # An int8 bundle's matrices are q (I8) with per-row scales beside them (`name_scale`):
    # widened to q·scale, which CT2's int8 compute type quantizes back to the same q.
    w = {}
    for k, v in stored.items():
        if k.endswith("_scale"):
            continue
        v = v.astype(np.float32)
        if k + "_scale" in stored:
            v = v * stored[k + "_scale"].astype(np.float32)[:, None]
        w[k] = v
    used = set()

    def get(name):
        used.add(name)
        return w[name]

    # A student's decoder may be shallower than its encoder (`decoder_layers`).
    n = m["n_layers"]
    n_dec = m.get("decoder_layers") or n
    spec = transformer_spec.TransformerSpec.from_config(
        (n, n_dec),
        m["n_heads"],
        pre_norm=False,
        activation=common_spec.Activation.RELU,
    )
    embedding = get("embedding.weight")
    table = sinusoid_table(args.positions, m["d_model"])

    def norm(s, prefix):
        s.gamma = get(prefix + ".weight")
        s.beta = get(prefix + ".bias")

    def linear(s, prefix):
        s.weight = get(prefix + ".weight")
        s.bias = get(prefix + ".bias")

    def ffn(s, prefix):
        linear(s.linear_0, prefix + ".ffn.fc1")
        linear(s.linear_1, prefix + ".ffn.fc2")
        norm(s.layer_norm, prefix + ".ffn_norm")

    for stack, s in (("encoder", spec.encoder), ("decoder", spec.decoder)):
        emb = s.embeddings[0] if isinstance(s.embeddings, list) else s.embeddings
        emb.weight = embedding
        s.scale_embeddings = True
        s.position_encodings.encodings = table
        for i, layer in enumerate(s.layer):
            p = f"{stack}.layers.{i}"
            a = p + ".self_attn"
            # Attention projections have no bias: CT2's LinearSpec.bias is optional.
            layer.self_attention.linear[0].weight = np.concatenate(
                [get(a + ".q.weight"), get(a + ".k.weight"), get(a + ".v.weight")])
            layer.self_attention.linear[1].weight = get(a + ".o.weight")
            norm(layer.self_attention.layer_norm, p + ".self_attn_norm")
            if stack == "decoder":
                c = p + ".cross_attn"
                layer.attention.linear[0].weight = get(c + ".q.weight")
                layer.attention.linear[1].weight = np.concatenate(
                    [get(c + ".k.weight"), get(c + ".v.weight")])
                layer.attention.linear[2].weight = get(c + ".o.weight")
                norm(layer.attention.layer_norm, p + ".cross_attn_norm")
            ffn(layer.ffn, p)
    # Logits = h · Eᵀ: the embedding matrix [vocab, d] is the projection's [out, in] weight
    # (no bias). CT2 stores it once and aliases the other two uses.
    spec.decoder.projection.weight = embedding

    unused = sorted(set(w) - used)
    if unused:
        sys.exit(f"tensors not exported: {unused}")

    spec.config.layer_norm_epsilon = 1e-5  # burn's LayerNorm and transduce's host decoder (host/rows.rs)
    spec.config.bos_token = BOS
    spec.config.eos_token = EOS
    spec.config.unk_token = UNK
    spec.config.decoder_start_token = BOS
    spec.config.add_source_bos = False
    spec.config.add_source_eos = False
    spec.register_source_vocabulary(bundle.tokens)
    spec.register_target_vocabulary(bundle.tokens)
    spec.validate()
    spec.optimize(quantization="float32")
    os.makedirs(args.out, exist_ok=True)
    for name in ("model.bin", "config.json", "shared_vocabulary.json",
                 "source_vocabulary.json", "target_vocabulary.json"):
        if os.path.exists(os.path.join(args.out, name)):
            os.remove(os.path.join(args.out, name))
    spec.save(args.out)
    print(f"wrote {args.out}: {n}+{n_dec} layers, d_model {m['d_model']}, {m['n_heads']} heads, "
          f"vocab {len(bundle.tokens)}, {args.positions} positions, float32")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--positions", type=int, default=1024,
                    help="rows of the position table: longest source + max_extra must fit")
    export(ap.parse_args())


if __name__ == "__main__":
    main()
