#!/usr/bin/env bash
# Reproduces the demo bundles shipped in web/models/ from the data, on this machine's CPU.
#
#   scripts/train-demo.sh [en-de|de-en|translate|en-de-free|de-en-free|free|parse|all]
#                                                                  (default: all)
#
# DATA (default ../shared/data) holds tatoeba-en-de/, multi30k/ and ptb-sample/; WORK
# (default work/demo) receives prepared data, runs, outputs and scores.
#
# The translators (en-de, de-en; `translate` is both) learn from Tatoeba train (everyday
# sentences) plus Multi30k train (captions) repeated MULTI30K_COPIES times, and validate on
# both vals. Training stops after EN_DE_STEPS / DE_EN_STEPS steps (default: the step count
# the shipped bundle records), checkpointing every 500, so the same training and averaging
# window come out on any machine. The shipped translators are continued runs:
# scripts/train-mixed.sh and scripts/train-free.sh reproduce them stage by stage.
# It takes hours on 2 cores:
# stop it whenever (Ctrl-C loses at most one checkpoint interval) and run the script again
# to resume the run where it stopped (`transduce train --resume`) instead of starting over.
# The free translators (en-de-free, de-en-free; `free` is both) learn from Tatoeba alone
# (CC-BY 2.0 FR), nothing non-commercial, with their own vocabulary, dropout FREE_DROPOUT
# (default 0.1, as the shipped en-de-free: a run of a few thousand steps is under-trained,
# not over-fitted), the last FREE_AVERAGE_LAST (default 3) checkpoints averaged, and
# validate and choose α on Tatoeba val; FREE_STEPS (default: the shipped bundle's) and
# FREE_MINUTES bound their training. BACK_TRANSLATE=BUNDLE (a translator the other way,
# e.g. web/models/en-de-free for de-en-free: a free one for a free translator) adds the CC0
# Common Voice sentences of the target language, back-translated by BUNDLE into synthetic
# sources (Sennrich et al. 2016), to the training pairs (Tatoeba train, or the mix); pairs
# whose word counts differ more than twofold are dropped.
# INIT=BUNDLE continues a translator (free or mixed) from a bundle of the same direction
# instead of random weights (`transduce train --init`: its architecture, dropout and
# vocabulary, fresh Adam and a fresh warm-up), e.g. the from-scratch run's bundle with
# back-translated data added; LR_FACTOR (default 0.5, the from-scratch runs'; FREE_LR_FACTOR
# is the same) scales its learning rate. TRANSLATE_MINUTES bounds a mixed translator's
# training (as FREE_MINUTES a free one's); set EN_DE_STEPS / DE_EN_STEPS with INIT.
# FREE_PRESET (default compact) is the architecture of a free translator trained from
# random weights (e.g. `small`, 7.6M parameters, 8.3 MB in int8: better per step, 0.71x as
# fast on the CPU, so the better choice past about two core-hours or on a GPU, as measured
# in docs/RESULTS.md; or `base` for a teacher on a GPU); MIXED_PRESET (default compact) is
# the same for a mixed translator trained from random weights, whose vocabulary is learned
# on the mix (e.g. `small` on a GPU, for the captions). DISTILL=BUNDLE[,BUNDLE...] trains
# it on its teacher's translations instead of the references (sequence-level knowledge
# distillation, Kim & Rush 2016): every training source (back-translated ones included) is
# translated by BUNDLE, or by the ensemble of the BUNDLEs (one vocabulary), with its beam
# and α; val keeps the references. A mixed translator keeps the mix's references and adds
# each training source again with the teacher's translation. DISTILL_RESCORE=BUNDLE2 (same
# direction, any vocabulary) makes the teacher DISTILL's bundle and BUNDLE2 together: each
# translates, every candidate is scored by both, the weighted best is kept
# (scripts/rescored-teacher.sh; DISTILL_WEIGHT, default 0.6, on DISTILL's).
# DISTILL_CHANNEL=REVERSE (a bundle translating the other way, e.g. en-de for de-en) makes
# the teacher DISTILL's bundle reranked by the reverse model (`translate --channel`, weight
# DISTILL_CHANNEL_WEIGHT, default 0.3: the one chosen on val for the shipped de-en of stage
# 10 of scripts/train-mixed.sh).
# SOUP=FILE averages the run's averaged weights once more, in equal parts, with FILE (f32
# safetensors of the same architecture, e.g. INIT's own average before its int8 export): a
# "model soup" (Wortsman et al. 2022) of the init and its continuation, which lie in one basin
# (stage 13 of scripts/train-mixed.sh); the run's own average is kept as run-averaged.safetensors.
# With TRAIN=0, averaged.safetensors is taken as it is (already souped).
# BACKEND=wgpu|cuda trains on a GPU (the compact mixed de-en trained there: 12,500 steps in
# 15 minutes on an H100), PRECISION=bf16|f16 in mixed precision there (default f32);
# MAX_TOKENS (default 4096), WARMUP (default 1000) and CHECKPOINT_STEPS (default 500) size a
# run's batches, warm-up and checkpoints, e.g. 12000 / 300 on a GPU (scripts/train-mixed.sh
# stages 5-6). TRAIN=0 skips training and averaging and goes on from
# WORK/<src>-<tgt>/averaged.safetensors (e.g. averaged on the GPU machine and copied back).
# BEAMS (default 4, §6.1's) is the beam sizes tried with each α on val; e.g. "4 8" (the
# shipped mixed translators': beam 8 costs about twice beam 4's time and gained +0.36 and
# +0.34 on their val means; docs/RESULTS.md, "Beam size chosen on val"). The smallest beam
# wins a tie.
# Everything after training (averaging, beam and α on val, export, the one test run) reruns
# in minutes. Selection uses the vals only; each test set is translated once, at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
ensure_rust

