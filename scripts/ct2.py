#!/usr/bin/env python3
"""A transduce bundle as a CTranslate2 model: export, output equality, and a 1-thread race.

`export` writes a bundle (config.json + tokenizer.json + model.safetensors) as a CTranslate2
(CT2) model directory in float32: the exporter the `transduce` binary carries for a
recipe's `ct2 = true` stage (crates/transduce-cli/src/recipe/kind/ct2_export.py, imported
here; its docstring says how the model maps onto CT2's specification).

`check` decodes a file with both engines and compares the detokenized lines; `race` times
both at one thread on the same file (transduce as a subprocess with RAYON_NUM_THREADS=1).
Both tokenize with the bundle's tokenizer.json, as transduce does: each line trimmed, empty
lines stay empty and are not decoded, no BOS/EOS on the source, sentences sorted by token
length and decoded in batches of --batch.

How CT2's search is made to give transduce's result:
  * Length penalty. transduce ranks finished hypotheses by the GNMT score
    log P(Y) / ((5 + |Y|) / 6)^α, |Y| counting EOS. CT2's `length_penalty` L is not that:
    it divides by |Y|^L (|Y| also counting EOS: CT2 keeps EOS in hypotheses while
    scoring). CT2's penalty is only applied to finished hypotheses, though, and for L != 0
    its beam search stops exactly where transduce's does (beam_size finished hypotheses),
    so CT2 is asked for all `beam` finished hypotheses with scores; each score × |Y|^L is
    the raw log-probability, rescored here with GNMT and the best kept. L (CT2's
    own ranking, which only decides which `beam` of up to 2·beam-1 finished hypotheses CT2
    returns) is set to α·m/(5+m), m the batch's mean source length + 1, the length at which
    the two penalties have the same slope (should CT2's ranking ever drop transduce's best,
    `check` asks twice more, with L = 0.001 and L = α, and rescores the union; the CT2
    time it prints includes them). transduce's extra stop rule (no live beam can still
    beat the best finished one) never changes its best hypothesis.
  * Maximum length. transduce allows src_len + max_extra output tokens EOS included and
    forces EOS at the last position; CT2's `max_decoding_length` counts generated tokens and
    at the last step keeps whatever was predicted. So CT2 gets src_len + max_extra - 1: the
    same tokens (exact for greedy); in beam search a hypothesis stopped there lacks the
    forced EOS's log-probability, so such lines are counted ("hit the length limit"); a
    line that differs for that reason alone does not fail `check`, and `--save` keeps
    transduce's output there (says which lines).
    `check` batches sentences of equal source length together so each gets its own limit;
    `race` batches as transduce does, gives a batch its longest source's limit and cuts
    longer outputs back to each sentence's own limit (exact for greedy, not for beam).
  * min_decoding_length 0 (CT2's default 1 forbids an immediate EOS; transduce allows it),
    max_input_length 0 (no source truncation).
  * transduce bans <pad> and <s> after its log-softmax. CT2's only ban (suppress_sequences)
    masks logits before the softmax, which renormalizes every step, so nothing is banned
    in CT2; outputs holding <pad> or <s> are counted.
Outputs are compared as detokenized text (what `transduce translate` writes).

    python3 -m venv /work/ct2-venv
    /work/ct2-venv/bin/pip install ctranslate2==4.8.5 tokenizers safetensors numpy
    B=web/models/en-de; T=/root/.cache/transduce-target/debug/transduce
    /work/ct2-venv/bin/python scripts/ct2.py export --bundle $B --out /tmp/m30k-ct2
    /work/ct2-venv/bin/python scripts/ct2.py check --bundle $B --ct2 /tmp/m30k-ct2 \\
        --input test.en --beam 4 --bin $T
    /work/ct2-venv/bin/python scripts/ct2.py race --bundle $B --ct2 /tmp/m30k-ct2 \\
        --input test.en --beam 4 --batch 32 --rounds 3 --bin $T

`table` runs the race in every configuration (greedy and beam, batch 1 and 32) on each
model given, each race in a process of its own, and prints one table with both engines'
peak resident memory; `pick` writes sentences of one source length for it
(docs/BENCHMARKS.md, "Against CTranslate2 in every configuration"):
    python scripts/ct2.py pick --bundle opus-int8 --input train.en.gz --pieces 8 --out short8.en
    python scripts/ct2.py table --bin $T \\
        --model en-de,web/models/en-de,/tmp/m30k-ct2,test2016.en.gz,8,50 \\
        --model opus-size,opus-int8,opus-ct2,short8.en,4,1
`--isa avx2` forces both engines onto AVX2 (CTranslate2's oneDNN and MKL products too), to
measure the AVX2 paths on a CPU that has AVX-512.
"""
import argparse
import gzip
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

