#!/usr/bin/env bash
# Training speed side by side: transduce (wgpu with WGSL kernels, wgpu with SPIR-V kernels,
# CUDA, or the CPU) against PyTorch (eager and torch.compile) on the same machine, the same
# model, the same batch and the same initial weights. Prints one table.
#
#   scripts/bench/gpu.sh                       # on a GPU machine, every row
#   BACKENDS="cpu wgpu torch" PRESETS=compact BATCHES=4096 PRECISIONS=f32 STEPS=3 \
#       scripts/bench/gpu.sh                   # a rehearsal on a CPU / lavapipe machine
#
# Environment:
#   BIN         transduce binary (default: $CARGO_TARGET_DIR/release/transduce, else debug);
#               `cuda` rows need one built with `--features cuda`
#   SPIRV_BIN   transduce built with `--features spirv` for the `spirv` rows (its wgpu
#               backend compiles kernels to SPIR-V, where cooperative matrices are)
#   PYTHON      a Python with torch and safetensors (default python3)
#   BACKENDS    any of: cpu wgpu wgpu-graph spirv cuda cuda-graph torch torch-compile
#               (the -graph rows replay the step captured as a graph, bench's default on
#               wgpu and CUDA; the plain wgpu and cuda rows take eager steps: `--eager`)
#               (default: wgpu wgpu-graph spirv cuda cuda-graph torch torch-compile)
#   PRESETS     (default: compact base)   BATCHES  target tokens per step (4096 25000)
#   PRECISIONS  (default: f32 f16 bf16)   STEPS    timed steps after one warm-up (20)
#   OUT         folder for the exchange files and raw JSON (default: a temporary one)
#   TORCH_TF32  1 (default): PyTorch's f32 rows multiply in TF32 where the GPU has it, as
#               transduce's cubecl kernels do; 0 for strict f32 in PyTorch
#
# Every row trains with dropout 0 from the same initial weights (the first transduce row
# draws them and writes them with `bench --exchange`; the others load them) on the same
# batch (rows of 25 tokens, as many as fit the batch), with transduce's label smoothing
# (ε 0.1 over the other words) and Adam (β 0.9/0.98, ε 1e-9, learning rate 1e-4). Tokens
# are target tokens, EOS included (fairseq's count), per second of timed steps. "loss" is
# the smoothed loss per token of the last timed step: rows that compute the same thing
# agree on it to about 1e-3 in f32 (half precisions drift further). Peak memory: the GPU's
# used memory above what it was before the row (nvidia-smi), or without a GPU the peak
# resident memory of the process. PyTorch's f32 is its default on GPUs: matmuls in full
# f32, no TF32.
# On a real GPU each transduce row first spends most of a minute autotuning and compiling
# kernels (H200, small, 12,000 tokens: 45 s for CUDA f32, 55 s wgpu, 91 s CUDA bf16, against
# 2 s of timed steps): budget a few minutes a row, and PyTorch's rows take seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."

target=${CARGO_TARGET_DIR:-$HOME/.cache/transduce-target}
BIN=${BIN:-$([ -x "$target/release/transduce" ] && echo "$target/release/transduce" || echo "$target/debug/transduce")}
SPIRV_BIN=${SPIRV_BIN:-}
PYTHON=${PYTHON:-python3}
BACKENDS=${BACKENDS:-wgpu wgpu-graph spirv cuda cuda-graph torch torch-compile}
PRESETS=${PRESETS:-compact base}
BATCHES=${BATCHES:-4096 25000}
PRECISIONS=${PRECISIONS:-f32 f16 bf16}
STEPS=${STEPS:-20}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
results="$OUT/results.jsonl"
: > "$results"

