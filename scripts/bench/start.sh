#!/usr/bin/env bash
# The start of a GPU training run, cold and warm: for each autotune level, one process with
# an empty GPU cache (cold), then the same command again (warm: the decisions kept), each
# `transduce bench --training-only` reporting its start (first step, tunes, kernels
# compiled, steady rate) and its steady step time. Prints one table (Markdown).
#
#   scripts/bench/start.sh                                   # defaults below
#   LEVELS="minimal balanced extensive full" PRESET=small BACKEND=cuda BATCH=12000 \
#       PRECISION=bf16 STEPS=60 scripts/bench/start.sh      # on a lent GPU
#
# Environment:
#   BIN        transduce binary (default: $CARGO_TARGET_DIR/release/transduce, else debug)
#   BACKEND    wgpu or cuda (default wgpu)     PRESET   (default tiny)
#   BATCH      target tokens per step (1024)   PRECISION f32, f16 or bf16 (default f32)
#   STEPS      timed steps (30; the steady rate needs 20 steps near the median)
#   LEVELS     autotune levels (default: minimal balanced)
#   RUNS       runs per level after the cold one (default 1)
#   OUT        folder for the caches and the raw JSON (default: a temporary one)
# The drivers' own shader caches start empty with each level's cold run too (Mesa's, for
# lavapipe, and NVIDIA's: MESA_SHADER_CACHE_DIR and CUDA_CACHE_PATH inside the level's
# cache folder), so "cold" is a new machine; MESA_SHADER_CACHE_DISABLE=true shows the
# compiles our cache does not hold (WGSL is compiled by the driver every run).
set -euo pipefail
cd "$(dirname "$0")/../.."
target=${CARGO_TARGET_DIR:-$HOME/.cache/transduce-target}
BIN=${BIN:-$([ -x "$target/release/transduce" ] && echo "$target/release/transduce" || echo "$target/debug/transduce")}
BACKEND=${BACKEND:-wgpu}
PRESET=${PRESET:-tiny}
BATCH=${BATCH:-1024}
PRECISION=${PRECISION:-f32}
STEPS=${STEPS:-30}
LEVELS=${LEVELS:-minimal balanced}
RUNS=${RUNS:-1}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
results="$OUT/start.jsonl"
: > "$results"
for level in $LEVELS; do
  cache="$OUT/cache-$level"
  rm -rf "$cache"
  for run in cold $(seq -f 'warm%g' 1 "$RUNS"); do
    t0=$(date +%s.%N)
    json=$(CUBECL_AUTOTUNE_LEVEL=$level TRANSDUCE_CACHE_DIR=$cache \
      MESA_SHADER_CACHE_DIR=$cache/mesa CUDA_CACHE_PATH=$cache/nv "$BIN" bench \
      --preset "$PRESET" --backend "$BACKEND" --precision "$PRECISION" --training-only \
      --batch-tokens "$BATCH" --steps "$STEPS" --dropout 0 --json 2>"$OUT/$level-$run.log" | tail -1)
    t1=$(date +%s.%N)
    python3 - "$level" "$run" "$t0" "$t1" "$json" >> "$results" <<'EOF'
import json, sys
level, run, t0, t1, line = sys.argv[1:]
row = json.loads(line)
row.update(level=level, run=run, whole_s=float(t1) - float(t0))
print(json.dumps(row))
EOF
  done
done
python3 - "$results" "$PRESET" "$BACKEND" "$PRECISION" "$BATCH" <<'EOF'
import json, sys
path, preset, backend, precision, batch = sys.argv[1:]
rows = [json.loads(l) for l in open(path)]
print(f"{preset}, {backend}, {precision}, {batch} target tokens a step\n")
print("| level | run | whole command | first step | 20th step | tunes | compiled | steady rate from | steady step |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    s = r["start"]
    steady = f"step {s['steady_from_step']} ({s['steady_secs']:.1f} s)" if s.get("steady_from_step") else "not reached"
    s20 = f"{s['step20_secs']:.1f} s" if s.get("step20_secs") else "—"
    print(f"| {r['level']} | {r['run']} | {r['whole_s']:.1f} s | {s['first_step_secs']:.1f} s | {s20} | "
          f"{s['tunes']} | {s['compiled']} | {steady} | {r['step_ms']:.1f} ms |")
EOF
echo "raw: $results"
