#!/usr/bin/env bash
# Reproduces the two mixed translators, web/models/en-de and de-en (Tatoeba + Multi30k,
# non-commercial): thirteen stages of scripts/train-demo.sh.
#
#   RESCORE_EN_DE=BUNDLE RESCORE_DE_EN=BUNDLE scripts/train-mixed.sh
#       (WORK, default work/mixed: stages 1-2 in WORK/scratch, 3-4 in WORK/continued, 5-6 in
#        WORK/small, 7-8 in WORK/small-m4, 9-10 in WORK/distilled, 11-12 in WORK/channel,
#        13 in WORK/souped)
#
#   1. en-de from random weights on the mix (its vocabulary)              11,500 steps
#   2. de-en from random weights on the mix (1's vocabulary)              12,500 steps
#   3. en-de continued from 1 on the mix (learning-rate factor 0.2,
#      the last 3 checkpoints averaged)                                    4,037 steps
#   4. de-en continued from 2 likewise                                     4,249 steps
#      (3 and 4: the `compact` bundles shipped until 5 and 6 passed them)
#   5. en-de as preset `small`, continued from en-de-free (FREE_EN_DE,
#      default web/models/en-de-free; its vocabulary) on the mix, on a
#      GPU: 12,000-token batches, warm-up 300, factor 0.2, bf16, the last
#      4 checkpoints averaged                                              2,861 steps
#   6. de-en likewise from de-en-free (FREE_DE_EN)                          2,624 steps
#   7. de-en continued from 6 on the mix with Multi30k four times, on the
#      CPU (factor 0.1, warm-up 300, 4,096-token batches, the last 3
#      checkpoints averaged)                                               DE_EN_STEPS
#   8. en-de continued from 5 likewise                                     EN_DE_STEPS
#      (7 and 8: step counts 4,892 and 4,714)
#   9. en-de continued from 8 on the mix plus each of its sources again with
#      a teacher's translation (sequence-level distillation): 8 and RESCORE_EN_DE
#      (the `small` lineage trained from random weights with the mix's
#      vocabulary) translate, each candidate rescored by both
#      (scripts/rescored-teacher.sh, weight 0.6 on 8); factor 0.05, warm-up
#      300, 4,096-token batches, the last 3 checkpoints averaged, beam 4 or 8
#      chosen with α on val                                                 4,552 steps
#  10. de-en continued from 7 likewise, with RESCORE_DE_EN                  7,160 steps
#  11. de-en continued from 10 on the mix plus each of its sources again with
#      10's translation reranked by 9, the reverse model (`translate
#      --channel`, weight 0.3 as chosen on val for 10; DISTILL_CHANNEL);
#      as 10 otherwise                                                     DE_EN_STEPS
#      (11: the shipped bundle's step count by default, 2,311)
#  12. en-de continued from 9 likewise, its teacher 9 reranked by 11
#      (weight 0.2, as chosen on val for 9), on a GPU: 16,000-token
#      batches, factor 0.1, bf16 (SMALL_BACKEND, SMALL_PRECISION)            3,481 steps
#  13. en-de continued from 12 likewise, its teacher 12 reranked by 11, on
#      BACKEND (the CPU) as 9, then its last 3 checkpoints' mean averaged
#      again with 12's (SOUP: the init and its continuation, one basin)     EN_DE_STEPS
#      (13: the shipped bundle's step count by default, 2,000)
#
# 11 (de-en) and 13 (en-de) are the shipped bundles; 1-4 run only with COMPACT=1. RESCORE_EN_DE and
# RESCORE_DE_EN have no default: the shipped runs used the bundles docs/RESULTS.md's
# sections on the `small` lineage made (a GPU lease's runs of scripts/gpu-lease-mixed.sh,
# en-de then continued on the CPU with back-translated CC0 German), as the bundle cards say. 5 and 6 trained side by
# side on one H200 for 8.1 minutes each (SMALL_BACKEND=cuda SMALL_PRECISION=bf16, the
# defaults; `SMALL_BACKEND=cpu SMALL_PRECISION=` runs them on the CPU, about 3 hours each on
# 2 cores), checkpointing every half minute: the averaged checkpoints were steps 2,150
# 2,473 2,770 2,861 (en-de) and 1,916 2,238 2,531 2,624 (de-en), where a rerun checkpoints
# every 300 steps. Their inits were the free bundles as of commit 6b94491 (de-en-free of
# 3,616 steps): if web/models has moved on, point FREE_EN_DE / FREE_DE_EN at those
# (`git show COMMIT:web/models/ID/FILE` for config.json, tokenizer.json, model.safetensors).
# The compact stage 1 trained on 2 CPU cores over three sessions (stopped and resumed: exact
# resume gives the same weights), stage 2 on an H100 (BACKEND=wgpu: 12,500 steps in 820 s),
# 3 and 4 on one CPU core each, side by side, for 78 minutes, 7 and 8 on one thread each,
# side by side, for 170 minutes (stopped at 60 and resumed), 9 and 10 likewise for 175 and 258
# minutes (stopped at 80 and 55 and resumed; 10 resumed again at 150), 11 on one thread
# for 85 minutes (its teacher: 24 minutes on 2 cores), 12 on one H200 for 11.5 minutes
# beside a variant at factor 0.2 (its teacher: 18 minutes on 2 cores; bounded by time and
# checkpointed every half minute: the averaged checkpoints were steps 2,986 3,228 3,481, where
# a rerun checkpoints every 250), 13 on one thread beside a variant at factor 0.1 for 80
# minutes (its teacher: 17 minutes on 2 cores). Step counts bound every stage.
# Stop it whenever and run it again: a finished stage (its bundle tested) is skipped, an
# unfinished one resumes. BACKEND, RAYON_NUM_THREADS, DATA as in train-demo.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

