#!/usr/bin/env bash
# One call on a lent GPU machine (docs/journal/results-history.md, "The mixed translators as `small`"): the
# two `small` mixed translators (en→de, de→en) continued from the free bundles (or, with
# PRESET, trained from random weights) on Tatoeba + Multi30k, side by side on one GPU, within
# BUDGET seconds; their averaged f32 weights, run.json and metrics.jsonl come back in pieces
# under 16 MB ($OUT/ende.tar.*, $OUT/deen.tar.*).
#
# It reads, from the repository root it runs in: .dev/transduce.xz (the release binary,
# `cargo build --release --features cuda`, stripped, xz), .dev/{ende,deen}-data.tar.xz (each the
# `data` folder `scripts/train-demo.sh en-de|de-en` prepares with INIT set to the bundle the
# run continues, tarred), .gl/*.deb (the Vulkan and glvnd loaders, for the wgpu fall-back),
# and the bundles the runs continue: web/models/{en-de,de-en}-free, or those INIT_ENDE /
# INIT_DEEN name (another lineage, whose vocabulary is then the data's). B/P pick the backend
# and precision (default cuda bf16; a run that fails is retried once on wgpu f32); REHEARSAL=1
# B=cpu P=f32 BUDGET=170 BATCH=1500 rehearses it here. PRESET=small (or another preset) trains
# both from random weights instead of continuing the free bundles: then each data folder is
# the one `MIXED_PRESET=small scripts/train-demo.sh en-de|de-en` prepares without INIT (the
# vocabulary learned on the mix), and WARMUP / LR / BATCH size the schedule to the lease. The
# binary keeps its autotune decisions and compiled kernels in TRANSDUCE_CACHE_DIR (here
# .dev/gpu-cache, carried in from an earlier lease and returned as gpu-cache.tgz: a folder per
# GPU model, driver and build inside, so only a matching one is read). A call may start it
# detached and a later call collect it (docs/journal/results-history.md, "The `small` mixed lineage continued
# on a lent H100"): one tuning, not one per call. RUNS (default "ende deen") names the runs:
# run R reads .dev/${DATA_R:-R}-data.tar.xz, continues INIT_R (default: its data's run's
# INIT) and trains at LR_R (default LR), so two variants of one direction can share the GPU
# (RUNS="ende ende2" DATA_ende2=ende LR_ende2=0.2). Back here: `cat ende.tar.* | tar xf -`, then
# the averaged weights as WORK/en-de/averaged.safetensors and run.json, metrics.jsonl,
# tokenizer.json in WORK/en-de/run, and `TRAIN=0 EN_DE_STEPS=<last step> INIT=...
# scripts/train-demo.sh en-de`.
set -u
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
log() { echo "[$(el)s] $*"; }
BUDGET=${BUDGET:-550}
BATCH=${BATCH:-12000}
B=${B:-cuda}; P=${P:-bf16}
if [ -z "${REHEARSAL:-}" ]; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
fi
export CUBECL_AUTOTUNE_LEVEL=${CUBECL_AUTOTUNE_LEVEL:-minimal}
export TRANSDUCE_CACHE_DIR=${TRANSDUCE_CACHE_DIR:-$PWD/.dev/gpu-cache}
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
S=${S:-/tmp/dev}; mkdir -p $S
xz -dc .dev/transduce.xz > $S/transduce && chmod +x $S/transduce
RUNS=${RUNS:-ende deen}
declare -A INIT=([ende]=${INIT_ENDE:-web/models/en-de-free} [deen]=${INIT_DEEN:-web/models/de-en-free})
declare -A DATA_OF RATE PID BACK TRIED
for d in $RUNS; do
  v=DATA_$d; DATA_OF[$d]=${!v:-$d}
  v=INIT_$d; INIT[$d]=${!v:-${INIT[$d]:-${INIT[${DATA_OF[$d]}]:-}}}
  v=LR_$d; RATE[$d]=${!v:-${LR:-0.2}}
done
for x in $(printf '%s\n' "${DATA_OF[@]}" | sort -u); do
  mkdir -p $S/$x-data && xz -dc .dev/$x-data.tar.xz | tar xf - -C $S/$x-data &
