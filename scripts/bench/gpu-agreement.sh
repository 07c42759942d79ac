#!/usr/bin/env bash
# The GPU decoder against the host decoder on a real corpus: translates the first LINES
# lines of INPUT with BUNDLE on `--backend cpu` and `--backend wgpu`, greedy and beam 4, and
# counts identical output lines (the goal is ≥ 99%; the figures in docs/BENCHMARKS.md
# "The GPU decoder" were 100%). Prints the differing lines; exits 1 below 99%.
#
#   scripts/bench/gpu-agreement.sh web/models/en-de ../shared/data/multi30k/test2016.en.gz [1000] [BIN]
#
# BIN defaults to $CARGO_TARGET_DIR/debug/transduce (a carried binary on a GPU machine).
# Both run `--compute f32`: the GPU decoder multiplies in f32 (an int8 bundle's weights as
# q·scale), and the host's f32 arithmetic is its reference, not the host's int8 products.
set -euo pipefail
bundle=${1:?usage: scripts/bench/gpu-agreement.sh BUNDLE INPUT [LINES] [BIN]}
input=${2:?usage: scripts/bench/gpu-agreement.sh BUNDLE INPUT [LINES] [BIN]}
lines=${3:-1000}
bin=${4:-${CARGO_TARGET_DIR:-$HOME/.cache/transduce-target}/debug/transduce}
[ -r "$input" ] || { echo "scripts/bench/gpu-agreement.sh: cannot read $input" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
case "$input" in
    # head may close the pipe early (fewer lines than the file): not an error.
    *.gz) { gzip -dc "$input" || true; } | head -n "$lines" >"$dir/in" ;;
    *) { cat "$input" || true; } | head -n "$lines" >"$dir/in" ;;
esac
status=0
for beam in 1 4; do
    for backend in cpu wgpu; do
        start=$(date +%s%N)
        "$bin" translate --model "$bundle" --backend "$backend" --compute f32 --beam "$beam" \
            --input "$dir/in" --output "$dir/$backend.$beam" --quiet 2>"$dir/log" ||
            { cat "$dir/log" >&2; exit 1; }
        echo "$backend beam $beam: $((($(date +%s%N) - start) / 1000000)) ms"
    done
    total=$(wc -l <"$dir/cpu.$beam")
    same=$(paste -d '\n' "$dir/cpu.$beam" "$dir/wgpu.$beam" | awk 'NR % 2 { a = $0; next } a == $0 { n++ } END { print n + 0 }')
    echo "beam $beam: $same of $total lines identical"
    paste -d '\t' "$dir/cpu.$beam" "$dir/wgpu.$beam" | awk -F '\t' '$1 != $2 { print "  line " NR ":\n    cpu:  " $1 "\n    wgpu: " $2 }'
    if [ $((same * 100)) -lt $((total * 99)) ]; then status=1; fi
done
exit $status