DATA=${DATA:-../shared/data}
WORK=${WORK:-work/demo}
MULTI30K_COPIES=${MULTI30K_COPIES:-2}
BACKEND=${BACKEND:-cpu}
PRECISION=${PRECISION:-}
MAX_TOKENS=${MAX_TOKENS:-4096}
WARMUP=${WARMUP:-1000}
CHECKPOINT_STEPS=${CHECKPOINT_STEPS:-500}
TRAIN=${TRAIN:-1}
source scripts/stages.sh
EN_DE_STEPS=${EN_DE_STEPS:-$(shipped_steps en-de)}
DE_EN_STEPS=${DE_EN_STEPS:-$(shipped_steps de-en)}
PARSE_STEPS=${PARSE_STEPS:-$(shipped_steps ptb-parser)}
PARSE_MINUTES=${PARSE_MINUTES:-60}
FREE_STEPS=${FREE_STEPS:-}
FREE_MINUTES=${FREE_MINUTES:-100000}
FREE_DROPOUT=${FREE_DROPOUT:-0.1}
FREE_AVERAGE_LAST=${FREE_AVERAGE_LAST:-3}
BACK_TRANSLATE=${BACK_TRANSLATE:-}
INIT=${INIT:-}
SOUP=${SOUP:-}
LR_FACTOR=${LR_FACTOR:-${FREE_LR_FACTOR:-0.5}}
TRANSLATE_MINUTES=${TRANSLATE_MINUTES:-100000}
FREE_PRESET=${FREE_PRESET:-compact}
MIXED_PRESET=${MIXED_PRESET:-compact}
DISTILL=${DISTILL:-}
DISTILL_RESCORE=${DISTILL_RESCORE:-}
DISTILL_WEIGHT=${DISTILL_WEIGHT:-0.6}
DISTILL_CHANNEL=${DISTILL_CHANNEL:-}
DISTILL_CHANNEL_WEIGHT=${DISTILL_CHANNEL_WEIGHT:-0.3}
BEAMS=${BEAMS:-4}
what=${1:-all}
case "$what" in
    en-de | de-en | translate | en-de-free | de-en-free | free | parse | all) ;;
    *)
        echo "usage: scripts/train-demo.sh [en-de|de-en|translate|en-de-free|de-en-free|free|parse|all]" >&2
        exit 2
        ;;
esac

log "building the transduce CLI"
cargo build --workspace --locked
T="$CARGO_TARGET_DIR/debug/transduce"
mkdir -p "$WORK"

# train RUN MINUTES STEPS ARGS...: a new run, or the same run resumed (on BACKEND, up to
# STEPS: stop conditions may change on resume, the rest of the run's settings stay).
train() {
    local run=$1 minutes=$2 steps=$3
    shift 3
    if [ -f "$run/run.json" ]; then
        log "resuming $run"
        "$T" train --resume --out "$run" --max-minutes "$minutes" --max-steps "$steps" \
            --backend "$BACKEND"
    else
        "$T" train --out "$run" --max-minutes "$minutes" --max-steps "$steps" \
            --backend "$BACKEND" ${PRECISION:+--precision "$PRECISION"} "$@"
    fi
}

