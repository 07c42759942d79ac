#!/usr/bin/env bash
# One GPU visit records every GPU figure the docs ask for. A lent GPU machine is reached by
# one remote command at a time (at most 10 minutes), starts bare (no registry, no compiler)
# and may never come back, so everything is built here and measured there in one call:
#
#   scripts/gpu-lease.sh prepare     # here: the CUDA release binary (stripped, xz) in .dev/,
#                                    # the Vulkan and glvnd loaders' .debs in .gl/
#   scripts/gpu-lease.sh measure     # there: every measurement below, tables into $OUT
#   REHEARSAL=1 scripts/gpu-lease.sh measure   # here, on lavapipe, with the debug binary
#
# The device call (the `run` tool: carry .dev and .gl, the working tree travels itself):
#   OUT=$OUT bash scripts/gpu-lease.sh measure
# and the tables come back under $OUT: SUMMARY.md (every table, in order) and one file per
# part with its raw output. Each part has its own time budget (seconds, environment
# variables below), so a part that hangs or tunes for too long costs its budget, not the
# visit; the defaults add up to 580 s of the 600 a call may run.
#
# The parts, in order of how much the docs need them:
#   1. side   the training step against PyTorch (scripts/bench/gpu.sh): base at 25,000
#             tokens, replayed CUDA and wgpu against PyTorch eager and torch.compile, f32
#             and bf16 (docs/BENCHMARKS.md, "Training step")              BUDGET_SIDE=240
#   2. start  a training run's start, cold and warm (scripts/bench/start.sh): small on CUDA,
#             bf16, an empty GPU cache then the same command again        BUDGET_START=120
#   3. decode the GPU decoder's per-kernel profile and races against the host decoder
#             (scripts/bench/decoder-gpu.sh): en-de, batch 1/32/128, greedy and beam 4
#                                                                         BUDGET_DECODE=120
#   4. equal  the decoders' equality (scripts/bench/gpu-agreement.sh): 1,000 test2016 lines, GPU
#             against CPU decoder, greedy and beam 4                      BUDGET_EQUAL=60
#   5. kernels each fused training kernel family against its unfused oracle (`transduce
#             bench kernels`): small at 4,096 tokens, f32/f16/bf16, time and launches per
#             call (docs/BENCHMARKS.md, "The training kernels")          BUDGET_KERNELS=40
#   6. ranks  data-parallel ranks' host exchange on one GPU: `train --devices 0,0` (two ranks,
#             replayed steps, gradients summed over TCP through host buffers each step)
#             against one process with --accum 2, same batches: same losses, and the
#             exchange's cost per step; not in the default set            BUDGET_RANKS=90
#   7. nccl   NCCL's world of one: `train --exchange nccl` (the ranks' path: the pack, the
#             all-reduce in device memory, the update) against the plain run, same batches:
#             same losses, overhead per step (goal <= 2%); not in the default set
#                                                                         BUDGET_NCCL=90
# PARTS picks some (default "side start decode equal kernels"; "ranks" and "nccl" are asked
# by name).
#
# Rehearsal (REHEARSAL=1): the debug binary of this checkout, wgpu on lavapipe instead of
# CUDA, tiny sizes (it proves the plumbing and the tables, not the speed).
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}

prepare() {
    source scripts/common.sh
    bash scripts/setup-cuda-build.sh
    log "building the CUDA release binary (cargo build --release --features cuda)"
    cargo build --release --locked -p transduce-cli --bin transduce --features cuda
    mkdir -p .dev .gl
    strip -o .dev/transduce "$CARGO_TARGET_DIR/release/transduce"
    xz -T0 -6 -f .dev/transduce
    # The Vulkan loader and glvnd, which the bare machine lacks (wgpu needs them; the NVIDIA
    # ICD itself comes with the driver).
    (cd .gl && apt-get download -qq libvulkan1 libglvnd0 libegl1 libgl1 libglx0 >/dev/null)
    # The test sentences: the machine sees the working tree, not ../shared.
    cp ../shared/data/multi30k/test2016.en.gz .dev/ 2>/dev/null || true
    ls -l .dev .gl
    echo "carry: [\".dev\", \".gl\"]   command: OUT=\$OUT bash scripts/gpu-lease.sh measure"
}

