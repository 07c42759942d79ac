#!/usr/bin/env bash
# The test command: installs what the tests need, then runs formatting and lint checks,
# every cargo test of the workspace, the wasm32 build of the page and the npm package, and
# the browser end-to-end tests (CPU, WebGPU, auto, embedded package). Ends with a table of
# its phases' times and one line "N passed, N failed" (", N skipped" when tests were
# skipped); exits non-zero on failure.
#
#   scripts/test.sh           the whole suite (the README's test command; CI runs it)
#   scripts/test.sh --quick   the inner loop: fmt, the cycle check, clippy without CUDA, the
#                             unit tests and the node tests; no browser, lavapipe or wasm
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

quick=false
case "${1-}" in
    --quick) quick=true ;;
    "") ;;
    *)
        echo "usage: scripts/test.sh [--quick]" >&2
        exit 2
        ;;
esac

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

# Each phase's wall time, printed as a table at the end, so a slower phase shows in the first
# CI log after the change that slowed it.
phase_rows=()
phase_name=""
phase_start=$SECONDS
phase() { # phase NAME: ends the current phase, starts NAME ("" ends without starting)
    if [ -n "$phase_name" ]; then
        phase_rows+=("$phase_name"$'\t'"$((SECONDS - phase_start))")
    fi
    phase_name=$1
    phase_start=$SECONDS
}
phase_table() {
    local row name secs
    printf '\n%-64s %7s\n' "phase" "min:s" >&2
    for row in "${phase_rows[@]}"; do
        name=${row%%$'\t'*}
        secs=${row##*$'\t'}
        printf '%-64s %4d:%02d\n' "$name" $((secs / 60)) $((secs % 60)) >&2
    done
    printf '%-64s %4d:%02d\n\n' "all" $((SECONDS / 60)) $((SECONDS % 60)) >&2
}

# Counts a cargo test run's results from its output ($1) and the skip log ($2).
count_cargo_tests() {
    local test_log=$1 skip_log=$2 test_status=$3 p f i whole
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
    # A test is skipped if it skipped itself (kind `skip`), whatever its other calls; its
    # cases skipped while the rest ran (kind `part`) are listed apart.
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
}

# cargo test ARGS...: builds, then runs, in two phases; counts the results.
cargo_tests() {
    local test_log skip_log status
    phase "cargo test: build"
    log "cargo test $* --no-run"
    # --timings: where the build's time goes ($CARGO_TARGET_DIR/cargo-timings/).
    if ! cargo test "$@" --locked --no-run --timings; then
        failed=$((failed + 1))
        failures+=("cargo test (build)")
        return
    fi
    phase "cargo test: run"
    log "cargo test $*"
    test_log=$(mktemp)
    # Tests that cannot run here call transduce_testing::skip (or skip_part for one of their
    # cases), which appends to this file: cargo counts them as passed, so they are moved to
    # the skipped count, and each reason is printed once.
    skip_log=$(mktemp)
    # --no-fail-fast: every test binary runs, so one failure does not hide the others.
    TRANSDUCE_SKIP_LOG=$skip_log cargo test "$@" --locked --no-fail-fast 2>&1 | tee "$test_log"
    status=${PIPESTATUS[0]}
    count_cargo_tests "$test_log" "$skip_log" "$status"
    rm -f "$test_log" "$skip_log"
}

# The node unit tests (node's test runner): the page's pure logic, in seconds. Each test
# counts, from the runner's closing "# pass N" / "# fail N".
node_tests() {
    local files out status np nf
    files=$(find tests/node -name '*.test.mjs' 2>/dev/null | sort)
    [ -n "$files" ] || return 0
    log "node tests (tests/node)"
    out=$(mktemp)
    # shellcheck disable=SC2086
    node --test $files 2>&1 | tee "$out"
    status=${PIPESTATUS[0]}
    np=$(awk '/^# pass / { print $3 }' "$out")
    nf=$(awk '/^# fail / { print $3 }' "$out")
    passed=$((passed + ${np:-0}))
    failed=$((failed + ${nf:-0}))
    if [ "$status" -ne 0 ] && [ "${nf:-0}" -eq 0 ]; then
        failed=$((failed + 1))
        failures+=("node tests (harness failure)")
    fi
    [ "${nf:-0}" -eq 0 ] || failures+=("node tests")
    rm -f "$out"
}

finish() {
    phase ""
    if [ ${#failures[@]} -gt 0 ]; then
        printf 'failed: %s\n' "${failures[@]}" >&2
    fi
    log "done"
    phase_table
    local suffix=""
    [ "${parts:-0}" -gt 0 ] && suffix=" (and $parts cases skipped inside passing tests)"
    echo "$passed passed, $failed failed, $skipped skipped$suffix"
    [ "$failed" -eq 0 ]
    exit
}

if $quick; then
    phase "tools (mold)"
    ensure_apt mold && fast_linker
    ensure_rust
    phase "fmt, import cycles, clippy (no CUDA)"
    step "cargo fmt --check" cargo fmt --all -- --check
    step "no import cycles between files or folders (tests/support/check-cycles.py)" python3 tests/support/check-cycles.py
    step "tests/support/check-cycles.py's tests" python3 tests/support/test_check_cycles.py
    step "cargo clippy" cargo clippy --workspace --all-targets --locked -- -D warnings
    # The unit tests: each crate's own, none of the integration binaries (the CLI's, the
    # engine's, the GPU decoder's equality, the behaviour tests).
    cargo_tests --workspace --lib
    phase "node tests"
    ensure_node_modules
    node_tests
    finish
fi

phase "tools: apt, Rust components, CTranslate2"
# mold links the test binaries (each holds the burn stack) several times faster than ld.
ensure_apt mold && fast_linker
ensure_rust
# A software Vulkan device (lavapipe), so the wgpu backend is tested without a GPU;
# Chromium for the browser tests. Open MPI and MPICH, for the data-parallel ranks' tests
# (mpirun and mpiexec.mpich start the ranks; the trainer loads either's libmpi at run time).
ensure_apt mesa-vulkan-drivers chromium openmpi-bin mpich
# The page's toolchain parts that rustup installs, here rather than beside a build.
ensure_wasm_target
ensure_nightly_src
# CTranslate2 in a virtual environment: a recipe's `ct2 = true` export (cargo test) and the
# check of the shipped translators below both run it.
ensure_ct2 && export TRANSDUCE_CT2_PYTHON="$CT2_PYTHON"
# Autotune's first call per shape benchmarks every kernel variant, ~15 s per shape on a
# CPU-emulated device: the wgpu tests check results, not speed, so they tune minimally.
export CUBECL_AUTOTUNE_LEVEL=${CUBECL_AUTOTUNE_LEVEL:-minimal}

# The page's side runs beside the native checks on idle cycles only (SCHED_IDLE, else
# nice 19): the tools only it needs (wasm-bindgen-cli, trunk, the node packages), its five
# wasm modules and the npm package. It takes the core a native phase leaves idle (a test
# binary on one thread, a link) and yields it back at once, so the native phases and
# their tests run as they would alone; what is left of it runs after them. Its builds use
# their own profile's folders of the build cache, so neither build waits on the other's
# lock. Its output is kept and printed when it is waited for.
page_log=$(mktemp)
page_side() {
    local status=0
    SECONDS=0
    # The wasm builds first, the tools after: the builds end in long single-threaded steps
    # (each module's link-time optimization) that fit the core a native phase leaves idle,
    # while the tools' many small crates build two at a time in what is left after the
    # native phases. trunk then finds the modules built.
    log "compiling the page's wasm modules (cargo, before their tools)"
    wasm_cargo_all || status=2
    echo "wasm $SECONDS" >"$page_log.times"
    ensure_wasm_bindgen && ensure_trunk && ensure_node_modules || status=1
    echo "tools $SECONDS" >>"$page_log.times"
    if [ $status -eq 0 ]; then
        log "trunk build of the page (wasm32)"
        build_page || status=2
    fi
    if [ $status -eq 0 ]; then
        log "npm package (scripts/build-npm.sh)"
        bash scripts/build-npm.sh || status=3
    fi
    echo "all $SECONDS" >>"$page_log.times"
    return $status
}
page_started=$SECONDS
(
    chrt --idle --pid 0 "$BASHPID" 2>/dev/null || renice -n 19 "$BASHPID" >/dev/null
    page_side
) >"$page_log" 2>&1 &
page_pid=$!

phase "fmt, import cycles, clippy"
step "cargo fmt --check" cargo fmt --all -- --check
# Import cycles between the files, and between the folders, of each crate (test code aside):
# each one is printed with the `use`s (file:line) that form it. The checker's own tests run
# on small fake crates.
step "no import cycles between files or folders (tests/support/check-cycles.py)" python3 tests/support/check-cycles.py
step "tests/support/check-cycles.py's tests" python3 tests/support/test_check_cycles.py
# One front-end pass over the workspace: clippy with the CUDA trainer's feature on, so the
# CUDA code is linted and type-checked in the same pass as the rest (a separate
# `cargo check --features cuda` re-checked the whole burn stack). DOCS_RS=1 skips
# cubecl-llvm's LLVM build, which only a full CUDA build needs
# (scripts/setup-cuda-build.sh; README "CUDA"); no other crate here reads it.
step "cargo clippy (with the CUDA trainer)" \
    env DOCS_RS=1 cargo clippy --workspace --all-targets --locked --features transduce-cli/cuda -- -D warnings

cargo_tests --workspace

# The host decoder's kernels on each lower path its dispatch can take (TRANSDUCE_CPU_ISA,
# src/host/isa.rs): the same bits on every path, so its unit tests and the behaviour tests
# that hold it to burn's decoder pass on each. The binaries are built: seconds each.
phase "the host decoder's tests on each forced path"
for isa in avx2 portable; do
    step "the host decoder's tests with TRANSDUCE_CPU_ISA=$isa" \
        env TRANSDUCE_CPU_ISA=$isa cargo test --workspace --locked --lib --test behaviour -- host:: --quiet
done

# The trainer as a library: examples/train.rs (built by cargo test above) prepares a TSV of
# pairs and trains `tiny` for 30 steps through it, with no CLI in between.
example_train() {
    local dir status=0 i
    dir=$(mktemp -d)
    for i in $(seq 1 300); do
        printf 'a%d b%d c%d\tc%d b%d a%d\n' $((i % 17)) $((i % 5)) $((i % 7)) $((i % 7)) $((i % 5)) $((i % 17))
    done >"$dir/pairs.tsv"
    "$CARGO_TARGET_DIR/debug/examples/train" "$dir/pairs.tsv" "$dir/out" \
        && [ -s "$dir/out/run/metrics.jsonl" ] && [ -d "$dir/out/run/checkpoints" ] || status=1
    rm -rf "$dir"
    return $status
}
phase "the library example, the CTranslate2 check"
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

phase "waiting for the page's side"
log "waiting for the page's side (wasm modules, tools, npm package)"
wait "$page_pid"
page_status=$?
cat "$page_log" >&2
page_wasm=$(awk '$1 == "wasm" { print $2 }' "$page_log.times" 2>/dev/null)
page_tools=$(awk '$1 == "tools" { print $2 }' "$page_log.times" 2>/dev/null)
page_all=$(awk '$1 == "all" { print $2 }' "$page_log.times" 2>/dev/null)
phase_rows+=("  beside the above: the page's wasm modules (cargo)"$'\t'"${page_wasm:-0}")
phase_rows+=("  beside the above: the page's tools"$'\t'"$((${page_tools:-0} - ${page_wasm:-0}))")
phase_rows+=("  beside the above: tools, the page and the npm package in all"$'\t'"${page_all:-$((SECONDS - page_started))}")
rm -f "$page_log" "$page_log.times"
ensure_node_modules
# After the page's side, which installs the node packages (linkedom for element.js's tests):
# from nothing they are not there before it.
node_tests
pinned=$(awk -F'"' '/^wasm_bindgen = / { print $2 }' Trunk.toml)
step "Trunk.toml pins Cargo.lock's wasm-bindgen ($(wasm_bindgen_version))" \
    test "$pinned" = "$(wasm_bindgen_version)"
step "page tools installed (wasm-bindgen-cli, trunk, node packages)" test "$page_status" -ne 1
step "trunk build of the page (wasm32)" test "$page_status" -ne 2 -a "$page_status" -ne 1
step "npm package (scripts/build-npm.sh)" test "$page_status" -eq 0
# The page's and the package's JavaScript against its .d.ts files and the wasm modules'
# (web/tsconfig.json finds those in dist/, so this comes after the page's build): a second.
step "the JavaScript type-checks (tsc -p web)" tsc -p web
# The modules behind .d.ts files (tsc reads those instead), and those typed strictly.
step "the modules behind .d.ts files type-check (web/tsconfig.impl.json)" tsc -p web/tsconfig.impl.json
step "the modules typed strictly type-check under strict (web/tsconfig.strict.json)" tsc -p web/tsconfig.strict.json

phase "browser end-to-end tests"
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

finish
