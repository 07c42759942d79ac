#!/usr/bin/env python3
"""Builds the Hugging Face Marian (OPUS-MT) reference fixtures in
tests/fixtures/marian/: what `transduce import` and its tests are held to. Run once by
hand, never in CI (CI has no Python or torch; the outputs are committed).

What it writes (tests/fixtures/marian/README.md describes every file):
- source.spm / target.spm: SentencePiece unigram models (English / German, 320 pieces
  each, the default nmt_nfkc normalizer) trained on Tatoeba text (CC-BY 2.0 FR);
- swish/ and relu/: tiny MarianMTModels in the hub's folder form (config.json,
  model.safetensors, generation_config.json, source.spm, target.spm, vocab.json,
  tokenizer_config.json, README.md), d_model 32, 2+2 layers, 4 heads, FFN 64, 64
  positions, shared and tied embeddings, a random nonzero final_logits_bias, trained
  briefly to copy (swish) or reverse (relu) the source's pieces;
- tokenization.json: MarianTokenizer's ids and pieces for the source strings (and the
  target-side ids of German strings);
- <model>/reference.json and <model>/logits.safetensors: `generate` outputs, greedy and
  beam 4, and teacher-forced logits.
- student/: a swish model of the 2020 layout with the tiny students' depths (6 encoder
  layers, 2 decoder layers, as opus-mt_tiny_*), trained to copy; `--student` writes only
  this folder.
- tc/: a model as OPUS-MT-train has built them since 2021 (the opus-mt-tc-* family, and
  since 2023 with byte fallback): SentencePiece models trained with --byte_fallback (600
  pieces each, so the 256 byte pieces among them), vocab.json joined from both models'
  pieces and sorted (lib/train.mk's `cut -f1 … | sort -u`, so `<s>`, `</s>` and `<unk>`
  are ordinary rows among the pieces, and the end id is not 0), `<pad>` appended last, a
  ReLU model (as tc-big) trained to copy; with its own tokenization.json (source strings,
  and decoding of byte pieces, invalid sequences included, by MarianTokenizer) and
  reference.json. `--tc` writes only this folder.
- bible/: a model of many targets, as opus-mt-tc-bible-*: the 2020 fixtures' tokenizer
  and vocabulary (`>>deu<<`, `>>nld<<` among its rows), a ReLU model trained to copy its
  source's pieces after `>>deu<<` and to reverse them after `>>nld<<`, its card naming en,
  de and nl; `generate` outputs for sentences under each token. `--bible` writes only this
  folder.
With --opus-size DIR it writes, instead (--size tiny or big: the tiny students' shapes or
tc-big's, the same vocabulary), a random model with opus-mt-en-de's shapes (d 512,
6+6 layers, 8 heads, FFN 2048, vocab 58,101, swish, tied) to DIR, for benchmarks (not
committed).

Pinned versions (what built the committed fixtures; Python 3.11.7, CPU):
    transformers 5.24.0, torch 2.15.0, sentencepiece 0.2.3, safetensors 0.8.0,
    numpy 2.4.6, protobuf 7.36.2, sacremoses 0.2.0 (MarianTokenizer warns without it; it
    does not change token ids)

To run it:
    python3.11 -m venv /work/.venv-marian
    /work/.venv-marian/bin/pip install transformers==5.24.0 torch==2.15.0 \\
        sentencepiece==0.2.3 safetensors==0.8.0 numpy==2.4.6 protobuf==7.36.2 sacremoses==0.2.0
    /work/.venv-marian/bin/python scripts/marian-fixtures.py          # the fixtures
    /work/.venv-marian/bin/python scripts/marian-fixtures.py --opus-size /tmp/opus-size
It is deterministic (fixed seeds, one CPU thread): a rerun with the same versions writes
the same files.
"""
import argparse
import gzip
import io
import json
import random
import shutil
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import sentencepiece as spm
import torch
from safetensors.torch import save_file
from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList, MarianConfig, MarianMTModel, MarianTokenizer

REPO = Path(__file__).resolve().parent.parent
SEED = 76
SPM_VOCAB = 320
# Language codes as multilingual OPUS-MT vocabularies hold them (`>>deu<<` …), so the
# tokenizer's language-code handling has something to find.
LANGUAGE_CODES = [">>deu<<", ">>fra<<", ">>nld<<"]
OPUS_VOCAB = 58101

README_HEADER = """---
language:
- en
- de
tags:
- translation
license: cc-by-4.0
---

# transduce Marian fixture ({name})

{what}. Built by `scripts/marian-fixtures.py` for the transduce project's import tests
and benchmarks; it is not a translator.
"""


