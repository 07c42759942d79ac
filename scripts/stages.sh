# Shared by the scripts that reproduce shipped bundles in stages of scripts/train-demo.sh
# (train-free.sh, train-mixed.sh); sourced after scripts/common.sh, with WORK set.

# shipped_steps ID: a shipped bundle's step count, from its own provenance (24,000 for one
# not shipped yet).
shipped_steps() {
    if [ -f "web/models/$1/config.json" ]; then
        grep -o '"steps": *[0-9]*' "web/models/$1/config.json" | grep -o '[0-9]*$'
    else
        echo 24000
    fi
}

# stage N FOLDER WHAT VAR=VALUE...: train-demo.sh WHAT with WORK=WORK/FOLDER and the
# settings given, bounded by steps alone, unless that bundle is finished (tested once, its
# scores recorded).
stage() {
    local n=$1 folder="$WORK/$2" what=$3
    shift 3
    if grep -q '"bleu_tatoeba_test"' "$folder/$what/bundle/config.json" 2>/dev/null; then
        log "stage $n ($what): done, $folder/$what/bundle"
        return
    fi
    log "stage $n ($what): WORK=$folder $* scripts/train-demo.sh $what"
    env WORK="$folder" FREE_MINUTES=100000 TRANSLATE_MINUTES=100000 "$@" \
        scripts/train-demo.sh "$what"
}