# mix LANG: the training side LANG of the Tatoeba + Multi30k mix, and the two vals joined
# (the trainer's perplexity watches both domains).
mix() {
    local lang=$1 out="$WORK/mix"
    mkdir -p "$out"
    if [ ! -f "$out/train.$lang" ]; then
        {
            zcat "$DATA/tatoeba-en-de/train.$lang.gz"
            for _ in $(seq "$MULTI30K_COPIES"); do zcat "$DATA/multi30k/train.$lang.gz"; done
        } > "$out/train.$lang.part"
        mv "$out/train.$lang.part" "$out/train.$lang"
    fi
    if [ ! -f "$out/val.$lang" ]; then
        zcat "$DATA/tatoeba-en-de/val.$lang.gz" "$DATA/multi30k/val.$lang.gz" > "$out/val.$lang.part"
        mv "$out/val.$lang.part" "$out/val.$lang"
    fi
}

# tatoeba_only LANG: Tatoeba's side LANG alone, train and val (no non-commercial data).
tatoeba_only() {
    local lang=$1 out="$WORK/free"
    mkdir -p "$out"
    for split in train val; do
        [ -f "$out/$split.$lang" ] || zcat "$DATA/tatoeba-en-de/$split.$lang.gz" > "$out/$split.$lang"
    done
}

# bundle_for VAR BUNDLE FROM TO [WHY]: stops unless BUNDLE (named by the variable VAR) is a
# FROM→TO bundle, by its config.json's task.
bundle_for() {
    if ! grep -q "\"source\": \"$3\"" "$2/config.json" 2>/dev/null \
        || ! grep -q "\"target\": \"$4\"" "$2/config.json"; then
        echo "$1=$2: not a $3→$4 bundle (its config.json's task)${5:+, $5}" >&2
        exit 2
    fi
}

# length_filtered SRC TGT SRC_OUT TGT_OUT: the line pairs of SRC and TGT whose word counts
# are within twofold of each other; a machine translation outside that is most likely a
# failed one (a loop, a dropped clause).
length_filtered() {
    paste "$1" "$2" | awk -F'\t' -v s="$3" -v t="$4" '
        { a = split($1, x, " "); b = split($2, y, " ") }
        a > 0 && b > 0 && a <= 2 * b && b <= 2 * a { print $1 > s; print $2 > t }'
}

# prepared_with W MARK VAR VALUE: stops if W's data was prepared with VAR other than VALUE
# (recorded in the file MARK): a run must resume on the data it was prepared with.
prepared_with() {
    [ ! -f "$1/data/train.bin" ] || [ "$(cat "$2" 2>/dev/null)" = "$4" ] || {
        echo "$1 was prepared with $3='$(cat "$2" 2>/dev/null)', not '$4': move it away" \
            "(or set WORK) to train anew" >&2
        exit 2
    }
}

# back_translated SRC TGT DATA: DATA's training pairs (WORK/DATA: free, Tatoeba alone; mix,
# Tatoeba + Multi30k) plus the CC0 sentences of TGT with synthetic SRC sources from
# BACK_TRANSLATE (a TGT→SRC bundle), and DATA's val, in WORK/DATA-bt-SRC-TGT.
back_translated() {
    local src=$1 tgt=$2 in="$WORK/$3" out="$WORK/$3-bt-$1-$2"
    local mono="$DATA/common-voice-sentences/$tgt.txt.gz"
    bundle_for BACK_TRANSLATE "$BACK_TRANSLATE" "$tgt" "$src" "needed for $src-$tgt"
    mkdir -p "$out"
    [ -f "$out/cv.$src" ] || {
        log "back-translating $mono with $BACK_TRANSLATE"
        "$T" translate --model "$BACK_TRANSLATE" --input "$mono" --output "$out/cv.$src.part" --quiet
        mv "$out/cv.$src.part" "$out/cv.$src"
    }
    if [ ! -f "$out/train.$tgt" ]; then
        # Synthetic source, real target.
        length_filtered "$out/cv.$src" <(zcat "$mono") "$out/bt.$src" "$out/bt.$tgt"
        for lang in "$src" "$tgt"; do
            cat "$in/train.$lang" "$out/bt.$lang" > "$out/train.$lang.part"
            cp "$in/val.$lang" "$out/val.$lang"
        done
        mv "$out/train.$src.part" "$out/train.$src"
        mv "$out/train.$tgt.part" "$out/train.$tgt"
    fi
}