def lines(data, name):
    with gzip.open(data / name, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def train_spm(sentences, path, seed):
    """A unigram model with SentencePiece's defaults (nmt_nfkc, dummy prefix, extra
    whitespace removed), as OPUS-MT's are; one thread and a fixed sample so it is
    reproducible."""
    model = io.BytesIO()
    spm.set_random_generator_seed(seed)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=model,
        model_type="unigram",
        vocab_size=SPM_VOCAB,
        num_threads=1,
        # SentencePiece's own ids (<unk> 0, <s> 1, </s> 2) as OPUS-MT's .spm files have them.
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        minloglevel=2,
    )
    path.write_bytes(model.getvalue())


def spm_pieces(spm_dir):
    """What protobuf itself reads from the .spm files, for the Rust reader's test."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    out = {}
    for f in ("source.spm", "target.spm"):
        m = pb.ModelProto()
        m.ParseFromString((spm_dir / f).read_bytes())
        out[f] = {
            "normalizer": m.normalizer_spec.name,
            "charsmap_bytes": len(m.normalizer_spec.precompiled_charsmap),
            "pieces": [[p.piece, p.score, p.type] for p in m.pieces],
        }
    return out


def build_vocab(src_sp, tgt_sp, en, de, extra=0):
    """vocab.json as OPUS-MT's: `</s>` 0, `<unk>` 1, then every piece of either .spm (no
    `<s>`) in decreasing frequency in the encoded training text (marian-vocab's order),
    language codes among them, `<pad>` last (added by transformers' conversion)."""
    counts = Counter()
    for sp, text in ((src_sp, en), (tgt_sp, de)):
        for pieces in sp.encode(text, out_type=str):
            counts.update(pieces)
    pieces = set()
    for sp in (src_sp, tgt_sp):
        for i in range(sp.get_piece_size()):
            if not (sp.is_control(i) or sp.is_unknown(i)):
                pieces.add(sp.id_to_piece(i))
    # A language code prefixes every target line of a multilingual corpus: very frequent.
    for code in LANGUAGE_CODES:
        counts[code] = len(de)
        pieces.add(code)
    ordered = sorted(pieces, key=lambda p: (-counts[p], p))
    vocab = {"</s>": 0, "<unk>": 1}
    for p in ordered:
        vocab[p] = len(vocab)
    for i in range(extra):
        vocab[f"▁synthetic{i:05d}"] = len(vocab)
    vocab["<pad>"] = len(vocab)
    return vocab


def generation_config(pad):
    # opus-mt-en-de's generation_config.json, with this vocabulary's pad id; length_penalty
    # and early_stopping are not set there (transformers' defaults 1.0 and False apply).
    return GenerationConfig(
        bad_words_ids=[[pad]],
        bos_token_id=0,
        decoder_start_token_id=pad,
        eos_token_id=0,
        forced_eos_token_id=0,
        max_length=512,
        num_beams=4,
        pad_token_id=pad,
    )


def marian_config(vocab_size, activation, d_model, layers, heads, ffn, positions, decoder_layers=None):
    pad = vocab_size - 1
    return MarianConfig(
        vocab_size=vocab_size,
        decoder_vocab_size=vocab_size,
        d_model=d_model,
        encoder_layers=layers,
        decoder_layers=layers if decoder_layers is None else decoder_layers,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=ffn,
        decoder_ffn_dim=ffn,
        max_position_embeddings=positions,
        activation_function=activation,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        dropout=0.1,
        attention_dropout=0.0,
        activation_dropout=0.0,
        pad_token_id=pad,
        decoder_start_token_id=pad,
        eos_token_id=0,
        bos_token_id=0,
        forced_eos_token_id=0,
        architectures=["MarianMTModel"],
    )


def write_folder(model, tok, folder, name, activation, task, steps):
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)
    if task == "bible":
        what = (f"A tiny random MarianMTModel ({activation}), trained {steps} steps to copy its source's pieces "
                f"after >>deu<< and to reverse them after >>nld<<")
    elif task is None:
        what = f"A random, untrained MarianMTModel of OPUS-MT's shapes: {name}, {activation}"
    else:
        what = f"A tiny random MarianMTModel ({activation}), trained {steps} steps to {task} its source's pieces"
    (folder / "README.md").write_text(README_HEADER.format(name=name, what=what))


def task_target(ids, task):
    """The target of a source (ids ending in </s>): its pieces copied or reversed, then </s>."""
    body = ids[:-1]
    return (body if task == "copy" else body[::-1]) + [ids[-1]]


# The multi-target fixture's tasks, one per target token: what the token asks for must
# change the output, or a test could not tell that the token reached the model.
BIBLE_TASKS = {">>deu<<": "copy", ">>nld<<": "reverse"}


def bible_target(ids, tok):
    """A bible/ source (`>>xxx<<` token first, then pieces and </s>): its pieces copied or
    reversed as its token asks, then </s>."""
    task = BIBLE_TASKS[tok.convert_ids_to_tokens(ids[0])]
    return task_target(ids[1:], task)


def train(model, tok, sentences, task, steps, seed, lr=3e-3):
    rng = random.Random(seed)
    pad = model.config.pad_token_id
    if task == "bible":
        # Every sentence under each target token: the model must read the token to know
        # which output is wanted.
        sentences = [f"{code} {s}" for s in sentences for code in BIBLE_TASKS]
    data = [tok(s)["input_ids"] for s in sentences]
    data = [ids for ids in data if 3 <= len(ids) <= 24]
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for step in range(steps):
        batch = rng.sample(data, 48)
        n = max(len(ids) for ids in batch)
        inputs = torch.full((len(batch), n), pad)
        mask = torch.zeros((len(batch), n), dtype=torch.long)
        labels = torch.full((len(batch), n), -100)
        for i, ids in enumerate(batch):
            inputs[i, : len(ids)] = torch.tensor(ids)
            mask[i, : len(ids)] = 1
            target = bible_target(ids, tok) if task == "bible" else task_target(ids, task)
            labels[i, : len(target)] = torch.tensor(target)
        loss = model(input_ids=inputs, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0 or step == steps - 1:
            print(f"  step {step}: loss {loss.item():.3f}", file=sys.stderr)
    model.eval()


def tokenization_cases(en_test, de_test):
    """The source strings whose MarianTokenizer ids the Rust tokenizer must reproduce."""
    crafted = [
        ("empty", ""),
        ("spacing", " "),
        ("spacing", "   "),
        ("spacing", " Hello world."),
        ("spacing", "Hello world. "),
        ("spacing", "  Hello   world.  "),
        ("spacing", "Hello\tworld."),
        ("spacing", "\tHello world.\t"),
        ("spacing", "Hello\nworld."),
        ("spacing", "Hello\r\nworld.\n"),
        ("spacing", "Hello \t \n world."),
        ("spacing", "Tom  is   here."),
        ("spacing", "a b  c   d    e"),
        ("spacing", "\u3000Hello\u3000world"),  # ideographic space
        ("spacing", "Hello\u2003world"),  # em space
        ("spacing", "Hello\u00a0world."),  # no-break space
        ("spacing", "Hello\u202fworld."),  # narrow no-break space
        ("spacing", "\u00a0\u00a0Hello"),
        ("spacing", "Hello\u00a0"),
        ("spacing", "▁Hello"),
        ("spacing", "Hello ▁ world"),
        ("spacing", "▁"),
        ("unicode", "ｆｕｌｌ－ｗｉｄｔｈ ＴＥＸＴ １２３"),
        ("unicode", "Ｈｅｌｌｏ, ｗｏｒｌｄ！"),
        ("unicode", "ﬁne ﬂowers ﬀ ﬃ"),
        ("unicode", "the ﬁrst ﬁsh"),
        ("unicode", "cafe\u0301 nai\u0308ve"),  # NFD combining accents
        ("unicode", "café naïve"),  # NFC
        ("unicode", "Ångström"),
        ("unicode", "A\u030angstro\u0308m"),
        ("unicode", "zero\u200bwidth space"),
        ("unicode", "zero\u200cwidth\u200djoiners"),
        ("unicode", "\ufeffBOM at the start"),
        ("unicode", "soft\u00adhyphen"),
        ("unicode", "x² + y³ = z½"),
        ("unicode", "Ⅻ ⅷ ① ⑽"),
        ("unicode", "“Quotes” and ‘single’ and „German“"),
        ("unicode", "em—dash en–dash … ellipsis"),
        ("unicode", "ＡＢＣ ａｂｃ"),
        ("unicode", "Straße Müller Öl Äpfel über"),
        ("unicode", "ß"),
        ("unicode", "ßß"),
        ("unicode", "Fußball"),
        ("unicode", "ü"),
        ("unicode", "Tom ist müde."),
        ("unicode", "ǅ ǈ ǋ"),
        ("unicode", "™ ℃ № ℡"),
        ("unicode", "Dž"),
        ("unknown", "I love 🍕 and 🍣!"),
        ("unknown", "😀"),
        ("unknown", "😀😀😀"),
        ("unknown", "Tom 😀 Mary"),
        ("unknown", "漢字 and かな"),
        ("unknown", "東京"),
        ("unknown", "Привет, мир!"),
        ("unknown", "مرحبا"),
        ("unknown", "שלום"),
        ("unknown", "Ελληνικά"),
        ("unknown", "emoji👍🏽tone"),
        ("unknown", "family 👨‍👩‍👧"),
        ("unknown", "flag 🇩🇪"),
        ("unknown", "math ∑∫∂"),
        ("unknown", "\u0007bell"),
        ("unknown", "null\u0000char"),
        ("unknown", "tab\u000bvt\u000cff"),
        ("unknown", "\U0001d400\U0001d401 bold"),
        ("unknown", "Zalgo t\u0336e\u0336x\u0336t"),
        ("code", ">>fra<< Hello"),
        ("code", ">>fra<<Hello"),
        ("code", ">>deu<< Where is the station?"),
        ("code", ">>nld<<  Two spaces."),
        ("code", ">>fra<<"),
        ("code", ">>fra<< "),
        ("code", ">>deu<< >>fra<< Hello"),
        ("code", " >>fra<< Hello"),
        ("code", ">>fra<<\tTab"),
        ("code", ">>fra<< ﬁne"),
        ("specials", "Hello </s> world"),
        ("specials", "<unk>"),
        ("specials", "a<pad>b"),
        ("specials", "</s>"),
        ("specials", "<s> start"),
        ("punct", "Hello, world!"),
        ("punct", "What?!"),
        ("punct", "\"Quoted,\" he said."),
        ("punct", "It's Tom's."),
        ("punct", "(parentheses) [brackets] {braces}"),
        ("punct", "e-mail: tom@example.com"),
        ("punct", "https://example.com/a?b=c"),
        ("punct", "3.14159 1,000,000 -42 +7"),
        ("punct", "100% $5 €10 £3 ¥2"),
        ("punct", "..."),
        ("punct", "!!!"),
        ("punct", "#hashtag @mention"),
        ("punct", "C++ & C# | Rust"),
        ("punct", "a/b\\c"),
        ("punct", "~`^_<>"),
        ("case", "HELLO WORLD"),
        ("case", "hello world"),
        ("case", "HeLLo WoRLd"),
        ("case", "TOM"),
        ("digits", "1234567890"),
        ("digits", "0"),
        ("digits", "12:30 on 2024-01-02"),
        ("long", "Tom " * 40),
        ("long", "The quick brown fox jumps over the lazy dog. " * 5),
        ("long", "a" * 60),
        ("long", "supercalifragilisticexpialidocious"),
        ("long", "antidisestablishmentarianism"),
        ("single", "a"),
        ("single", "I"),
        ("single", "."),
        ("single", ","),
        ("single", "-"),
        ("single", "'"),
    ]
    cases = [{"kind": k, "text": t} for k, t in crafted]
    cases += [{"kind": "sentence", "text": t} for t in en_test]
    cases += [{"kind": "german", "text": t} for t in de_test]
    return cases


def greedy_margin(model, input_ids):
    """The smallest gap between the best and second-best next-token score over greedy's
    steps: how far this output is from a tie another engine's rounding could break."""
    out = model.generate(input_ids, num_beams=1, output_scores=True, return_dict_in_generate=True)
    gaps = []
    for s in out.scores:
        top = torch.topk(s[0].float(), 2).values
        gaps.append((top[0] - top[1]).item())
    return min(gaps)


class Jitter(LogitsProcessor):
    """Adds noise of about 1e-4 to every score: an output that survives it is clear of the
    near-ties where another engine's f32 rounding (~1e-5) could choose differently."""

    def __init__(self, seed):
        self.gen = torch.Generator().manual_seed(seed)

    def __call__(self, input_ids, scores):
        return scores + torch.randn(scores.shape, generator=self.gen) * 1e-4


def stable(model, input_ids, reference, num_beams):
    for seed in range(4):
        out = model.generate(input_ids, num_beams=num_beams, logits_processor=LogitsProcessorList([Jitter(seed)]))
        if out[0].tolist() != reference:
            return False
    return True


def generate_record(model, tok, input_ids, **kwargs):
    greedy = model.generate(input_ids, num_beams=1, **kwargs)[0].tolist()
    beam = model.generate(input_ids, num_beams=4, output_scores=True, return_dict_in_generate=True, **kwargs)
    beam_ids = beam.sequences[0].tolist()
    return {
        "greedy": {"ids": greedy, "text": tok.decode(greedy, skip_special_tokens=True)},
        "beam4": {
            "ids": beam_ids,
            "text": tok.decode(beam_ids, skip_special_tokens=True),
            "score": beam.sequences_scores[0].item(),
        },
    }


def reference(model, tok, gen_candidates, forced_pairs, folder, eos=0, banned=None):
    """`generate`'s outputs (greedy and beam 4, the model's generation_config otherwise)
    for sentences whose outputs are clear of ties, a few cut at a small max_length, and
    teacher-forced logits for source/target pairs."""
    same, differ = [], []
    for text in gen_candidates:
        input_ids = tok(text, return_tensors="pt")["input_ids"]
        rec = {"text": text, "input_ids": input_ids[0].tolist(), "greedy_min_margin": greedy_margin(model, input_ids)}
        rec.update(generate_record(model, tok, input_ids))
        if not (stable(model, input_ids, rec["greedy"]["ids"], 1) and stable(model, input_ids, rec["beam4"]["ids"], 4)):
            continue
        # A row no trained model emits (SentencePiece's `<s>`, which transduce never
        # emits): outputs through it are not what the fixture is for.
        if banned is not None and any(banned in r["ids"] for r in (rec["greedy"], rec["beam4"])):
            continue
        for out in (rec["greedy"], rec["beam4"]):
            assert out["ids"][-1] == eos, f"{text!r}: generate stopped without </s>: {out}"
            assert len(out["ids"]) < model.config.max_position_embeddings
        (same if rec["greedy"]["ids"] == rec["beam4"]["ids"] else differ).append(rec)
        if len(same) + min(len(differ), 15) >= 30 and len(same) >= 15:
            break
    # Up to half where beam 4 finds another output than greedy: those test the search itself.
    chosen = differ[:15]
    chosen += same[: 30 - len(chosen)]
    assert len(chosen) == 30, f"only {len(chosen)} candidates are clear of ties"
    chosen.sort(key=lambda r: gen_candidates.index(r["text"]))
    # Cut short: max_length counts the decoder start, so 8 means at most 7 generated
    # tokens, the last one forced to </s> (ForcedEOSTokenLogitsProcessor).
    cut = []
    for rec in chosen[:6]:
        input_ids = torch.tensor([rec["input_ids"]])
        c = {"text": rec["text"], "input_ids": rec["input_ids"], "max_length": 8}
        c.update(generate_record(model, tok, input_ids, max_length=8))
        cut.append(c)
    tensors, forced = {}, []
    for i, (src, tgt) in enumerate(forced_pairs):
        enc = tok(src, text_target=tgt)
        labels = enc["labels"]
        decoder_input = [model.config.decoder_start_token_id] + labels[:-1]
        with torch.no_grad():
            logits = model(
                input_ids=torch.tensor([enc["input_ids"]]), decoder_input_ids=torch.tensor([decoder_input])
            ).logits[0]
        tensors[f"pair{i}.logits"] = logits.float().contiguous()
        forced.append(
            {
                "source": src,
                "target": tgt,
                "input_ids": enc["input_ids"],
                "decoder_input_ids": decoder_input,
                "logits": f"pair{i}.logits",
            }
        )
    save_file(tensors, folder / "logits.safetensors")
    return {"generate": chosen, "max_length_cases": cut, "teacher_forced": forced}


def versions():
    import safetensors
    import transformers

    return {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "sentencepiece": spm.__version__,
        "safetensors": safetensors.__version__,
        "numpy": np.__version__,
    }


def dump(obj, path):
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=None, separators=(",", ":")) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared/data/tatoeba-en-de")
    ap.add_argument("--out", type=Path, default=REPO / "tests/fixtures/marian")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--tc", action="store_true", help="write only tc/ (byte fallback, joint sorted vocabulary)")
    ap.add_argument("--student", action="store_true",
                    help="write only student/ (6 encoder layers, 2 decoder layers, as opus-mt_tiny_*)")
    ap.add_argument("--bible", action="store_true",
                    help="write only bible/ (one model, two targets chosen by >>deu<< / >>nld<<, as opus-mt-tc-bible-*)")
    ap.add_argument("--opus-size", type=Path, metavar="DIR", help="write only the opus-mt-en-de-shaped random model to DIR")
    ap.add_argument("--size", choices=["base", "tiny", "big"], default="base",
                    help="with --opus-size: base (opus-mt-en-de), tiny (opus-mt_tiny_*: d 256, 6 + 2 layers, "
                         "FFN 1536, 8 heads) or big (opus-mt-tc-big-*: d 1024, 6 + 6 layers, FFN 4096, 16 heads, relu)")
    ap.add_argument("--pytorch-bins", action="store_true",
                    help="write only relu's state dict in torch.save's two forms: relu.pytorch_model.bin "
                         "(zip, PyTorch >= 1.6) and relu.legacy.pytorch_model.bin (the pickle stream of PyTorch <= 1.5)")
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    out = args.out
    en_train = lines(args.data, "train.en.gz")
    de_train = lines(args.data, "train.de.gz")
    rng = random.Random(SEED)
    sample = sorted(rng.sample(range(len(en_train)), 20000))
    en = [en_train[i] for i in sample]
    de = [de_train[i] for i in sample]

    # The .spm files live in the model folders only (git stores the identical copies once):
    # their nmt_nfkc charsmap is 240 KB each.
    spm_dir = out / "swish"
    if args.pytorch_bins:
        model = MarianMTModel.from_pretrained(out / "relu")
        state = model.state_dict()
        torch.save(state, out / "relu.pytorch_model.bin")
        torch.save(state, out / "relu.legacy.pytorch_model.bin", _use_new_zipfile_serialization=False)
        print(f"wrote {out / 'relu.pytorch_model.bin'} and {out / 'relu.legacy.pytorch_model.bin'}")
        return
    if args.tc:
        build_tc(out / "tc", en, de, args)
        return
    if args.bible:
        build_bible(out / "bible", en, args)
        return
    if args.student:
        # The 2020 fixtures' tokenizer and vocabulary; the tiny students' depths.
        spm_dir = out / "swish"
        vocab, tok = swish_tokenizer(spm_dir)
        en_test, de_test, test_idx = test_sample(args, SEED + 2)
        gen_pool = [en_test[i] for i in test_idx[:400] if 4 <= len(en_test[i].split()) <= 9]
        gen_candidates = [">>deu<< " + gen_pool[0], "Tom 😀 Mary", "Fußball ist toll."] + gen_pool[1:]
        forced_pairs = [(en_test[i], de_test[i]) for i in test_idx[400:] if len(de_test[i].split()) <= 4][:4]
        write_model_folder(
            out / "student", vocab, spm_dir, "swish", 32, 6, 4, 64, 64, "student", "copy", en,
            tok=tok, steps=args.steps, seed=SEED + 40, gen=(gen_candidates, forced_pairs), decoder_layers=2,
            # Six post-norm layers at d_model 32 do not learn at the others' 3e-3.
            lr=1e-3,
        )
        print(f"wrote {out / 'student'}")
        return
    if args.opus_size is None:
        spm_dir.mkdir(parents=True, exist_ok=True)
        train_spm(en, spm_dir / "source.spm", SEED)
        train_spm(de, spm_dir / "target.spm", SEED + 1)
    for f in ("source.spm", "target.spm"):
        assert (spm_dir / f).exists(), f"{spm_dir / f} is missing: build the fixtures first"
    src_sp = spm.SentencePieceProcessor(model_file=str(spm_dir / "source.spm"))
    tgt_sp = spm.SentencePieceProcessor(model_file=str(spm_dir / "target.spm"))

    if args.opus_size is not None:
        # Benchmark-sized: the fixture's pieces padded with synthetic ones to 58,101 entries.
        base = build_vocab(src_sp, tgt_sp, en, de)
        vocab = build_vocab(src_sp, tgt_sp, en, de, extra=OPUS_VOCAB - len(base))
        assert len(vocab) == OPUS_VOCAB
        activation, d, layers, heads, ffn, decoder_layers = {
            "base": ("swish", 512, 6, 8, 2048, None),
            "tiny": ("swish", 256, 6, 8, 1536, 2),
            "big": ("relu", 1024, 6, 16, 4096, None),
        }[args.size]
        write_model_folder(args.opus_size, vocab, spm_dir, activation, d, layers, heads, ffn, 512,
                           f"opus-size ({args.size})", None, [], decoder_layers=decoder_layers)
        print(f"wrote {args.opus_size}")
        return

    dump(spm_pieces(spm_dir), out / "spm-pieces.json")
    vocab = build_vocab(src_sp, tgt_sp, en, de)
    dump(vocab, spm_dir / "vocab.json")
    tok = MarianTokenizer(
        str(spm_dir / "source.spm"), str(spm_dir / "target.spm"), str(spm_dir / "vocab.json"),
        source_lang="en", target_lang="de",
    )

    en_test = lines(args.data, "test.en.gz")
    de_test = lines(args.data, "test.de.gz")
    pick = random.Random(SEED + 2)
    test_idx = pick.sample(range(len(en_test)), 1000)
    sentences = [en_test[i] for i in test_idx[:800]]
    german = [de_test[i] for i in test_idx[800:]]
    cases = tokenization_cases(sentences, german)
    for c in cases:
        c["ids"] = tok(c["text"])["input_ids"]
        # The pieces only where they help read a difference: not for plain sentences.
        if c["kind"] not in ("sentence", "german"):
            c["pieces"] = tok.tokenize(c["text"])
    # The target side (German through target.spm), as fine-tuning would tokenize targets.
    target_cases = [{"text": t, "ids": tok(text_target=t)["input_ids"]} for t in german]
    dump(
        {
            "versions": versions(),
            "note": "ids: MarianTokenizer(text)['input_ids'] (ends with </s> = 0); pieces: tokenize(text); "
            "target: MarianTokenizer(text_target=text)['input_ids']; tokenizer: swish/ (relu/ has the same files)",
            "source": cases,
            "target": target_cases,
        },
        out / "tokenization.json",
    )

    gen_pool = [en_test[i] for i in test_idx[:400] if 4 <= len(en_test[i].split()) <= 9]
    gen_candidates = [">>deu<< " + gen_pool[0], "Tom 😀 Mary", "Fußball ist toll."] + gen_pool[1:]
    # Short pairs: the logits file holds [t, V] f32 per pair.
    forced_pairs = [(en_test[i], de_test[i]) for i in test_idx[400:] if len(de_test[i].split()) <= 4][:4]
    # The reverser gets a third of the steps: less sure of itself, its beam search often
    # finds another output than greedy, which tests the search. relu-copy is the ReLU model
    # trained as long as swish on the copy task (outputs not near ties): what int8 is held
    # to, beside swish.
    models = (("swish", "copy", args.steps), ("relu", "reverse", args.steps // 3), ("relu-copy", "copy", args.steps))
    for k, (name, task, steps) in enumerate(models):
        activation = name.split("-")[0]
        print(f"{activation}: training to {task}", file=sys.stderr)
        write_model_folder(
            out / name, vocab, spm_dir, activation, 32, 2, 4, 64, 64, name, task, en,
            tok=tok, steps=steps, seed=SEED + 10 + k, gen=(gen_candidates, forced_pairs),
        )
    print(f"wrote {out}")


def collation_key(piece):
    """A stand-in for `sort` in an English UTF-8 locale, which is how OPUS-MT-train's
    vocabularies come out: letters and digits first, case and punctuation only to break
    ties. So `</s>` sorts among the pieces that start with "s", far from id 0."""
    core = "".join(c for c in piece if c.isalnum()).lower()
    return (core, piece)


def build_tc(folder, en, de, args):
    """The tc/ fixture: see the module's docstring."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text, seed in (("source.spm", en, SEED + 20), ("target.spm", de, SEED + 21)):
        model = io.BytesIO()
        spm.set_random_generator_seed(seed)
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(text), model_writer=model, model_type="unigram", vocab_size=600,
            byte_fallback=True, num_threads=1, unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2,
        )
        (folder / name).write_bytes(model.getvalue())
    src_sp = spm.SentencePieceProcessor(model_file=str(folder / "source.spm"))
    tgt_sp = spm.SentencePieceProcessor(model_file=str(folder / "target.spm"))
    # `cut -f1 source.vocab target.vocab | sort -u`: every piece of both, specials included.
    pieces = {sp.id_to_piece(i) for sp in (src_sp, tgt_sp) for i in range(sp.get_piece_size())}
    vocab = {p: i for i, p in enumerate(sorted(pieces, key=collation_key))}
    vocab["<pad>"] = len(vocab)
    pad, eos, unk, s_row = vocab["<pad>"], vocab["</s>"], vocab["<unk>"], vocab["<s>"]
    assert eos != 0 and byte_pieces_in(vocab), (eos, len(vocab))
    dump(vocab, folder / "vocab.json")
    tok = MarianTokenizer(str(folder / "source.spm"), str(folder / "target.spm"), str(folder / "vocab.json"),
                          source_lang="en", target_lang="de")

    torch.manual_seed(SEED + 30)
    config = marian_config(len(vocab), "relu", 32, 2, 4, 64, 64)
    config.eos_token_id = config.forced_eos_token_id = config.bos_token_id = eos
    model = MarianMTModel(config)
    with torch.no_grad():
        model.final_logits_bias.copy_(torch.randn_like(model.final_logits_bias) * 0.5)
    gen = generation_config(pad)
    gen.eos_token_id = gen.forced_eos_token_id = gen.bos_token_id = eos
    model.generation_config = gen
    train(model, tok, en, "copy", args.steps, SEED + 31)
    write_folder(model, tok, folder, "tc", "relu", "copy", args.steps)

    en_test = lines(args.data, "test.en.gz")
    de_test = lines(args.data, "test.de.gz")
    pick = random.Random(SEED + 32)
    test_idx = pick.sample(range(len(en_test)), 600)
    cases = tokenization_cases([en_test[i] for i in test_idx[:300]], [de_test[i] for i in test_idx[300:400]])
    for c in cases:
        c["ids"] = tok(c["text"])["input_ids"]
        if c["kind"] not in ("sentence", "german"):
            c["pieces"] = tok.tokenize(c["text"])
    # Decoding: byte pieces between ordinary ones, valid UTF-8 and not (a cut emoji, a lone
    # 0xFF, a sequence cut by a piece), as MarianTokenizer decodes an output.
    b = lambda x: vocab["<0x%02X>" % x]
    word = lambda p: vocab[p]
    decode_ids = [
        [b(x) for x in "😀".encode()],
        [b(x) for x in "東京".encode()],
        [word("▁I"), b(0xF0), b(0x9F), b(0x98), word("▁I")],
        [b(0x61), b(0xFF), b(0x62)],
        [b(x) for x in "東".encode()] + [b(0xFF), b(0xE4)],
        [b(0xC3)],
        [word("▁I")] + [b(x) for x in " é".encode()],
    ]
    decoding = [{"ids": ids + [eos], "text": tok.decode(ids + [eos], skip_special_tokens=True),
                 "spm": tgt_sp.decode_ids([tgt_sp.piece_to_id(tok.convert_ids_to_tokens(i)) for i in ids])}
                for ids in decode_ids]
    for d in decoding:
        assert d["text"] == d["spm"].strip(), d
    dump({"versions": versions(), "note": "as tokenization.json, for tc/'s tokenizer; decoding: "
          "MarianTokenizer.decode(ids, skip_special_tokens=True), and SentencePiece's decode_ids of the same pieces",
          "source": cases, "decoding": decoding}, folder / "tokenization.json")

    gen_pool = [en_test[i] for i in test_idx[400:] if 4 <= len(en_test[i].split()) <= 9]
    gen_candidates = ["I love 🍕 and 東京.", "Tom 😀 Mary", "Fußball ist toll."] + gen_pool
    forced_pairs = [(en_test[i], de_test[i]) for i in test_idx[400:] if len(de_test[i].split()) <= 4][:4]
    ref = reference(model, tok, gen_candidates, forced_pairs, folder, eos=eos, banned=s_row)
    ref["versions"] = versions()
    ref["model"] = {"activation": "relu", "task": "copy", "steps": args.steps, "seed": SEED + 30,
                    "pad": pad, "eos": eos, "unk": unk, "s_row": s_row}
    dump(ref, folder / "reference.json")
    print(f"wrote {folder}: vocabulary {len(vocab)}, </s> {eos}, <s> {s_row}, <unk> {unk}, <pad> {pad}")


def swish_tokenizer(spm_dir):
    """The 2020 fixtures' vocabulary and MarianTokenizer (swish/'s files)."""
    vocab = json.loads((spm_dir / "vocab.json").read_text())
    tok = MarianTokenizer(str(spm_dir / "source.spm"), str(spm_dir / "target.spm"), str(spm_dir / "vocab.json"),
                          source_lang="en", target_lang="de")
    return vocab, tok


def test_sample(args, seed):
    """The Tatoeba test sides and 1,000 of their indices drawn with `seed`."""
    en_test = lines(args.data, "test.en.gz")
    de_test = lines(args.data, "test.de.gz")
    test_idx = random.Random(seed).sample(range(len(en_test)), 1000)
    return en_test, de_test, test_idx


def build_bible(folder, en, args):
    """The bible/ fixture: see the module's docstring."""
    spm_dir = args.out / "swish"
    vocab, tok = swish_tokenizer(spm_dir)
    en_test, de_test, test_idx = test_sample(args, SEED + 50)
    pool = [en_test[i] for i in test_idx[:400] if 4 <= len(en_test[i].split()) <= 9]
    # Each sentence under both tokens, one after the other: the same source asks for two
    # outputs.
    gen_candidates = [f"{code} {s}" for s in pool for code in BIBLE_TASKS]
    forced_pairs = [(f">>deu<< {en_test[i]}", de_test[i]) for i in test_idx[400:] if len(de_test[i].split()) <= 4][:4]
    write_model_folder(
        folder, vocab, spm_dir, "relu", 32, 2, 4, 64, 64, "bible", "bible", en,
        # Two tasks: twice the steps of a one-task fixture.
        tok=tok, steps=2 * args.steps, seed=SEED + 51, gen=(gen_candidates, forced_pairs),
    )
    card = (folder / "README.md").read_text().replace("- de\n", "- de\n- nl\n", 1)
    (folder / "README.md").write_text(card)
    ref = json.loads((folder / "reference.json").read_text())
    for rec in ref["generate"]:
        code = rec["text"].split()[0]
        body = tok(rec["text"])["input_ids"]
        want = bible_target(body, tok)
        rec["task"] = BIBLE_TASKS[code]
        # The output without its decoder start.
        rec["greedy_does_task"] = rec["greedy"]["ids"][1:] == want
    dump(ref, folder / "reference.json")
    print(f"wrote {folder}: greedy does what its token asks in "
          f"{sum(r['greedy_does_task'] for r in ref['generate'])} of {len(ref['generate'])}")


def byte_pieces_in(vocab):
    return all("<0x%02X>" % x in vocab for x in range(256))


def write_model_folder(folder, vocab, spm_dir, activation, d_model, layers, heads, ffn, positions, name, task, train_text,
                       tok=None, steps=0, seed=SEED, gen=None, decoder_layers=None, lr=3e-3):
    torch.manual_seed(seed)
    config = marian_config(len(vocab), activation, d_model, layers, heads, ffn, positions, decoder_layers)
    model = MarianMTModel(config)
    # A random output bias (zero in a fresh model), set before training so the weights
    # learn around it: the importer must carry it.
    with torch.no_grad():
        model.final_logits_bias.copy_(torch.randn_like(model.final_logits_bias) * 0.5)
    model.generation_config = generation_config(config.pad_token_id)
    folder.mkdir(parents=True, exist_ok=True)
    if folder != spm_dir:
        for f in ("source.spm", "target.spm"):
            shutil.copyfile(spm_dir / f, folder / f)
    dump(vocab, folder / "vocab.json")
    folder_tok = MarianTokenizer(
        str(folder / "source.spm"), str(folder / "target.spm"), str(folder / "vocab.json"), source_lang="en", target_lang="de"
    )
    if task is not None:
        train(model, tok, train_text, task, steps, seed, lr)
    write_folder(model, folder_tok, folder, name, activation, task, steps)
    if gen is not None:
        ref = reference(model, tok, gen[0], gen[1], folder)
        ref["versions"] = versions()
        ref["model"] = {"activation": activation, "task": task, "steps": steps, "seed": seed}
        dump(ref, folder / "reference.json")


if __name__ == "__main__":
    main()
