#!/usr/bin/env bash
# The GPU decoder's measurements for a lent GPU, in one call: the loop-bounding
# switch first, then the per-kernel table, then sentences/s against the host decoder.
# Writes each table to OUT (default: $OUT, else ./decoder-gpu) and prints them.
#
#   scripts/bench/decoder-gpu.sh [BIN]
#
# BIN defaults to $CARGO_TARGET_DIR/debug/transduce (a carried binary on a GPU machine).
# Environment: MODELS (default "web/models/en-de"), INPUT (default Multi30k test2016.en.gz,
# else the fixture sentences), LINES (300), BATCHES (1,32,128), BEAMS (1,4), PRESETS
# (random-weight presets also profiled, default "base"). Rehearse on lavapipe with
# LINES=8 BATCHES=1,8 PRESETS=small.
set -euo pipefail
bin=${1:-${CARGO_TARGET_DIR:-$HOME/.cache/transduce-target}/debug/transduce}
out=${OUT:-decoder-gpu}
models=${MODELS:-web/models/en-de}
input=${INPUT:-../shared/data/multi30k/test2016.en.gz}
[ -r "$input" ] || input=tests/fixtures/browser-sentences.en
lines=${LINES:-300}
batches=${BATCHES:-1,32,128}
beams=${BEAMS:-1,4}
presets=${PRESETS:-base}
[ -x "$bin" ] || { echo "scripts/bench/decoder-gpu.sh: no binary at $bin" >&2; exit 2; }
mkdir -p "$out"

run() { # NAME, then the command: its output to OUT/NAME.txt and the terminal
    local name=$1
    shift
    echo "==> $name: $*"
    "$@" 2>&1 | grep -v XDG_RUNTIME_DIR | tee "$out/$name.txt"
}

for model in $models; do
    id=$(basename "$model")
    # 1. Loop bounding (naga's forced iteration counter) off (the default) and on: the
    #    per-kernel table at batch 1 and 32, greedy and beam 4.
    run "$id-profile" "$bin" bench --model "$model" --backend wgpu --profile \
        --input "$input" --lines 8 --batches 1,32 --beams "$beams"
    TRANSDUCE_GPU_LOOP_BOUNDS=1 run "$id-profile-bounded" "$bin" bench --model "$model" \
        --backend wgpu --profile --input "$input" --lines 8 --batches 1,32 --beams "$beams"
    # 2. Sentences/s, GPU decoder and host decoder on all cores.
    run "$id-wgpu" "$bin" bench --model "$model" --backend wgpu --input "$input" \
        --lines "$lines" --batches "$batches" --beams "$beams"
    run "$id-cpu" "$bin" bench --model "$model" --backend cpu --input "$input" \
        --lines "$lines" --batches "$batches" --beams "$beams"
done
for preset in $presets; do
    run "random-$preset-profile" "$bin" bench --random-decoder --preset "$preset" \
        --backend wgpu --profile --lines 4 --batches 1 --beams "$beams"
done
echo "tables in $out/"