# teacher_translations SRC TGT IN OUT: IN (SRC sentences) translated into OUT by the
# teacher: the DISTILL bundle, or the ensemble of the DISTILL bundles (one vocabulary), with
# its beam and α; with DISTILL_RESCORE=BUNDLE (any vocabulary), DISTILL's bundle and BUNDLE
# each translate IN and every candidate is rescored by both (scripts/rescored-teacher.sh,
# DISTILL_WEIGHT on DISTILL's); with DISTILL_CHANNEL=REVERSE, DISTILL's bundle reranked by
# the reverse model (`translate --channel`).
teacher_translations() {
    local src=$1 tgt=$2 in=$3 out=$4 teachers=() models=() teacher
    IFS=, read -ra teachers <<< "$DISTILL"
    for teacher in "${teachers[@]}"; do
        bundle_for DISTILL "$teacher" "$src" "$tgt" "the teacher of $src-$tgt"
        models+=(--model "$teacher")
    done
    [ ! -f "$out" ] || return 0
    if { [ -n "$DISTILL_RESCORE" ] || [ -n "$DISTILL_CHANNEL" ]; } \
        && { [ "${#teachers[@]}" != 1 ] || { [ -n "$DISTILL_RESCORE" ] && [ -n "$DISTILL_CHANNEL" ]; }; }; then
        echo "DISTILL_RESCORE or DISTILL_CHANNEL (not both) takes one DISTILL bundle" >&2
        exit 2
    fi
    if [ -n "$DISTILL_CHANNEL" ]; then
        bundle_for DISTILL_CHANNEL "$DISTILL_CHANNEL" "$tgt" "$src" "the channel of $src-$tgt"
        log "distilling: $in translated by $DISTILL, reranked with $DISTILL_CHANNEL"
        "$T" translate --model "$DISTILL" --channel "$DISTILL_CHANNEL" \
            --channel-weight "$DISTILL_CHANNEL_WEIGHT" --input "$in" --output "$out.part" --quiet
        mv "$out.part" "$out"
    elif [ -n "$DISTILL_RESCORE" ]; then
        bundle_for DISTILL_RESCORE "$DISTILL_RESCORE" "$src" "$tgt" "the teacher of $src-$tgt"
        log "distilling: $in translated by $DISTILL and $DISTILL_RESCORE, rescored"
        T="$T" scripts/rescored-teacher.sh "$in" "$out" "$DISTILL" "$DISTILL_RESCORE" \
            "$DISTILL_WEIGHT"
    else
        log "distilling: $in translated by ${teachers[*]}"
        "$T" translate "${models[@]}" --input "$in" --output "$out.part" --quiet
        mv "$out.part" "$out"
    fi
}

# distilled SRC TGT IN OUT: IN's training sources with targets written by the teacher
# (teacher_translations), and IN's val, in OUT.
distilled() {
    local src=$1 tgt=$2 in=$3 out=$4
    mkdir -p "$out"
    teacher_translations "$src" "$tgt" "$in/train.$src" "$out/teacher.$tgt"
    if [ ! -f "$out/train.$tgt" ]; then
        length_filtered "$in/train.$src" "$out/teacher.$tgt" "$out/train.$src.part" \
            "$out/train.$tgt.part"
        cp "$in/val.$src" "$out/val.$src"
        cp "$in/val.$tgt" "$out/val.$tgt"
        mv "$out/train.$src.part" "$out/train.$src"
        mv "$out/train.$tgt.part" "$out/train.$tgt"
    fi
}

