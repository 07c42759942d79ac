#!/usr/bin/env bash
# Downloads WMT14 English–German, the paper's translation data (§5.1: about 4.5 million
# sentence pairs), as plain parallel text that `transduce prepare` reads:
#
#   scripts/get-wmt14.sh [OUT]        (default OUT: data/wmt14-en-de; needs internet)
#
# train.{en,de}: Europarl v7 + Common Crawl + News Commentary v9 (the WMT14 training set);
# valid.{en,de}: newstest2013; test.{en,de}: newstest2014 (the paper's test set, the
# "full" version sacreBLEU calls wmt14/full). Then, for the paper's base model:
#
#   transduce prepare --src OUT/train.en --tgt OUT/train.de --valid-src OUT/valid.en \
#       --valid-tgt OUT/valid.de --vocab-size 37000 --out work/wmt14
#   transduce train --data work/wmt14 --out runs/wmt14-base --preset base --backend wgpu \
#       --max-tokens 25000 --accum 8 --checkpoint-minutes 10
set -euo pipefail
OUT=${1:-data/wmt14-en-de}
mkdir -p "$OUT/raw"
cd "$OUT"

fetch() { # fetch URL: download once into raw/
    local file="raw/${1##*/}"
    if [ ! -s "$file" ]; then
        echo "downloading $1" >&2
        curl -fL --retry 3 -o "$file.part" "$1" && mv "$file.part" "$file"
    fi
    echo "$file"
}

for url in \
    https://www.statmt.org/europarl/v7/de-en.tgz \
    https://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz \
    https://www.statmt.org/wmt14/training-parallel-nc-v9.tgz \
    https://www.statmt.org/wmt14/dev.tgz \
    https://www.statmt.org/wmt14/test-full.tgz; do
    tar -xzf "$(fetch "$url")" -C raw
done

# The three training corpora, in one order for both sides.
train_en=(raw/europarl-v7.de-en.en raw/commoncrawl.de-en.en raw/training/news-commentary-v9.de-en.en)
train_de=(raw/europarl-v7.de-en.de raw/commoncrawl.de-en.de raw/training/news-commentary-v9.de-en.de)
cat "${train_en[@]}" > train.en
cat "${train_de[@]}" > train.de
cp raw/dev/newstest2013.en valid.en
cp raw/dev/newstest2013.de valid.de
# newstest2014 comes as SGML: keep the text of each <seg>.
seg() { sed -n 's/^.*<seg[^>]*>\(.*\)<\/seg>.*$/\1/p' "$1" | sed 's/&lt;/</g; s/&gt;/>/g; s/&quot;/"/g; s/&apos;/'"'"'/g; s/&amp;/\&/g'; }
seg raw/test-full/newstest2014-deen-src.en.sgm > test.en
seg raw/test-full/newstest2014-deen-ref.de.sgm > test.de

for f in train valid test; do
    en=$(wc -l < "$f.en")
    de=$(wc -l < "$f.de")
    [ "$en" -eq "$de" ] || { echo "error: $f.en has $en lines but $f.de has $de" >&2; exit 1; }
    echo "$f: $en pairs"
done