done; wait
T=$S/transduce
L=$S/logs; mkdir -p $L
start() { # start RUN BACKEND PRECISION MINUTES
  rm -rf $S/$1
  BACK[$1]=$2
  local from="--init ${INIT[$1]}"; [ -z "${PRESET:-}" ] || from="--preset $PRESET"
  $T train --data $S/${DATA_OF[$1]}-data/data --out $S/$1 $from --backend $2 --precision $3 \
    --max-tokens $BATCH --warmup ${WARMUP:-300} --lr-factor ${RATE[$1]} --max-minutes $4 \
    --checkpoint-minutes ${CKPT:-0.5} --checkpoint-steps 100000 --keep 30 --quiet \
    > $L/train-$1-$2.log 2>&1 &
  PID[$1]=$!
}
mins() { python3 -c "print(round(max(0.5, ($BUDGET - $(el) - 60) / 60), 2))"; }
m=$(mins); log "training $RUNS on $B $P for $m min"
for d in $RUNS; do start $d $B $P $m; done
n=0
running() { local d; for d in $RUNS; do printf %s "${PID[$d]}"; done; }
while [ -n "$(running)" ]; do
  sleep 5; n=$((n + 1))
  for d in $RUNS; do
    pid=${PID[$d]}
    if [ -n "$pid" ] && ! kill -0 $pid 2>/dev/null; then
      wait $pid; rc=$?; PID[$d]=""
      log "$d ended: exit $rc"
      if [ $rc != 0 ] && [ "${BACK[$d]}" != wgpu ] && [ -z "${TRIED[$d]:-}" ] && [ $(el) -lt $((BUDGET - 180)) ]; then
        log "$d failed on ${BACK[$d]}: $(tail -3 $L/train-$d-${BACK[$d]}.log); again on wgpu f32"
        TRIED[$d]=1; start $d wgpu f32 $(mins)
      fi
    fi
    [ $((n % 6)) = 0 ] && echo "$d $(grep -v valid $S/$d/metrics.jsonl 2>/dev/null | tail -1 | cut -c1-190)"
  done
  [ $((n % 6)) = 0 ] && [ -z "${REHEARSAL:-}" ] && nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
  # the watchdog: whatever runs past the budget, or is told to by a file $S/stop (a later
  # call's way to end a detached run early), is stopped; its last checkpoint is kept
  if [ $(el) -gt $((BUDGET - 15)) ] || [ -e $S/stop ]; then
    for d in $RUNS; do [ -z "${PID[$d]}" ] || { log "stopping $d"; kill ${PID[$d]}; }; done
  fi
done
log "averaging and packing"
for d in $RUNS; do
  tail -2 $L/train-$d-*.log
  grep valid $S/$d/metrics.jsonl | tail -3
  ls $S/$d/checkpoints | tail -8 | tr '\n' ' '; echo
  n=$(ls $S/$d/checkpoints | wc -l); [ $n -lt ${AVG:-4} ] || n=${AVG:-4}
  [ $n -gt 0 ] || continue
  $T average --run $S/$d --last $n --out $S/$d-avg.safetensors || continue
  cp $S/$d/metrics.jsonl $L/$d-metrics.jsonl
  ls $S/$d/checkpoints > $L/$d-checkpoints.txt
  tar cf $S/$d.tar -C $S $d-avg.safetensors $d/run.json $d/metrics.jsonl $d/tokenizer.json
  split -b 16000000 -d $S/$d.tar $OUT/$d.tar.
done
tar czf $OUT/logs.tgz -C $S logs
# the GPU cache (TRANSDUCE_CACHE_DIR above): unpack it into .dev here and carry it
# (`carry: [".dev/gpu-cache"]`) to the next lease
[ ! -d "$TRANSDUCE_CACHE_DIR" ] || tar czf $OUT/gpu-cache.tgz -C "$(dirname "$TRANSDUCE_CACHE_DIR")" "$(basename "$TRANSDUCE_CACHE_DIR")"
ls -la $OUT; log done
