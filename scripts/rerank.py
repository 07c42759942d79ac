#!/usr/bin/env python3
"""Picks each line's best translation from an n-best list by a weighted sum of models' scores.

    scripts/rerank.py --nbest LIST --scores A.sc --scores B.sc [--weights 0.6,0.4] \
        [--alpha 2.5] [--lines N] > best.txt

LIST is an n-best list as `transduce translate --nbest` writes it (`LINE ||| TEXT ||| …`, LINE
counted from 0); several lists may be concatenated, and a translation that appears twice for a
line counts once. Each --scores file is what `transduce score --nbest --tgt LIST` wrote for one
model: `LOG-PROB<TAB>WORDPIECES` per entry of LIST, in order. A translation's score is
Σ_m w_m · log p_m / lp(|Y|_m), each model's log-probability over the GNMT length penalty of its
own wordpiece count (§6.1), so models with different vocabularies combine: an ensemble by
rescoring where the shared-vocabulary ensemble of `translate --model A --model B` cannot run.
Writes one line per source line, 0 .. max LINE (or --lines N); a line without candidates stays
empty.
"""

import argparse
import sys


def length_penalty(n, alpha):
    return ((5.0 + n) / 6.0) ** alpha


def fail(message):
    sys.exit(f"rerank.py: {message}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nbest", required=True)
    ap.add_argument("--scores", action="append", required=True)
    ap.add_argument("--weights", help="one per --scores, comma-separated (default: equal)")
    ap.add_argument("--alpha", type=float, default=0.6, help="length penalty α (default 0.6)")
    ap.add_argument("--lines", type=int, help="source lines (default: the largest LINE + 1)")
    args = ap.parse_args()
    if args.weights:
        try:
            weights = [float(w) for w in args.weights.split(",")]
        except ValueError:
            fail(f"--weights {args.weights}: not comma-separated numbers")
    else:
        weights = [1.0 / len(args.scores)] * len(args.scores)
    if len(weights) != len(args.scores):
        fail(f"{len(weights)} weights for {len(args.scores)} --scores files")

    with open(args.nbest, encoding="utf-8") as f:
        entries = []
        for n, line in enumerate(f, 1):
            fields = line.rstrip("\n").split(" ||| ")
            if len(fields) < 2 or not fields[0].strip().isdigit():
                fail(f"{args.nbest}, line {n}: not an n-best entry (`LINE ||| TEXT ||| …`)")
            entries.append((int(fields[0]), fields[1]))
    totals = [0.0] * len(entries)
    for path, weight in zip(args.scores, weights):
        with open(path, encoding="utf-8") as f:
            rows = f.read().splitlines()
        if len(rows) != len(entries):
            fail(f"{path} has {len(rows)} lines, {args.nbest} has {len(entries)} entries")
        for k, row in enumerate(rows):
            try:
                log_prob, pieces = row.split("\t")
                totals[k] += weight * float(log_prob) / length_penalty(int(pieces), args.alpha)
            except ValueError:
                fail(f"{path}, line {k + 1}: not `LOG-PROB<TAB>WORDPIECES`")

    lines = args.lines if args.lines is not None else max((i for i, _ in entries), default=-1) + 1
    best = [None] * lines
    for (i, text), total in zip(entries, totals):
        if i >= lines:
            fail(f"{args.nbest}: LINE {i} is past --lines {lines}")
        # Strictly greater: on a tie the earlier entry (the first list's) stays.
        if best[i] is None or total > best[i][0]:
            best[i] = (total, text)
    out = sys.stdout
    for b in best:
        out.write((b[1] if b else "") + "\n")


if __name__ == "__main__":
    main()
