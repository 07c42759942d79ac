#!/usr/bin/env python3
"""Builds the adaptation set of docs/RESULTS.md ("Adaptation"): a term the shipped de-en
model gets wrong ("Wien", which it renders "guy", "the woods", "Walls", ...), in natural
sentences from Tatoeba (CC-BY 2.0 FR). Pairs whose German and English both name Boston get
Wien / Vienna instead. The pairs to adapt on come from the train split (40, distinct German
sentences, a fixed random sample); the unseen test sentences are every such pair of the test
split (no sentence of which occurs in train).

    python3 scripts/adapt-set.py ../shared/data/tatoeba-en-de tests/fixtures/adapt
"""
import gzip
import random
import re
import sys
from pathlib import Path

data, out = Path(sys.argv[1]), Path(sys.argv[2])


def pairs(split):
    de = gzip.open(data / f"{split}.de.gz", "rt", encoding="utf-8").read().splitlines()
    en = gzip.open(data / f"{split}.en.gz", "rt", encoding="utf-8").read().splitlines()
    found = []
    for d, e in zip(de, en):
        if re.search(r"\bBoston\b", d) and re.search(r"\bBoston\b", e) and "Bostons" not in d and "Boston's" not in e:
            found.append((re.sub(r"\bBoston\b", "Wien", d), re.sub(r"\bBoston\b", "Vienna", e)))
    return found


train = pairs("train")
random.Random(7).shuffle(train)
shown, seen = [], set()
for d, e in train:
    if d not in seen:
        seen.add(d)
        shown.append((d, e))
    if len(shown) == 40:
        break
out.mkdir(parents=True, exist_ok=True)
for name, rows in (("wien.pairs.tsv", shown), ("wien.test.tsv", pairs("test"))):
    (out / name).write_text("".join(f"{d}\t{e}\n" for d, e in rows), encoding="utf-8")
    print(f"{out / name}: {len(rows)} pairs")