# part NAME BUDGET COMMAND...: runs one part within BUDGET seconds; its output into
# $OUT/NAME.txt and (its first 300 non-empty lines) into SUMMARY.md.
part() {
    local name=$1 budget=$2
    shift 2
    local t0=$SECONDS
    echo "==> [$((SECONDS))s] $name (budget ${budget}s): $*" | tee -a "$OUT/SUMMARY.md"
    timeout --kill-after=10 "$budget" "$@" >"$OUT/$name.txt" 2>&1
    local status=$?
    {
        echo
        grep -v -e '^\s*$' -e XDG_RUNTIME_DIR "$OUT/$name.txt" | head -300 || true
        [ $status -eq 124 ] && echo "($name: cut at its budget of ${budget}s; the rows above finished)"
        [ $status -ne 0 ] && [ $status -ne 124 ] && echo "($name: exit $status; last lines:)" \
            && tail -5 "$OUT/$name.txt"
        echo
        echo "($name took $((SECONDS - t0)) s)"
        echo
    } >>"$OUT/SUMMARY.md"
}

# pair_bench BIN BACKEND INPUT PRESET TOKENS STEPS NAME ARGS… -- NAME ARGS…: two training
# runs of STEPS optimizer steps on a copy task made from INPUT, each with its own extra
# arguments; a table of their wall time, their steady milliseconds a step (from
# metrics.jsonl, after the first 10 steps, so captures and tunes are left out) and whether
# their losses are equal, step for step.
pair_bench() {
    local bin=$1 backend=$2 input=$3 preset=$4 tokens=$5 steps=$6
    shift 6
    local dir
    # Timing the steps, not autotune's first calls.
    export CUBECL_AUTOTUNE_LEVEL=${CUBECL_AUTOTUNE_LEVEL:-minimal}
    dir=$(mktemp -d)
    zcat -f "$input" | head -2000 >"$dir/text"
    "$bin" prepare --src "$dir/text" --tgt "$dir/text" --vocab-size 2000 --out "$dir/data" \
        >/dev/null 2>&1 || { echo "prepare failed"; return 1; }
    echo "| run | arguments | seconds for $steps steps | steady ms/step |"
    echo "|---|---|---:|---:|"
    local names=() name t0 t1
    while [ $# -gt 0 ]; do
        name=$1
        shift
        local extra=()
        while [ $# -gt 0 ] && [ "$1" != -- ]; do extra+=("$1"); shift; done
        [ $# -gt 0 ] && shift
        names+=("$name")
        t0=$(date +%s.%N)
        "$bin" train --data "$dir/data" --out "$dir/$name" --preset "$preset" --backend "$backend" \
            --max-tokens "$tokens" --max-steps "$steps" --checkpoint-steps "$steps" --seed 7 \
            --quiet "${extra[@]}" >"$dir/$name.log" 2>&1 \
            || { echo "$name failed:"; tail -5 "$dir/$name.log"; return 1; }
        t1=$(date +%s.%N)
        python3 - "$dir/$name/metrics.jsonl" "$name" "${extra[*]}" "$t0" "$t1" <<'PY'
import json, sys
path, name, args, t0, t1 = sys.argv[1:]
rows = [json.loads(l) for l in open(path) if '"loss"' in l]
steady = [r for r in rows if r["step"] > 10]
ms = (steady[-1]["elapsed_secs"] - steady[0]["elapsed_secs"]) / max(1, len(steady) - 1) * 1e3 if len(steady) > 1 else float("nan")
print(f"| {name} | `{args}` | {float(t1) - float(t0):.1f} | {ms:.1f} |")
PY
        grep -h -e '^graph:' -e '^exchange:' "$dir/$name.log" | sed 's/^/    /'
    done
    python3 - "$dir/${names[0]}/metrics.jsonl" "$dir/${names[1]}/metrics.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(p) if '"loss"' in l] for p in sys.argv[1:])
same = sum(x == y for x, y in zip(a, b))
worst = max((abs(x - y) / abs(x) for x, y in zip(a, b)), default=0.0)
print(f"\nlosses: {same} of {min(len(a), len(b))} steps equal, at most {worst:.1e} relative apart")
PY
    rm -rf "$dir"
}

measure() {
    OUT=${OUT:-/tmp/gpu-lease}
    mkdir -p "$OUT"
    : >"$OUT/SUMMARY.md"
    local bin backend precision preset batch lines side_backends
    if [ -n "${REHEARSAL:-}" ]; then
        bin=${BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/transduce-target}/debug/transduce}
        backend=wgpu precision=f32 preset=tiny batch=256 lines=8
        side_backends="wgpu wgpu-graph torch"
        export CUBECL_AUTOTUNE_LEVEL=${CUBECL_AUTOTUNE_LEVEL:-minimal}
    else
        for f in .gl/*.deb; do dpkg -x "$f" /; done
        ldconfig
        export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
        export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
        mkdir -p /tmp/lease
        bin=/tmp/lease/transduce
        xz -dc .dev/transduce.xz >"$bin" && chmod +x "$bin"
        backend=cuda precision=bf16 preset=base batch=25000 lines=1000
        side_backends="cuda-graph wgpu-graph torch torch-compile"
        {
            echo "# GPU lease $(date -u +%Y-%m-%dT%H:%MZ)"
            nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
            echo
        } >>"$OUT/SUMMARY.md"
    fi
    [ -x "$bin" ] || { echo "gpu-lease.sh: no binary at $bin" >&2; exit 2; }
    local input=.dev/test2016.en.gz
    [ -r "$input" ] || input=../shared/data/multi30k/test2016.en.gz
    [ -r "$input" ] || input=tests/fixtures/browser-sentences.en
    local parts=${PARTS:-side start decode equal kernels}
    for p in $parts; do
        case $p in
            side)
                if [ -n "${REHEARSAL:-}" ]; then
                    part side "${BUDGET_SIDE:-240}" env BIN="$bin" BACKENDS="$side_backends" \
                        PRESETS=tiny BATCHES=$batch PRECISIONS=f32 STEPS=3 OUT="$OUT/side" \
                        bash scripts/bench/gpu.sh
                else
                    part side "${BUDGET_SIDE:-240}" env BIN="$bin" BACKENDS="$side_backends" \
                        PRESETS=$preset BATCHES=$batch PRECISIONS="f32 bf16" STEPS=20 \
                        OUT="$OUT/side" CUBECL_AUTOTUNE_LEVEL=minimal bash scripts/bench/gpu.sh
                fi ;;
            start)
                local start_preset=small start_batch=12000
                [ -n "${REHEARSAL:-}" ] && start_preset=tiny start_batch=256
                part start "${BUDGET_START:-120}" env BIN="$bin" BACKEND="$backend" \
                    PRESET=$start_preset BATCH=$start_batch PRECISION="$precision" STEPS=20 \
                    LEVELS=minimal OUT="$OUT/start" bash scripts/bench/start.sh ;;
            decode)
                if [ -n "${REHEARSAL:-}" ]; then
                    part decode "${BUDGET_DECODE:-120}" env OUT="$OUT/decode" INPUT="$input" LINES=8 \
                        BATCHES=1,8 BEAMS=1 PRESETS=tiny bash scripts/bench/decoder-gpu.sh "$bin"
                else
                    part decode "${BUDGET_DECODE:-120}" env OUT="$OUT/decode" INPUT="$input" \
                        bash scripts/bench/decoder-gpu.sh "$bin"
                fi ;;
            equal)
                part equal "${BUDGET_EQUAL:-60}" bash scripts/bench/gpu-agreement.sh web/models/en-de \
                    "$input" "$lines" "$bin" ;;
            kernels)
                if [ -n "${REHEARSAL:-}" ]; then
                    part kernels "${BUDGET_KERNELS:-40}" "$bin" bench kernels --backend wgpu \
                        --preset tiny --batch-tokens 256 --precisions f32 --calls 2
                else
                    part kernels "${BUDGET_KERNELS:-40}" env CUBECL_AUTOTUNE_LEVEL=minimal \
                        "$bin" bench kernels --backend cuda --preset small --batch-tokens 4096
                fi ;;
            ranks)
                local ranks_preset=small ranks_tokens=12000 ranks_steps=40
                [ -n "${REHEARSAL:-}" ] && ranks_preset=tiny ranks_tokens=400 ranks_steps=12
                # A function, so through bash for `timeout`.
                export -f pair_bench
                part ranks "${BUDGET_RANKS:-90}" bash -c 'pair_bench "$@"' pair_bench "$bin" \
                    "$backend" "$input" $ranks_preset $ranks_tokens $ranks_steps \
                    accum2 --accum 2 -- ranks2 --devices 0,0 --exchange host ;;
            nccl)
                local nccl_preset=small nccl_tokens=12000 nccl_steps=60 nccl=(--exchange nccl)
                # lavapipe has no NCCL: the rehearsal checks the table with the host exchange.
                [ -n "${REHEARSAL:-}" ] && nccl_preset=tiny nccl_tokens=400 nccl_steps=14 \
                    nccl=(--exchange host)
                # NCCL from PyTorch's wheels where the system has none.
                local lib
                lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
                export LD_LIBRARY_PATH=${lib:+$lib:}${LD_LIBRARY_PATH:-}
                export -f pair_bench
                part nccl "${BUDGET_NCCL:-90}" bash -c 'pair_bench "$@"' pair_bench "$bin" \
                    "$backend" "$input" $nccl_preset $nccl_tokens $nccl_steps \
                    plain -- nccl1 "${nccl[@]}" ;;
            *) echo "gpu-lease.sh: unknown part $p (side start decode equal kernels ranks nccl)" >&2; exit 2 ;;
        esac
    done
    cat "$OUT/SUMMARY.md"
}

case $mode in
    prepare) prepare ;;
    measure) measure ;;
    *) sed -n '2,9p' "$0" >&2; exit 2 ;;
esac
