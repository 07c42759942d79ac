#!/usr/bin/env bash
# The test command: installs what the tests need, then runs formatting and lint checks,
# every cargo test of the workspace, the wasm32 build of the page and the npm package, and
# the browser end-to-end tests (CPU, WebGPU, auto, embedded package). Ends with one line
# "N passed, N failed" (", N skipped" when tests were skipped); exits non-zero on failure.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

# mold links the test binaries (each holds the burn stack) several times faster than ld.
ensure_apt mold && fast_linker
ensure_page_tools
# A software Vulkan device (lavapipe), so the wgpu backend is tested without a GPU;
# Chromium for the browser tests.
ensure_apt mesa-vulkan-drivers chromium
# Open MPI and MPICH, for the data-parallel ranks' tests (mpirun and mpiexec.mpich start the
# ranks; the trainer loads either's libmpi at run time).
ensure_apt openmpi-bin mpich
# CTranslate2 in a virtual environment: a recipe's `ct2 = true` export (cargo test) and the
# check of the shipped translators below both run it.
ensure_ct2 && export TRANSDUCE_CT2_PYTHON="$CT2_PYTHON"
# Autotune's first call per shape benchmarks every kernel variant, ~15 s per shape on a
# CPU-emulated device: the wgpu tests check results, not speed, so they tune minimally.
export CUBECL_AUTOTUNE_LEVEL=${CUBECL_AUTOTUNE_LEVEL:-minimal}

passed=0
failed=0
skipped=0
failures=()

step() { # step NAME COMMAND...: a check that counts as one test
    local name=$1
    shift
    log "$name"
    if "$@"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        failures+=("$name")
    fi
}

step "cargo fmt --check" cargo fmt --all -- --check
# Import cycles between the files, and between the folders, of each crate (test code aside):
# each one is printed with the `use`s (file:line) that form it. The checker's own tests run
# on small fake crates.
step "no import cycles between files or folders (scripts/check-cycles.py)" python3 scripts/check-cycles.py
step "scripts/check-cycles.py's tests" python3 scripts/test_check_cycles.py
# One front-end pass over the workspace: clippy with the CUDA trainer's feature on, so the
# CUDA code is linted and type-checked in the same pass as the rest (a separate
# `cargo check --features cuda` re-checked the whole burn stack). DOCS_RS=1 skips
# cubecl-llvm's LLVM build, which only a full CUDA build needs
# (scripts/setup-cuda-build.sh; README "CUDA"); no other crate here reads it.
step "cargo clippy (with the CUDA trainer)" \
    env DOCS_RS=1 cargo clippy --workspace --all-targets --locked --features transduce-cli/cuda -- -D warnings

log "cargo test --workspace"
test_log=$(mktemp)
# Tests that cannot run here call transduce_testing::skip (or skip_part for one of their
# cases), which appends to this file: cargo counts them as passed, so they are moved to the
# skipped count below, and each reason is printed once.
skip_log=$(mktemp)
export TRANSDUCE_SKIP_LOG=$skip_log
# --no-fail-fast: every test binary runs, so one failure does not hide the others.
cargo test --workspace --locked --no-fail-fast --timings 2>&1 | tee "$test_log"
test_status=${PIPESTATUS[0]}
read -r p f i < <(awk '/^test result:/ {
        for (k = 1; k <= NF; k++) {
            if ($(k) ~ /^passed/) p += $(k-1);
            if ($(k) ~ /^failed/) f += $(k-1);
            if ($(k) ~ /^ignored/) i += $(k-1);
        }
    } END { print p+0, f+0, i+0 }' "$test_log")
passed=$((passed + p))
failed=$((failed + f))
skipped=$((skipped + i))
if [ "$test_status" -ne 0 ] && [ "$f" -eq 0 ]; then
    failed=$((failed + 1))
    failures+=("cargo test (build or harness failure)")
fi
# A test is skipped if it skipped itself (kind `skip`), whatever its other calls; its cases
# skipped while the rest ran (kind `part`) are listed apart.
whole=$(awk -F'\t' '$1 == "skip" { print $2 "\t" $3 }' "$skip_log" | sort -u | wc -l)
passed=$((passed - whole))
skipped=$((skipped + whole))
if [ "$whole" -gt 0 ]; then
    echo "skipped tests (they could not run here):" >&2
    awk -F'\t' '$1 == "skip" { print "  SKIP: " $2 " " $3 ": " $4 }' "$skip_log" | sort -u >&2
