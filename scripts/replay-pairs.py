#!/usr/bin/env python3
"""Writes each translator bundle's replay.tsv: 512 general sentence pairs that adaptation
(`transduce adapt`, the page's Adapt panel) mixes into every step so that a model learning
a visitor's words keeps what it knew. A fixed random sample of the Tatoeba train split
(CC-BY 2.0 FR, which any bundle may ship; the data every translator here trained on), in
the bundle's direction.

    python3 scripts/replay-pairs.py ../shared/data/tatoeba-en-de web/models
"""
import gzip
import random
import sys
from pathlib import Path

PAIRS = 512
SEED = 11

data, models = Path(sys.argv[1]), Path(sys.argv[2])
lines = {lang: gzip.open(data / f"train.{lang}.gz", "rt", encoding="utf-8").read().splitlines() for lang in ("en", "de")}
assert len(lines["en"]) == len(lines["de"])
rng = random.Random(SEED)
picked = [i for i in rng.sample(range(len(lines["en"])), 2 * PAIRS)
          if all("\t" not in lines[l][i] and lines[l][i].strip() for l in ("en", "de"))][:PAIRS]
for bundle, (src, tgt) in {"en-de": ("en", "de"), "de-en": ("de", "en"),
                           "en-de-free": ("en", "de"), "de-en-free": ("de", "en")}.items():
    out = models / bundle / "replay.tsv"
    out.write_text("".join(f"{lines[src][i]}\t{lines[tgt][i]}\n" for i in picked), encoding="utf-8")
    print(f"{out}: {len(picked)} pairs, {out.stat().st_size} bytes")