# One thread for everything this process runs besides CT2 (whose threads are set on the
# Translator): the tokenizer's rayon pool and any BLAS numpy might call.
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

# The exporter the `transduce` binary carries (a recipe's `ct2 = true` stage runs it): one
# copy, in the CLI crate.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "transduce-cli", "src", "recipe", "kind"))
import ct2_export  # noqa: E402

# What forces each engine onto one instruction set. CT2_FORCE_CPU_ISA moves CTranslate2's
# own kernels only: its int8 products run in oneDNN (MKL on Intel CPUs), which dispatch by
# themselves and stay on AVX-512 VNNI unless told otherwise (ONEDNN_VERBOSE=1 shows it).
ISA_ENV = {
    "avx2": {"TRANSDUCE_CPU_ISA": "avx2", "CT2_FORCE_CPU_ISA": "AVX2",
             "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
}

DEFAULT_BIN = "/root/.cache/transduce-target/debug/transduce"
PAD, BOS, EOS, UNK = ct2_export.PAD, ct2_export.BOS, ct2_export.EOS, ct2_export.UNK

# Rust's char::is_whitespace (Unicode White_Space), which transduce's str::trim strips.
RUST_WHITESPACE = "".join(
    map(
        chr,
        [*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028,
         0x2029, 0x202F, 0x205F, 0x3000],
    )
)


# --- the bundle -------------------------------------------------------------------------


def read_lines(path):
    """The lines of a file as transduce reads them: gzip by magic bytes, one trailing
    newline dropped, split on `\\n` only, a trailing `\\r` removed."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if not raw:
        return []
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    return [
        (line[:-1] if line.endswith(b"\r") else line).decode("utf-8")
        for line in raw.split(b"\n")
    ]


class Bundle(ct2_export.Bundle):
    """The bundle as the checks and races use it: ct2_export's reading, plus the decoding
    defaults, the length penalty and the tokenizer's text round trip."""

    def lp(self, length, alpha):
        """The bundle's length penalty of an output of `length` tokens, EOS included."""
        return length ** alpha if self.length_norm == "power" else gnmt(length, alpha)

    def encode(self, line):
        """Token strings of a line, as transduce encodes it (trimmed, no BOS/EOS)."""
        text = line.strip(RUST_WHITESPACE)
        return self.tokenizer.encode(text, add_special_tokens=False).tokens

    def decode(self, tokens):
        return self.tokenizer.decode([self.token_id[t] for t in tokens], skip_special_tokens=True)


# --- export ---------------------------------------------------------------------------


def cmd_export(args):
    ct2_export.export(args)


# --- decoding with CT2 ------------------------------------------------------------------


def gnmt(length, alpha):
    return ((5.0 + length) / 6.0) ** alpha


class Ct2:
    """A CT2 Translator that decodes like `transduce translate` (see the module doc)."""

    def __init__(self, bundle, ct2_dir, threads=1, compute_type="float32"):
        import ctranslate2

        self.bundle = bundle
        self.translator = ctranslate2.Translator(
            ct2_dir, device="cpu", compute_type=compute_type,
            inter_threads=1, intra_threads=threads)

    def translate(self, lines, beam, alpha, max_extra, batch, exact_limits):
        """Returns (outputs, seconds in translate_batch, stats)."""
        b = self.bundle
        sources = [b.encode(line) for line in lines]
        order = sorted((i for i in range(len(lines)) if sources[i]),
                       key=lambda i: (len(sources[i]), i))
        if exact_limits:
            # One limit per source length: batches never mix lengths.
            chunks, run = [], []
            for i in order:
                if run and (len(sources[run[0]]) != len(sources[i]) or len(run) == batch):
                    chunks.append(run)
                    run = []
                run.append(i)
            if run:
                chunks.append(run)
        else:
            chunks = [order[j:j + batch] for j in range(0, len(order), batch)]

        out = [""] * len(lines)
        stats = {"hit_limit": [], "pad_or_bos": [], "hypotheses": {}}
        spent = 0.0
        for chunk in chunks:
            src = [sources[i] for i in chunk]
            longest = max(len(s) for s in src)
            if b.source_eos:
                src = [s + [EOS] for s in src]
            limit = longest + max(max_extra, 1)  # transduce: output tokens, EOS included
            mean_len = sum(len(s) for s in src) / len(src) + 1
            ct2_penalty = alpha * mean_len / (5.0 + mean_len) if beam > 1 else 0.0
            if b.length_norm == "power" and beam > 1:
                ct2_penalty = alpha  # CT2's own normalisation is |Y|^L: no rescoring needed

            def search(penalty):
                return self.translator.translate_batch(
                    src,
                    max_batch_size=batch,
                    batch_type="examples",
                    beam_size=beam,
                    patience=1,
                    num_hypotheses=beam,
                    length_penalty=penalty,
                    return_scores=beam > 1,
                    return_end_token=True,
                    max_decoding_length=limit - 1,
                    min_decoding_length=0,
                    max_input_length=0,
                )

            t0 = time.perf_counter()
            # `check` only: CT2's own penalty decides which `beam` of its finished
            # hypotheses come back, and at a large α one L can drop the GNMT-best (a short
            # one under the mean-length L). The search does not depend on L != 0 (module
            # doc), so the same search asked again with L = 0.001 (favouring short) and
            # L = α (favouring long) returns other cuts of the same finished set; their
            # union is rescored. Not in `race`, which times one call.
            penalties = [ct2_penalty]
            if exact_limits and beam > 1:
                penalties += [0.001, alpha]
            runs = [(penalty, search(penalty)) for penalty in penalties]
            results = runs[0][1]
            if beam > 1:
                best = []
                for j in range(len(results)):
                    scored = {}
                    for penalty, run in runs:
                        for hyp, score in zip(run[j].hypotheses, run[j].scores):
                            n = len(hyp)  # EOS included (unless stopped by the limit)
                            raw = score * n ** penalty
                            scored.setdefault(tuple(hyp), (raw / b.lp(n, alpha), hyp, raw))
                    best.append(max(scored.values(), key=lambda s: s[0]))
            else:
                best = [(None, r.hypotheses[0], None) for r in results]
            spent += time.perf_counter() - t0
            for i, (score, hyp, raw) in zip(chunk, best):
                # This sentence's own limit: at most src_len + max_extra - 1 tokens before
                # EOS. A batch's limit is its longest source's; cutting a longer output back
                # is exact for greedy (the first tokens are the same), approximate for beam.
                cap = len(sources[i]) + max(max_extra, 1) - 1
                if hyp and hyp[-1] == EOS and len(hyp) - 1 <= cap:
                    hyp = hyp[:-1]
                else:
                    hyp = [t for t in hyp if t != EOS][:cap]
                    stats["hit_limit"].append(i)
                if PAD in hyp or BOS in hyp:
                    stats["pad_or_bos"].append(i)
                out[i] = b.decode(hyp)
                stats["hypotheses"][i] = (hyp, score, raw)
        return out, spent, stats

    def gnmt_score(self, src_tokens, tgt_tokens, alpha):
        """GNMT score of one given output (teacher-forced, EOS included) under CT2."""
        r = self.translator.score_batch([src_tokens], [tgt_tokens], max_input_length=0)[0]
        logp = float(np.sum(np.asarray(r.log_probs, dtype=np.float64)))
        return logp / gnmt(len(r.log_probs), alpha), logp


# --- transduce --------------------------------------------------------------------------


def transduce_command(args, input_path, output_path, beam, alpha, max_extra, batch):
    # Like for like: CT2's float32 against transduce's f32 arithmetic, int8 against int8
    # (on an int8 bundle both engines read the same q·scale weights).
    compute = "int8" if args.compute_type == "int8" else "f32"
    return [args.bin, "translate", "--model", args.bundle, "--input", input_path,
            "--output", output_path, "--beam", str(beam), "--alpha", str(alpha),
            "--max-extra", str(max_extra), "--batch-size", str(batch),
            "--compute", compute, "--quiet"]


def run_transduce(cmd):
    """Runs transduce at one thread; returns (wall seconds, CPU seconds, peak resident KB).

    The peak comes from GNU time when it is there: a child's own ru_maxrss starts from the
    memory of the process it was forked from (Python with CT2 loaded, here), so
    RUSAGE_CHILDREN would report CT2's process, not transduce. Without it the peak is None.
    """
    env = dict(os.environ, RAYON_NUM_THREADS="1", OMP_NUM_THREADS="1")
    gnu_time = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None
    with tempfile.NamedTemporaryFile(mode="r", suffix=".rss") as rss:
        run = [gnu_time, "-f", "%M", "-o", rss.name, *cmd] if gnu_time else cmd
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run(run, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak = int(rss.read().split()[-1]) if gnu_time and done.returncode == 0 else None
    if done.returncode != 0:
        sys.exit(f"transduce failed ({done.returncode}):\n{done.stderr.decode(errors='replace')}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, peak


def shell(cmd, env=""):
    return (env + " " if env else "") + " ".join(shlex.quote(c) for c in cmd)


def check_bin(path):
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        sys.exit(f"transduce binary not found: {path} (build it, or pass --bin)")


def plain_input(path, tmp):
    """transduce reads gzip itself; CT2 gets the same lines from read_lines. A copy is
    only made for a gzip input so both engines name one plain file."""
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic != b"\x1f\x8b":
        return path
    plain = os.path.join(tmp, "input.txt")
    with open(plain, "wb") as f:
        f.write(gzip.decompress(open(path, "rb").read()))
    return plain


# --- check --------------------------------------------------------------------------------


def cmd_check(args):
    check_bin(args.bin)
    bundle = Bundle(args.bundle)
    beam = args.beam if args.beam is not None else bundle.decoding["beam"]
    alpha = args.alpha if args.alpha is not None else bundle.decoding["alpha"]
    max_extra = args.max_extra if args.max_extra is not None else bundle.decoding["maxExtra"]
    with tempfile.TemporaryDirectory() as tmp:
        input_path = plain_input(args.input, tmp)
        lines = read_lines(input_path)
        if args.lines:
            lines = lines[:args.lines]
            input_path = os.path.join(tmp, "head.txt")
            with open(input_path, "w", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in lines))
        out_path = os.path.join(tmp, "transduce.out")
        cmd = transduce_command(args, input_path, out_path, beam, alpha, max_extra, args.batch)
        print("transduce:", shell(cmd, "RAYON_NUM_THREADS=1"), flush=True)
        wall, _, _ = run_transduce(cmd)
        theirs = read_lines(out_path)
        if len(theirs) < len(lines):  # an output of only empty lines
            theirs += [""] * (len(lines) - len(theirs))
        print(f"  {wall:.2f} s", flush=True)

        print(f"ct2: {args.ct2}, beam {beam}, alpha {alpha}, max_extra {max_extra}, "
              f"batches of <= {args.batch} sentences of equal source length", flush=True)
        engine = Ct2(bundle, args.ct2, threads=args.threads, compute_type=args.compute_type)
        t0 = time.perf_counter()
        ours, spent, stats = engine.translate(lines, beam, alpha, max_extra, args.batch,
                                              exact_limits=True)
        print(f"  {time.perf_counter() - t0:.2f} s ({spent:.2f} s in translate_batch)")

    limited = set(stats["hit_limit"])
    if args.save:
        # A line CT2 stopped at the length limit has no forced EOS and may differ for that
        # reason alone (module docs): it keeps transduce's output, said so below.
        with open(args.save, "w", encoding="utf-8") as f:
            f.write("".join((theirs[i] if i in limited else ours[i]) + "\n"
                            for i in range(len(lines))))
        kept = sorted(i + 1 for i in limited if ours[i] != theirs[i])
        print(f"CT2's outputs written to {args.save}"
              + (f" (transduce's on lines {kept}, where CT2 hit the length limit)" if kept else ""))
    same = [i for i in range(len(lines)) if ours[i] == theirs[i]]
    differ = [i for i in range(len(lines)) if ours[i] != theirs[i]]
    unexplained = [i for i in differ if i not in limited]
    print(f"identical: {len(same)}/{len(lines)} lines")
    if stats["hit_limit"]:
        print(f"stopped by the length limit in CT2 (no EOS): {len(stats['hit_limit'])} "
              f"lines {stats['hit_limit'][:10]}")
    if stats["pad_or_bos"]:
        print(f"<pad>/<s> in CT2's output: {len(stats['pad_or_bos'])} lines")
    for i in differ[:args.show]:
        print(f"--- line {i + 1}: {lines[i]}")
        print(f"  transduce: {theirs[i]}")
        print(f"  ct2:       {ours[i]}")
        src = bundle.encode(lines[i])
        ct2_hyp = stats["hypotheses"][i][0]
        their_tokens = bundle.tokenizer.encode(
            theirs[i], add_special_tokens=False).tokens if theirs[i] else []
        s_theirs, lp_theirs = engine.gnmt_score(src, their_tokens + [EOS], alpha)
        s_ours, lp_ours = engine.gnmt_score(src, ct2_hyp + [EOS], alpha)
        print(f"  GNMT score under CT2 (log P / lp): transduce's {s_theirs:.6f} "
              f"(log P {lp_theirs:.6f}, {len(their_tokens) + 1} tokens), "
              f"ct2's {s_ours:.6f} (log P {lp_ours:.6f}, {len(ct2_hyp) + 1} tokens), "
              f"difference {s_ours - s_theirs:+.2e}")
    if differ and not unexplained:
        print(f"every differing line ({len(differ)}) is one CT2 stopped at the length limit")
    if unexplained:
        print(f"{len(unexplained)} differing lines that the length limit does not explain")
        sys.exit(1)


# --- race --------------------------------------------------------------------------------


def cmd_race(args):
    check_bin(args.bin)
    import ctranslate2

    bundle_probe = Bundle(args.bundle)
    max_extra = args.max_extra if args.max_extra is not None else bundle_probe.decoding["maxExtra"]
    if args.alpha is None:
        args.alpha = bundle_probe.decoding["alpha"]
    del bundle_probe
    with tempfile.TemporaryDirectory() as tmp:
        input_path = plain_input(args.input, tmp)
        out_path = os.path.join(tmp, "transduce.out")
        cmd = transduce_command(args, input_path, out_path, args.beam, args.alpha, max_extra,
                                args.batch)
        print(f"input: {args.input} ({len(read_lines(input_path))} lines); beam {args.beam}, "
              f"alpha {args.alpha}, max_extra {max_extra}, batch {args.batch}, "
              f"{args.rounds} rounds, interleaved; both tokenize with the bundle's "
              f"tokenizer.json")
        print("transduce:", shell(cmd, "RAYON_NUM_THREADS=1"))
        print(f"ct2 {ctranslate2.__version__}: Translator({args.ct2!r}, device='cpu', "
              f"compute_type={args.compute_type!r}, inter_threads=1, intra_threads=1); per batch "
              f"translate_batch(beam_size={args.beam}, num_hypotheses={args.beam}, "
              f"max_batch_size={args.batch}, batch_type='examples', patience=1, "
              f"length_penalty=α·m/(5+m), return_scores={args.beam > 1}, "
              f"return_end_token=True, max_decoding_length=longest+{max_extra}-1, "
              f"min_decoding_length=0, max_input_length=0) + GNMT rescoring", flush=True)

        times = {"ct2_translate": [], "ct2_total": [], "ct2_cpu": [],
                 "transduce": [], "transduce_cpu": []}
        ours = theirs = None
        peaks = []
        for r in range(args.rounds):
            # CT2: model load + tokenization + translation + detokenization, in process.
            cpu0 = time.process_time()
            t0 = time.perf_counter()
            bundle = Bundle(args.bundle)
            lines = read_lines(input_path)
            engine = Ct2(bundle, args.ct2, threads=1, compute_type=args.compute_type)
            ours, spent, _ = engine.translate(lines, args.beam, args.alpha, max_extra,
                                              args.batch, exact_limits=False)
            total = time.perf_counter() - t0
            cpu = time.process_time() - cpu0
            del engine
            times["ct2_translate"].append(spent)
            times["ct2_total"].append(total)
            times["ct2_cpu"].append(cpu)
            print(f"round {r + 1}: ct2 {spent:.2f} s translate_batch, {total:.2f} s with load "
                  f"(cpu {cpu:.2f} s)", flush=True)
            wall, cpu, peak = run_transduce(cmd)
            peaks.append(peak)
            times["transduce"].append(wall)
            times["transduce_cpu"].append(cpu)
            print(f"round {r + 1}: transduce {wall:.2f} s wall (cpu {cpu:.2f} s)", flush=True)
            theirs = read_lines(out_path)
        theirs += [""] * (len(ours) - len(theirs))
        same = sum(a == b for a, b in zip(ours, theirs))

    best = {k: min(v) for k, v in times.items()}
    med = {k: statistics.median(v) for k, v in times.items()}
    print()
    print(f"{'':34} {'best s':>9} {'median s':>9}")
    print(f"{'ct2 translate_batch only':34} {best['ct2_translate']:9.2f} {med['ct2_translate']:9.2f}")
    print(f"{'ct2 incl. load + tokenization':34} {best['ct2_total']:9.2f} {med['ct2_total']:9.2f}")
    print(f"{'transduce (subprocess wall)':34} {best['transduce']:9.2f} {med['transduce']:9.2f}")
    print(f"{'transduce / ct2 translate_batch':34} "
          f"{best['transduce'] / best['ct2_translate']:9.2f} "
          f"{med['transduce'] / med['ct2_translate']:9.2f}")
    print(f"{'transduce / ct2 incl. load':34} {best['transduce'] / best['ct2_total']:9.2f} "
          f"{med['transduce'] / med['ct2_total']:9.2f}")
    print(f"cpu/wall: ct2 {med['ct2_cpu'] / med['ct2_total']:.2f}, "
          f"transduce {med['transduce_cpu'] / med['transduce']:.2f} (1.00 = one thread busy)")
    print(f"outputs identical: {same}/{len(ours)} lines")
    # Peak resident memory (KB on Linux): this process holds CT2 (and Python, numpy and
    # the tokenizer); transduce's is GNU time's figure for its runs.
    rss = {"ct2_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
           "transduce_kb": None if None in peaks else max(peaks)}
    ours_mb = "unknown (no /usr/bin/time)" if rss["transduce_kb"] is None \
        else f"{rss['transduce_kb'] / 1024:.0f} MB"
    print(f"peak resident memory: ct2's process {rss['ct2_kb'] / 1024:.0f} MB, "
          f"transduce {ours_mb}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"beam": args.beam, "batch": args.batch, "alpha": args.alpha,
                       "rounds": args.rounds, "times": times, "identical": same,
                       "lines": len(ours), "rss": rss}, f, indent=2)


# --- table --------------------------------------------------------------------------------


def cmd_pick(args):
    """Writes the first --count lines of --input with exactly --pieces source pieces under
    the bundle's tokenizer (the race's short sentences of one length)."""
    bundle = Bundle(args.bundle)
    picked = []
    for line in read_lines(args.input):
        if line.strip() and len(bundle.encode(line)) == args.pieces and line not in picked:
            picked.append(line)
            if len(picked) == args.count:
                break
    if len(picked) < args.count:
        sys.exit(f"only {len(picked)} lines of {args.input} have {args.pieces} pieces")
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(picked) + "\n")
    print(f"wrote {args.out}: {len(picked)} lines of {args.pieces} pieces")