# distilled_mix SRC TGT IN OUT: IN's training pairs, references kept, plus every training
# pair's source again with the teacher's translation (each distinct source translated once;
# the length filter of synthetic pairs), and IN's val, in OUT. The mixed translators keep
# the references: the teacher adds what it says, it does not replace the captions' five
# styles of reference.
distilled_mix() {
    local src=$1 tgt=$2 in=$3 out=$4
    mkdir -p "$out"
    [ -f "$out/sources.$src" ] || awk '!seen[$0]++' "$in/train.$src" > "$out/sources.$src"
    teacher_translations "$src" "$tgt" "$out/sources.$src" "$out/teacher.$tgt"
    if [ ! -f "$out/train.$tgt" ]; then
        # Whole lines as keys (a sentence may hold a tab); word counts as length_filtered's.
        awk -v s="$out/kd.$src" -v t="$out/kd.$tgt" '
            FILENAME == ARGV[1] { source[FNR] = $0; next }
            FILENAME == ARGV[2] { teacher[source[FNR]] = $0; next }
            {
                h = teacher[$0]; a = split($0, x, " "); b = split(h, y, " ")
                if (a > 0 && b > 0 && a <= 2 * b && b <= 2 * a) { print $0 > s; print h > t }
            }' "$out/sources.$src" "$out/teacher.$tgt" "$in/train.$src"
        for lang in "$src" "$tgt"; do
            cat "$in/train.$lang" "$out/kd.$lang" > "$out/train.$lang.part"
            cp "$in/val.$lang" "$out/val.$lang"
        done
        mv "$out/train.$src.part" "$out/train.$src"
        mv "$out/train.$tgt.part" "$out/train.$tgt"
    fi
}

# bleu HYP REF: the score alone.
bleu() {
    "$T" eval bleu --hyp "$1" --ref "$2" | awk '{ print $3; exit }'
}

