#!/usr/bin/env bash
# Reproduces the demo bundles shipped in web/models/ from the data, on this machine's CPU.
#
#   scripts/train-demo.sh [translate|parse|all]      (default: all)
#
# DATA (default ../shared/data) holds multi30k/ and ptb-sample/; WORK (default
# work/demo) receives prepared data, runs, outputs and scores. Training stops at the shipped
# bundles' step counts (their config.json: 4,387 and 3,600) or after the minutes below,
# whichever comes first, and checkpoints every 100 / 300 steps as the shipped runs did (the
# translator's at about its 4-minute interval), so the same training and the same averaging
# window come out on any machine; the minutes are a cap. Stopping it earlier (Ctrl-C)
# loses at most one checkpoint interval, and running the script again resumes the run
# where it stopped (`transduce train --resume`) instead of starting over.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
ensure_rust

DATA=${DATA:-../shared/data}
WORK=${WORK:-work/demo}
# The shipped bundles' step counts, from their own provenance.
shipped_steps() {
    grep -o '"steps": *[0-9]*' "web/models/$1/config.json" | grep -o '[0-9]*$'
}
TRANSLATE_STEPS=${TRANSLATE_STEPS:-$(shipped_steps multi30k-en-de)}
TRANSLATE_MINUTES=${TRANSLATE_MINUTES:-150}
PARSE_STEPS=${PARSE_STEPS:-$(shipped_steps ptb-parser)}
PARSE_MINUTES=${PARSE_MINUTES:-60}
what=${1:-all}

log "building the transduce CLI"
cargo build --workspace --locked
T="$CARGO_TARGET_DIR/debug/transduce"
mkdir -p "$WORK"

# train RUN MINUTES ARGS...: a new run, or the same run resumed.
train() {
    local run=$1 minutes=$2
    shift 2
    if [ -f "$run/run.json" ]; then
        log "resuming $run"
        "$T" train --resume --out "$run" --max-minutes "$minutes"
    else
        "$T" train --out "$run" --max-minutes "$minutes" "$@"
    fi
}

if [ "$what" = translate ] || [ "$what" = all ]; then
    D="$DATA/multi30k"
    W="$WORK/multi30k"
    [ -f "$W/data/train.bin" ] || "$T" prepare --src "$D/train.en.gz" --tgt "$D/train.de.gz" \
        --valid-src "$D/val.en.gz" --valid-tgt "$D/val.de.gz" --vocab-size 8000 --out "$W/data"
    train "$W/run" "$TRANSLATE_MINUTES" --max-steps "$TRANSLATE_STEPS" --data "$W/data" \
        --preset mini --backend cpu --max-tokens 2048 --warmup 400 --lr-factor 0.4 --checkpoint-steps 100 --keep 12
    "$T" average --run "$W/run" --last 6 --out "$W/averaged.safetensors"
    "$T" export --model "$W/run" --checkpoint "$W/averaged.safetensors" --f16 \
        --source en --target de --out "$W/bundle"
    # The length penalty is chosen on val, as §6.1 chose α 0.6 on its development set.
    best_alpha=0.6 best_val=0
    for alpha in 0.6 1.0 1.5 2.0 3.0; do
        "$T" translate --model "$W/bundle" --alpha "$alpha" --input "$D/val.en.gz" \
            --output "$W/val.$alpha.de" --quiet
        val=$("$T" eval bleu --hyp "$W/val.$alpha.de" --ref "$D/val.de.gz" | awk '{ print $3 }')
        log "val BLEU with alpha $alpha: $val"
        if awk -v a="$val" -v b="$best_val" 'BEGIN { exit !(a > b) }'; then
            best_alpha=$alpha best_val=$val
        fi
    done
    "$T" translate --model "$W/bundle" --alpha "$best_alpha" --input "$D/test2016.en.gz" \
        --output "$W/test2016.hyp.de"
    "$T" eval bleu --hyp "$W/test2016.hyp.de" --ref "$D/test2016.de.gz" | tee "$W/bleu.txt"
    bleu=$(awk '{ print $3; exit }' "$W/bleu.txt")
    "$T" export --model "$W/run" --checkpoint "$W/averaged.safetensors" --f16 \
        --source en --target de --out "$W/bundle" --alpha "$best_alpha" \
        --metric "bleu_test2016=$bleu" --metric "bleu_signature=$(cut -d' ' -f1 "$W/bleu.txt")" \
        --metric "bleu_val=$best_val" --command "scripts/train-demo.sh translate"
    log "English→German bundle in $W/bundle (test2016 BLEU $bleu); copy it to web/models/multi30k-en-de"
fi

if [ "$what" = parse ] || [ "$what" = all ]; then
    D="$DATA/ptb-sample"
    W="$WORK/ptb"
    [ -f "$W/data/train.bin" ] || "$T" prepare --task parse --trees "$D/train.trees.gz" \
        --valid-trees "$D/dev.trees.gz" --vocab-size 4000 --max-len 512 --out "$W/data"
    train "$W/run" "$PARSE_MINUTES" --max-steps "$PARSE_STEPS" --data "$W/data" --preset mini \
        --dropout 0.2 --backend cpu --max-tokens 2048 --warmup 400 --lr-factor 0.5 --checkpoint-steps 300 --keep 10 \
        --word-focus
    "$T" average --run "$W/run" --last 4 --out "$W/averaged.safetensors"
    "$T" export --task parse --model "$W/run" --checkpoint "$W/averaged.safetensors" --f16 \
        --out "$W/bundle"
    zcat -f "$D/test.trees.gz" > "$W/test.gold"
    "$T" parse --model "$W/bundle" --input "$W/test.gold" --output "$W/test.constrained"
    "$T" parse --model "$W/bundle" --input "$W/test.gold" --output "$W/test.unconstrained" --no-constraint
    "$T" parse --right-branching --input "$W/test.gold" --output "$W/test.right-branching"
    for kind in constrained unconstrained right-branching; do
        "$T" eval f1 --gold "$W/test.gold" --test "$W/test.$kind" > "$W/f1.$kind.txt"
        log "$kind: $(grep -m1 'Bracketing FMeasure' "$W/f1.$kind.txt")"
    done
    f1=$(awk '/Bracketing FMeasure/ { print $NF; exit }' "$W/f1.constrained.txt")
    "$T" export --task parse --model "$W/run" --checkpoint "$W/averaged.safetensors" --f16 \
        --out "$W/bundle" --metric "f1_test=$f1" --command "scripts/train-demo.sh parse"
    log "parser bundle in $W/bundle (test F1 $f1); copy it to web/models/ptb-parser"
fi
