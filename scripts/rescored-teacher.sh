#!/usr/bin/env bash
# A teacher for sequence-level distillation (Kim & Rush 2016) from two models that share
# no vocabulary: each line of IN is translated by bundle A and by bundle B (beam search,
# NBEST best each), every candidate is scored under both (`transduce score`), and OUT gets
# the candidate with the higher weighted score (scripts/rerank.py: Σ w·log p / lp, α ALPHA).
#
#   scripts/rescored-teacher.sh IN OUT A B [WEIGHT_A] [ALPHA] [NBEST]
#
# WEIGHT_A (default 0.6) is A's weight, B's is 1 − WEIGHT_A. Intermediate files go to
# OUT.work/ and are reused, so a stopped run resumes. T names the binary (default: the
# release build in the build cache).
set -euo pipefail
[ $# -ge 4 ] || { sed -n 2,11p "$0" >&2; exit 2; }
IN=$1 OUT=$2 A=$3 B=$4 WA=${5:-0.6} ALPHA=${6:-} NBEST=${7:-1}
HERE=$(cd "$(dirname "$0")" && pwd)
T=${T:-${CARGO_TARGET_DIR:-$HOME/.cache/transduce-target}/release/transduce}
[ -x "$T" ] || { echo "no transduce binary at $T (set T)" >&2; exit 1; }
W="$OUT.work"
mkdir -p "$W"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
# Each model's n-best list, side by side (the CPU decoder runs on one core).
nbest() {
    local model=$1 out=$2
    [ -f "$out" ] || {
        "$T" translate --model "$model" --input "$IN" --nbest "$NBEST" --beam "$((NBEST > 4 ? NBEST : 4))" \
            --quiet --output "$out.part"
        mv "$out.part" "$out"
    }
}
log "translating $IN with $A and $B"
nbest "$A" "$W/a.nbest" &
pa=$!
nbest "$B" "$W/b.nbest" &
pb=$!
wait "$pa" && wait "$pb"
# One list, each line's candidates together, a translation both models gave once.
[ -f "$W/union.nbest" ] || {
    cat "$W/a.nbest" "$W/b.nbest" | awk -F' [|][|][|] ' '!seen[$1 FS $2]++ { print $1 " ||| " $2 }' |
        sort -t'|' -k1,1n -s > "$W/union.part"
    mv "$W/union.part" "$W/union.nbest"
}
log "scoring $(wc -l < "$W/union.nbest") candidates under both models"
for m in a b; do
    model=$A
    [ $m = a ] || model=$B
    [ -f "$W/$m.scores" ] || {
        "$T" score --model "$model" --src "$IN" --tgt "$W/union.nbest" --nbest \
            --output "$W/$m.scores.part"
        mv "$W/$m.scores.part" "$W/$m.scores"
    }
done
alpha=${ALPHA:-$(grep -o '"alpha": *[0-9.]*' "$A/config.json" | grep -o '[0-9.]*$')}
python3 "$HERE/rerank.py" --nbest "$W/union.nbest" --scores "$W/a.scores" --scores "$W/b.scores" \
    --weights "$WA,$(python3 -c "print(round(1 - $WA, 6))")" --alpha "$alpha" \
    --lines "$(wc -l < "$IN")" > "$OUT.part"
mv "$OUT.part" "$OUT"
log "wrote $OUT"