WORK=${WORK:-work/mixed}
source scripts/stages.sh
EN_DE_STEPS=${EN_DE_STEPS:-$(shipped_steps en-de)}
DE_EN_STEPS=${DE_EN_STEPS:-$(shipped_steps de-en)}

S="$WORK/scratch"
# Stages 1-4 (the compact lineage, no longer shipped) run with COMPACT=1. Stages 1 and 2
# share one WORK: de-en reads the vocabulary en-de learned there.
if [ "${COMPACT:-0}" = 1 ]; then
stage 1 scratch en-de EN_DE_STEPS=11500 AVERAGE_LAST=8
stage 2 scratch de-en DE_EN_STEPS=12500 AVERAGE_LAST=8
stage 3 continued en-de EN_DE_STEPS=4037 INIT="$S/en-de/bundle" LR_FACTOR=0.2 \
    AVERAGE_LAST=3
stage 4 continued de-en DE_EN_STEPS=4249 INIT="$S/de-en/bundle" LR_FACTOR=0.2 \
    AVERAGE_LAST=3
fi
# The small stages run on SMALL_BACKEND (their bundles were trained on a GPU).
SB=${SMALL_BACKEND:-cuda} SP=${SMALL_PRECISION-bf16}
small=(MAX_TOKENS=12000 WARMUP=300 CHECKPOINT_STEPS=300 LR_FACTOR=0.2 AVERAGE_LAST=4
    BACKEND="$SB" PRECISION="$SP")
stage 5 small en-de EN_DE_STEPS=2861 INIT="${FREE_EN_DE:-web/models/en-de-free}" \
    "${small[@]}"
stage 6 small de-en DE_EN_STEPS=2624 INIT="${FREE_DE_EN:-web/models/de-en-free}" \
    "${small[@]}"
# Stages 7 and 8: the captions weighted more, on BACKEND (the shipped ones: the CPU).
m4=(MULTI30K_COPIES=4 LR_FACTOR=0.1 WARMUP=300 CHECKPOINT_STEPS=250 AVERAGE_LAST=3)
stage 7 small-m4 de-en DE_EN_STEPS=4892 INIT="$WORK/small/de-en/bundle" "${m4[@]}"
stage 8 small-m4 en-de EN_DE_STEPS=4714 INIT="$WORK/small/en-de/bundle" "${m4[@]}"
# Stages 9 and 10: distilled from a teacher two lineages make together.
: "${RESCORE_EN_DE:?set RESCORE_EN_DE to the small lineage's en-de bundle (see above)}"
: "${RESCORE_DE_EN:?set RESCORE_DE_EN to the small lineage's de-en bundle (see above)}"
kd=(MULTI30K_COPIES=4 LR_FACTOR=0.05 WARMUP=300 CHECKPOINT_STEPS=250 AVERAGE_LAST=3
    BEAMS="4 8")
stage 9 distilled en-de EN_DE_STEPS=4552 INIT="$WORK/small-m4/en-de/bundle" \
    DISTILL="$WORK/small-m4/en-de/bundle" DISTILL_RESCORE="$RESCORE_EN_DE" "${kd[@]}"
stage 10 distilled de-en DE_EN_STEPS=7160 INIT="$WORK/small-m4/de-en/bundle" \
    DISTILL="$WORK/small-m4/de-en/bundle" DISTILL_RESCORE="$RESCORE_DE_EN" "${kd[@]}"
# Stage 11: distilled from 10 checked by 9, the reverse model.
stage 11 channel de-en DE_EN_STEPS="$DE_EN_STEPS" INIT="$WORK/distilled/de-en/bundle" \
    DISTILL="$WORK/distilled/de-en/bundle" DISTILL_CHANNEL="$WORK/distilled/en-de/bundle" \
    "${kd[@]}"
# Stage 12: distilled from 9 checked by 11, on a GPU.
stage 12 channel en-de EN_DE_STEPS=3481 INIT="$WORK/distilled/en-de/bundle" \
    DISTILL="$WORK/distilled/en-de/bundle" DISTILL_CHANNEL="$WORK/channel/de-en/bundle" \
    DISTILL_CHANNEL_WEIGHT=0.2 "${kd[@]}" LR_FACTOR=0.1 MAX_TOKENS=16000 BACKEND="$SB" \
    PRECISION="$SP"
# Stage 13: distilled from 12 checked by 11, on the CPU, souped with 12.
stage 13 souped en-de EN_DE_STEPS="$EN_DE_STEPS" INIT="$WORK/channel/en-de/bundle" \
    DISTILL="$WORK/channel/en-de/bundle" DISTILL_CHANNEL="$WORK/channel/de-en/bundle" \
    DISTILL_CHANNEL_WEIGHT=0.2 SOUP="$WORK/channel/en-de/averaged.safetensors" "${kd[@]}"
log "the mixed translators: $WORK/souped/en-de/bundle and $WORK/channel/de-en/bundle" \
    "(copy them to web/models/en-de and web/models/de-en)"