fi
parts=$(awk -F'\t' '$1 == "part"' "$skip_log" | sort -u | wc -l)
if [ "$parts" -gt 0 ]; then
    echo "cases skipped inside tests that passed on the rest ($parts):" >&2
    awk -F'\t' '$1 == "part" { print "  SKIP: " $2 " " $3 ": " $4 }' "$skip_log" | sort -u >&2
fi
unset TRANSDUCE_SKIP_LOG
rm -f "$test_log" "$skip_log"

# The trainer as a library: examples/train.rs (built by cargo test above) prepares a TSV of
# pairs and trains `tiny` for 30 steps through it, with no CLI in between.
example_train() {
    local dir status=0 i
    dir=$(mktemp -d)
    for i in $(seq 1 300); do
        printf 'a%d b%d c%d\tc%d b%d a%d\n' $((i % 17)) $((i % 5)) $((i % 7)) $((i % 7)) $((i % 5)) $((i % 17))
    done > "$dir/pairs.tsv"
    "$CARGO_TARGET_DIR/debug/examples/train" "$dir/pairs.tsv" "$dir/out" \
        && [ -s "$dir/out/run/metrics.jsonl" ] && [ -d "$dir/out/run/checkpoints" ] || status=1
    rm -rf "$dir"
    return $status
}
step "examples/train.rs trains tiny through the library" example_train

# The CTranslate2 export (scripts/ct2.py) decodes each shipped translator (every
# `"task": "translate"` entry of web/models/index.json) as transduce does: 300 Multi30k
# test2016 sentences in its source language (or the committed fixture), beam 4 and greedy.
ct2_check() {
    ensure_ct2 || return 1
    local id src input dir status=0
    dir=$(mktemp -d)
    while read -r id src; do
        input=../shared/data/multi30k/test2016.$src.gz
        if [ ! -f "$input" ]; then
            echo "SKIP: $input not found; the CT2 check of $id uses tests/fixtures/browser-sentences.$src" >&2
            input=tests/fixtures/browser-sentences.$src
        fi
        "$CT2_PYTHON" scripts/ct2.py export --bundle "web/models/$id" --out "$dir/$id" || status=1
        for beam in 4 1; do
            [ $status -eq 0 ] || break
            "$CT2_PYTHON" scripts/ct2.py check --bundle "web/models/$id" --ct2 "$dir/$id" \
                --input "$input" --lines 300 --beam $beam --bin "$CARGO_TARGET_DIR/debug/transduce" || status=1
        done
    done < <(node -e 'for (const m of require("./web/models/index.json"))
        if (m.task === "translate") console.log(m.id, m.source)')
    rm -rf "$dir"
    return $status
}
step "CTranslate2 export decodes as transduce (scripts/ct2.py check, beam 4 and greedy)" ct2_check

pinned=$(awk -F'"' '/^wasm_bindgen = / { print $2 }' Trunk.toml)
step "Trunk.toml pins Cargo.lock's wasm-bindgen ($(wasm_bindgen_version))" \
    test "$pinned" = "$(wasm_bindgen_version)"
step "trunk build of the page (wasm32)" build_page
step "npm package (scripts/build-npm.sh)" bash scripts/build-npm.sh

log "browser end-to-end tests (Chromium, playwright-core)"
browser_log=$(mktemp)
node tests/browser/run.mjs --bin "$CARGO_TARGET_DIR/debug/transduce" 2>&1 | tee "$browser_log"
browser_status=${PIPESTATUS[0]}
read -r bp bf < <(awk '/^browser: / { print $2, $4 }' "$browser_log")
passed=$((passed + ${bp:-0}))
failed=$((failed + ${bf:-0}))
if [ "$browser_status" -ne 0 ] && [ "${bf:-0}" -eq 0 ]; then
    failed=$((failed + 1))
    failures+=("browser tests (harness failure)")
fi
grep -q '^not ok' "$browser_log" && failures+=("browser tests")
skipped=$((skipped + $(grep -c "^SKIP:" "$browser_log" || true)))
grep -h "^SKIP:" "$browser_log" >&2 || true
rm -f "$browser_log"

if [ ${#failures[@]} -gt 0 ]; then
    printf 'failed: %s\n' "${failures[@]}" >&2
fi
log "done"
suffix=""
[ "${parts:-0}" -gt 0 ] && suffix=" (and $parts cases skipped inside passing tests)"
echo "$passed passed, $failed failed, $skipped skipped$suffix"
[ "$failed" -eq 0 ]