def cmd_table(args):
    """Every configuration of the race (greedy and beam, batch 1 and 32) on every model
    given, each race a process of its own (so each peak memory is its own), then one
    table of transduce's time over CT2's (with its load, the like-for-like figure)."""
    rows = []
    for spec in args.model:
        try:
            name, bundle, ct2, input_path, beam, max_extra = spec.split(",")
        except ValueError:
            sys.exit(f"--model {spec!r}: expected NAME,BUNDLE,CT2_DIR,INPUT,BEAM,MAX_EXTRA")
        for b, batch in ((1, 1), (1, 32), (int(beam), 1), (int(beam), 32)):
            with tempfile.NamedTemporaryFile(suffix=".json") as out:
                cmd = [sys.executable, os.path.abspath(__file__), "race", "--bundle", bundle,
                       "--ct2", ct2, "--input", input_path, "--beam", str(b), "--batch",
                       str(batch), "--rounds", str(args.rounds), "--max-extra", max_extra,
                       "--compute-type", args.compute_type, "--bin", args.bin,
                       "--json", out.name]
                print("$", shell(cmd), flush=True)
                done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
                print(done.stdout, flush=True)
                if done.returncode != 0:
                    sys.exit(f"race failed: {shell(cmd)}")
                result = json.load(open(out.name, encoding="utf-8"))
            t = result["times"]
            rows.append((name, "greedy" if b == 1 else f"beam {b}", batch,
                         min(t["transduce"]) / min(t["ct2_total"]),
                         statistics.median(t["transduce"]) / statistics.median(t["ct2_total"]),
                         min(t["transduce"]), min(t["ct2_total"]),
                         (result["rss"]["transduce_kb"] or float("nan")) / 1024,
                         result["rss"]["ct2_kb"] / 1024,
                         f"{result['identical']}/{result['lines']}"))
    print("| model | search | batch | transduce / CT2 (best, median) | transduce s | CT2 s "
          "(with load) | peak MB, transduce / CT2's process | outputs identical |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | **{r[3]:.2f}** / {r[4]:.2f} | {r[5]:.2f} | "
              f"{r[6]:.2f} | {r[7]:.0f} / {r[8]:.0f} | {r[9]} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("export", help="write a bundle as a CT2 model directory (float32)")
    p.add_argument("--bundle", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--positions", type=int, default=1024,
                   help="rows of the position table: longest source + max_extra must fit")
    p.set_defaults(run=cmd_export)

    for name, helptext in (("check", "compare CT2's and transduce's outputs line by line"),
                           ("race", "time both engines at one thread")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--bundle", required=True)
        p.add_argument("--ct2", required=True)
        p.add_argument("--input", required=True, help="one sentence a line, plain or gzip")
        p.add_argument("--bin", default=DEFAULT_BIN, help="the transduce binary")
        p.add_argument("--compute-type", default="float32", choices=["float32", "int8"],
                       help="CT2's compute type (int8: weights quantized per row at load, "
                            "activations per row, as an int8 bundle does in transduce)")
        p.add_argument("--max-extra", type=int, default=None,
                       help="default: the bundle's decoding.maxExtra")
        if name == "check":
            p.add_argument("--beam", type=int, default=None, help="default: the bundle's")
            p.add_argument("--alpha", type=float, default=None, help="default: the bundle's")
            p.add_argument("--batch", type=int, default=32,
                           help="sentences per batch (transduce --batch-size)")
            p.add_argument("--lines", type=int, default=0, help="only the first N lines")
            p.add_argument("--show", type=int, default=5, help="differing lines to print")
            p.add_argument("--threads", type=int, default=1, help="CT2 intra_threads")
            p.add_argument("--save", help="also write CT2's outputs here, one line each")
            p.set_defaults(run=cmd_check)
        else:
            p.add_argument("--beam", type=int, required=True)
            p.add_argument("--alpha", type=float, default=None, help="default: the bundle's")
            p.add_argument("--batch", type=int, required=True)
            p.add_argument("--rounds", type=int, default=3)
            p.add_argument("--json", help="also write the times here")
            p.set_defaults(run=cmd_race)
    p = sub.add_parser("pick", help="lines of exactly N source pieces (short-sentence races)")
    p.add_argument("--bundle", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--pieces", type=int, required=True)
    p.add_argument("--count", type=int, default=300)
    p.add_argument("--out", required=True)
    p.set_defaults(run=cmd_pick)

    p = sub.add_parser("table", help="greedy and beam at batch 1 and 32 on each model: one table")
    p.add_argument("--model", action="append", required=True,
                   metavar="NAME,BUNDLE,CT2_DIR,INPUT,BEAM,MAX_EXTRA")
    p.add_argument("--bin", default=DEFAULT_BIN, help="the transduce binary")
    p.add_argument("--compute-type", default="int8", choices=["float32", "int8"])
    p.add_argument("--rounds", type=int, default=3)
    p.set_defaults(run=cmd_table)
    for p in (sub.choices["check"], sub.choices["race"], sub.choices["table"]):
        p.add_argument("--isa", choices=sorted(ISA_ENV),
                       help="force both engines onto this instruction set, CT2's matrix "
                            "products (oneDNN, MKL) included: measures the AVX2 paths on a "
                            "CPU that has AVX-512")
    args = ap.parse_args()
    if getattr(args, "isa", None):
        # Before ctranslate2 is imported: oneDNN and MKL read theirs once, at load. The
        # races run as subprocesses and inherit it.
        os.environ.update(ISA_ENV[args.isa])
    args.run(args)


if __name__ == "__main__":
    main()