# measure NAME CMD...: runs CMD, keeps its JSON line (tagged with NAME and the peak memory)
# in $results, or a failed row with the error's last line ($preset, $batch and $precision
# name the row).
measure() {
    local name=$1
    shift
    "$PYTHON" - "$name" "$results" "$preset" "$batch" "$precision" "$@" <<'EOF'
import json, resource, shutil, subprocess, sys, time

name, results = sys.argv[1], sys.argv[2]
row = {"name": name, "preset": sys.argv[3], "batch": sys.argv[4], "precision": sys.argv[5]}
cmd = sys.argv[6:]
smi = shutil.which("nvidia-smi")

def gpu_used():
    out = subprocess.run([smi, "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout.split()
    return max(int(x) for x in out) if out else 0

base = gpu_used() if smi else 0
peak = base
child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
while child.poll() is None:
    if smi:
        peak = max(peak, gpu_used())
    time.sleep(0.2)
out, err = child.communicate()
lines = [l for l in out.splitlines() if l.startswith("{")]
if child.returncode == 0 and lines:
    row.update(json.loads(lines[-1]))
    if smi:
        row["peak_mib"], row["memory"] = peak - base, "GPU"
    else:
        row["peak_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        row["memory"] = "RSS"
else:
    tail = (err.strip().splitlines() or ["no output"])[-1]
    row["error"] = f"exit {child.returncode}: {tail[:160]}"
with open(results, "a") as f:
    f.write(json.dumps(row) + "\n")
print(f"  {name}: " + (row.get("error") or
      f"{row['tokens_per_sec']:.0f} tokens/s, loss {row['final_loss']:.4f}"), file=sys.stderr)
EOF
}

for preset in $PRESETS; do
    for batch in $BATCHES; do
        exchange="$OUT/$preset-$batch"
        rm -rf "$exchange"
        for precision in $PRECISIONS; do
            for backend in $BACKENDS; do
                echo "$preset, $batch tokens, $precision: $backend" >&2
                common=(--preset "$preset" --batch-tokens "$batch" --steps "$STEPS"
                    --precision "$precision" --dropout 0 --training-only --json)
                # The first transduce row draws the weights; the others start from them.
                if [ -f "$exchange/init.safetensors" ]; then
                    start=(--init "$exchange/init.safetensors")
                else
                    start=(--exchange "$exchange")
                fi
                case $backend in
                    cpu)
                        measure "transduce $backend" "$BIN" bench --backend "$backend" \
                            "${common[@]}" "${start[@]}" ;;
                    wgpu | cuda)
                        measure "transduce $backend" "$BIN" bench --backend "$backend" \
                            --eager "${common[@]}" "${start[@]}" ;;
                    wgpu-graph | cuda-graph)
                        # The step captured once and replayed (bench's default; any
                        # precision: half precision's loss scale and skips on the device).
                        measure "transduce $backend" "$BIN" bench --backend "${backend%-graph}" \
                            "${common[@]}" "${start[@]}" ;;
                    spirv)
                        if [ -z "$SPIRV_BIN" ]; then
                            echo "  spirv: skipped (SPIRV_BIN is not set)" >&2
                            continue
                        fi
                        measure "transduce spirv" "$SPIRV_BIN" bench --backend wgpu \
                            "${common[@]}" "${start[@]}" ;;
                    torch | torch-compile)
                        if [ ! -f "$exchange/init.safetensors" ]; then
                            echo "  $backend: skipped (no transduce row wrote the weights)" >&2
                            continue
                        fi
                        flags=()
                        [ "$backend" = torch-compile ] && flags=(--compile)
                        # Our f32 products run in TF32 where the GPU has it (cubecl promotes
                        # them): PyTorch's f32 rows do the same unless TORCH_TF32=0.
                        [ "$precision" = f32 ] && [ "${TORCH_TF32:-1}" = 1 ] && flags+=(--tf32)
                        measure "$backend" "$PYTHON" scripts/bench/pytorch.py --device auto \
                            --threads "$(nproc)" --preset "$preset" --steps "$STEPS" \
                            --precision "$precision" --dropout 0 --exchange "$exchange" \
                            --json "${flags[@]}" ;;
                    *) echo "unknown backend $backend (cpu wgpu wgpu-graph spirv cuda cuda-graph torch torch-compile)" >&2; exit 2 ;;
                esac
            done
        done
    done
done

"$PYTHON" - "$results" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| preset | batch (target tokens) | precision | backend | tokens/s | step ms | peak MiB | loss (of step) |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    if "error" in r:
        print(f"| {r['preset']} | {r['batch']} | {r['precision']} | {r['name']} | "
              f"failed: {r['error']} | | | |")
        continue
    backend = f"{r['framework']} {r['backend']}"
    if r.get("graph"):
        backend += f", graph: {r['graph']}"
    precision = r["precision"] + (" (TF32)" if r.get("tf32") else "")
    print(f"| {r['preset']} | {r['tokens_per_step']:,} ({r['rows']} rows) | {precision} | "
          f"{backend} | {r['tokens_per_sec']:,.0f} | {r['step_ms']:.1f} | "
          f"{r['peak_mib']:,.0f} ({r['memory']}) | {r['final_loss']:.4f}"
          + (f" (step {r['loss_step']})" if "loss_step" in r else "") + " |")
# What transduce's own step cost the host (`bench`'s census): on a GPU the replayed rows
# should show host work (host ms less its waiting) far below the step.
counted = [r for r in rows if "launches_per_step" in r]
if counted:
    print()
    print("| preset | precision | backend | launches/step | kernels/step | host ms/step | of it waiting | step ms |")
    print("|---|---|---|---|---|---|---|---|")
    for r in counted:
        waiting = r.get("host_ms_waiting_per_step")
        print(f"| {r['preset']} | {r['precision']} | {r['backend']}"
              + (" (graph)" if r.get("graph") else "")
              + f" | {r['launches_per_step']:.0f} | {r['kernels_per_step']:.0f} | "
              f"{r['host_ms_per_step']:.1f} | "
              + (f"{waiting:.1f}" if waiting is not None else "") + f" | {r['step_ms']:.1f} |")
EOF
echo "raw rows: $results" >&2
