#!/usr/bin/env bash
# Reproduces the two mixed translators, web/models/en-de and de-en (Tatoeba + Multi30k,
# non-commercial): four stages of scripts/train-demo.sh.
#
#   scripts/train-mixed.sh   (WORK, default work/mixed: stages 1-2 in WORK/scratch, 3-4 in
#                             WORK/continued)
#
#   1. en-de from random weights on the mix (its vocabulary)              11,500 steps
#   2. de-en from random weights on the mix (1's vocabulary)              12,500 steps
#   3. en-de continued from 1 on the mix (learning-rate factor 0.2,
#      the last 3 checkpoints averaged)                                   EN_DE_STEPS
#   4. de-en continued from 2 likewise                                    DE_EN_STEPS
#      (3 and 4: the shipped bundles' step counts, 4,037 and 4,249)
#
# 3 and 4 are the shipped bundles. The shipped stage 1 trained on 2 CPU cores over three
# sessions (stopped and resumed: exact resume gives the same weights), stage 2 on an H100
# (BACKEND=wgpu: 12,500 steps in 820 s), 3 and 4 on one CPU core each, side by side, for 78
# minutes. Step counts bound every stage here, so the same checkpoints are averaged on any
# machine. Stop it whenever and run it again: a finished stage (its bundle tested) is
# skipped, an unfinished one resumes. BACKEND, RAYON_NUM_THREADS, DATA as in train-demo.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

WORK=${WORK:-work/mixed}
source scripts/stages.sh
EN_DE_STEPS=${EN_DE_STEPS:-$(shipped_steps en-de)}
DE_EN_STEPS=${DE_EN_STEPS:-$(shipped_steps de-en)}

S="$WORK/scratch" C="$WORK/continued"
# Stages 1 and 2 share one WORK: de-en reads the vocabulary en-de learned there.
stage 1 scratch en-de EN_DE_STEPS=11500 AVERAGE_LAST=8
stage 2 scratch de-en DE_EN_STEPS=12500 AVERAGE_LAST=8
stage 3 continued en-de EN_DE_STEPS="$EN_DE_STEPS" INIT="$S/en-de/bundle" LR_FACTOR=0.2 \
    AVERAGE_LAST=3
stage 4 continued de-en DE_EN_STEPS="$DE_EN_STEPS" INIT="$S/de-en/bundle" LR_FACTOR=0.2 \
    AVERAGE_LAST=3
log "the mixed translators: $C/en-de/bundle and $C/de-en/bundle" \
    "(copy them to web/models/en-de and web/models/de-en)"