# translator SRC TGT [free]: prepare, train, average, choose α on the vals (both vals for
# the mixed translators, Tatoeba's for the free ones), export, test once.
translator() {
    local src=$1 tgt=$2 variant=${3:-mixed}
    local suffix="" data=mix gather=mix steps minutes=$TRANSLATE_MINUTES regularise=()
    # The variable naming the preset of a run from random weights (recorded in the card).
    local last=${AVERAGE_LAST:-8} preset=MIXED_PRESET
    local tatoeba="$DATA/tatoeba-en-de" multi30k="$DATA/multi30k"
    if [ "$variant" = free ]; then
        suffix=-free data=free gather=tatoeba_only minutes=$FREE_MINUTES
        steps=${FREE_STEPS:-$(shipped_steps "$src-$tgt-free")}
        regularise=(--dropout "$FREE_DROPOUT")
        last=$FREE_AVERAGE_LAST preset=FREE_PRESET
    elif [ "$src-$tgt" = de-en ]; then
        steps=$DE_EN_STEPS
    else
        steps=$EN_DE_STEPS
    fi
    local start=(--preset "${!preset}")
    if [ -n "$INIT" ]; then
        bundle_for INIT "$INIT" "$src" "$tgt"
        start=(--init "$INIT")
    fi
    local W="$WORK/$src-$tgt$suffix" M="$WORK/$data" V="$WORK/en-de$suffix/data"
    "$gather" "$src"
    "$gather" "$tgt"
    local bt=""
    if [ -n "$BACK_TRANSLATE" ]; then
        back_translated "$src" "$tgt" "$data"
        M="$WORK/$data-bt-$src-$tgt" bt=$BACK_TRANSLATE
    fi
    local teachers=""
    if [ -n "$DISTILL" ]; then
        if [ "$variant" = free ]; then
            distilled "$src" "$tgt" "$M" "$W/distilled"
        else
            distilled_mix "$src" "$tgt" "$M" "$W/distilled"
        fi
        M="$W/distilled" teachers=$DISTILL
        [ -z "$DISTILL_RESCORE" ] \
            || teachers="$DISTILL DISTILL_RESCORE=$DISTILL_RESCORE DISTILL_WEIGHT=$DISTILL_WEIGHT"
        [ -z "$DISTILL_CHANNEL" ] || teachers="$DISTILL DISTILL_CHANNEL=$DISTILL_CHANNEL DISTILL_CHANNEL_WEIGHT=$DISTILL_CHANNEL_WEIGHT"
    fi
    # One BPE vocabulary for both directions: en-de learns it, de-en reuses it.
    local vocabulary=(--vocab-size 8000)
    if [ -n "$INIT" ]; then
        vocabulary=(--tokenizer "$INIT/tokenizer.json")
    elif [ "$src-$tgt" = de-en ]; then
        [ -f "$V/tokenizer.json" ] || "$T" prepare --src "$M/train.en" \
            --tgt "$M/train.de" --valid-src "$M/val.en" --valid-tgt "$M/val.de" \
            --vocab-size 8000 --out "$V"
        vocabulary=(--tokenizer "$V/tokenizer.json")
    fi
    local bt_mark="$W/data/back-translated-by" kd_mark="$W/data/distilled-from"
    prepared_with "$W" "$bt_mark" BACK_TRANSLATE "$bt"
    prepared_with "$W" "$kd_mark" DISTILL "$teachers"
    if [ ! -f "$W/data/train.bin" ]; then
        "$T" prepare --src "$M/train.$src" --tgt "$M/train.$tgt" --valid-src "$M/val.$src" \
            --valid-tgt "$M/val.$tgt" "${vocabulary[@]}" --out "$W/data"
        [ -z "$bt" ] || echo "$bt" > "$bt_mark"
        [ -z "$teachers" ] || echo "$teachers" > "$kd_mark"
    fi
    local provenance=()
    if [ "$TRAIN" = 0 ]; then
        [ -f "$W/averaged.safetensors" ] || {
            echo "TRAIN=0: $W/averaged.safetensors is missing" >&2
            exit 1
        }
        log "TRAIN=0: going on from $W/averaged.safetensors"
        # The run folder's checkpoints are not the ones averaged: the step count and the
        # training time come from STEPS and the run's metrics.
        local seconds
        seconds=$(grep -o "\"elapsed_secs\":[0-9.]*,[^}]*\"step\":$steps," \
            "$W/run/metrics.jsonl" | head -1 | sed 's/^"elapsed_secs":\([0-9.]*\),.*/\1/')
        provenance=(--steps "$steps" ${seconds:+--training-seconds "$seconds"})
    else
        train "$W/run" "$minutes" "$steps" --data "$W/data" "${start[@]}" \
            --max-tokens "$MAX_TOKENS" --warmup "$WARMUP" --lr-factor "$LR_FACTOR" \
            "${regularise[@]}" --checkpoint-steps "$CHECKPOINT_STEPS" --checkpoint-minutes 100000 \
            --keep 20
        local run_average="$W/averaged.safetensors"
        [ -z "$SOUP" ] || run_average="$W/run-averaged.safetensors"
        "$T" average --run "$W/run" --last "$last" --out "$run_average"
        [ -z "$SOUP" ] || "$T" average --inputs "$SOUP" "$run_average" --out "$W/averaged.safetensors"
    fi
    "$T" export --model "$W/run" --checkpoint "$W/averaged.safetensors" --int8 \
        --source "$src" --target "$tgt" --out "$W/bundle" "${provenance[@]}"
    # The beam size and the length penalty are chosen on the vals (the mean BLEU of the two
    # for the mixed translators, Tatoeba's alone for the free ones), as §6.1 chose α 0.6 on
    # its development set. Multi30k val is scored either way, for the card.
    local best_beam=4 best_alpha=0.6 best_val=-1 tatoeba_val=0 multi30k_val=0 beam alpha t m mean
    # A grid point's key in file names and alpha.txt rows: α alone when only beam 4 is tried.
    local key
    : > "$W/alpha.txt"
    # The free translators and the continued en-de chose the edge of the first grid (2.0).
    for beam in $BEAMS; do
        for alpha in 0.6 1.0 1.5 2.0 2.5 3.0; do
            key=$alpha
            [ "$BEAMS" = 4 ] || key="$beam $alpha"
            "$T" translate --model "$W/bundle" --beam "$beam" --alpha "$alpha" \
                --input "$tatoeba/val.$src.gz" --output "$W/val-tatoeba.${key/ /.}.$tgt" --quiet
            "$T" translate --model "$W/bundle" --beam "$beam" --alpha "$alpha" \
                --input "$multi30k/val.$src.gz" --output "$W/val-multi30k.${key/ /.}.$tgt" --quiet
            t=$(bleu "$W/val-tatoeba.${key/ /.}.$tgt" "$tatoeba/val.$tgt.gz")
            m=$(bleu "$W/val-multi30k.${key/ /.}.$tgt" "$multi30k/val.$tgt.gz")
            mean=$(awk -v a="$t" -v b="$m" 'BEGIN { printf "%.2f", (a + b) / 2 }')
            [ "$variant" = free ] && mean=$t
            log "$src→$tgt val BLEU with beam $beam, α $alpha: Tatoeba $t, Multi30k $m (mean $mean)"
            echo "$key $t $m $mean" >> "$W/alpha.txt"
            if awk -v a="$mean" -v b="$best_val" 'BEGIN { exit !(a > b) }'; then
                best_beam=$beam best_alpha=$alpha best_val=$mean tatoeba_val=$t multi30k_val=$m
            fi
        done
    done
    # The one test run of each test set.
    "$T" translate --model "$W/bundle" --beam "$best_beam" --alpha "$best_alpha" \
        --input "$tatoeba/test.$src.gz" --output "$W/test-tatoeba.hyp.$tgt"
    "$T" translate --model "$W/bundle" --beam "$best_beam" --alpha "$best_alpha" \
        --input "$multi30k/test2016.$src.gz" --output "$W/test2016.hyp.$tgt"
    "$T" eval bleu --hyp "$W/test-tatoeba.hyp.$tgt" --ref "$tatoeba/test.$tgt.gz" \
        | tee "$W/bleu-tatoeba.txt"
    "$T" eval bleu --hyp "$W/test2016.hyp.$tgt" --ref "$multi30k/test2016.$tgt.gz" \
        | tee "$W/bleu-test2016.txt"
    local tatoeba_test multi30k_test command="scripts/train-demo.sh $src-$tgt$suffix"
    [ -z "$bt" ] || command="BACK_TRANSLATE=$bt $command"
    [ -z "$teachers" ] || command="DISTILL=$teachers $command"
    [ -n "$INIT" ] || [ "${!preset}" = compact ] || command="$preset=${!preset} $command"
    [ -z "$INIT" ] || command="INIT=$INIT LR_FACTOR=$LR_FACTOR $command"
    [ "$BEAMS" = 4 ] || command="BEAMS=\"$BEAMS\" $command"
    [ -z "$SOUP" ] || command="SOUP=$SOUP $command"
    tatoeba_test=$(awk '{ print $3; exit }' "$W/bleu-tatoeba.txt")
    multi30k_test=$(awk '{ print $3; exit }' "$W/bleu-test2016.txt")
    "$T" export --model "$W/run" --checkpoint "$W/averaged.safetensors" --int8 \
        --source "$src" --target "$tgt" --out "$W/bundle" --beam "$best_beam" --alpha "$best_alpha" \
        --metric "bleu_tatoeba_test=$tatoeba_test" --metric "bleu_test2016=$multi30k_test" \
        --metric "bleu_tatoeba_val=$tatoeba_val" --metric "bleu_multi30k_val=$multi30k_val" \
        --metric "bleu_signature=$(cut -d' ' -f1 "$W/bleu-tatoeba.txt")" \
        --command "$command" "${provenance[@]}"
    log "$src→$tgt bundle in $W/bundle (Tatoeba test $tatoeba_test, test2016 $multi30k_test);" \
        "copy it to web/models/$src-$tgt$suffix"
}

case "$what" in
    en-de | translate | all) translator en de ;;&
    de-en | translate | all) translator de en ;;&
    en-de-free | free | all) translator en de free ;;&
    de-en-free | free | all) translator de en free ;;
esac

if [ "$what" = parse ] || [ "$what" = all ]; then
    D="$DATA/ptb-sample"
    W="$WORK/ptb"
    [ -f "$W/data/train.bin" ] || "$T" prepare --task parse --trees "$D/train.trees.gz" \
        --valid-trees "$D/dev.trees.gz" --vocab-size 4000 --max-len 512 --out "$W/data"
    train "$W/run" "$PARSE_MINUTES" "$PARSE_STEPS" --data "$W/data" --preset mini \
        --dropout 0.2 --max-tokens 2048 --warmup 400 --lr-factor 0.5 --checkpoint-steps 300 --keep 10 \
        --word-focus
    "$T" average --run "$W/run" --last 4 --out "$W/averaged.safetensors"
    "$T" export --task parse --model "$W/run" --checkpoint "$W/averaged.safetensors" --int8 \
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
    "$T" export --task parse --model "$W/run" --checkpoint "$W/averaged.safetensors" --int8 \
        --out "$W/bundle" --metric "f1_test=$f1" --command "scripts/train-demo.sh parse"
    log "parser bundle in $W/bundle (test F1 $f1); copy it to web/models/ptb-parser"
fi
