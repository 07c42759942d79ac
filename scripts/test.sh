#!/usr/bin/env bash
# The test command: installs what the tests need, then runs formatting and lint checks,
# every cargo test of the workspace and the wasm32 build. Ends with one line
# "N passed, N failed" (", N skipped" when tests were skipped); exits non-zero on failure.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

ensure_rust
ensure_wasm_target
# A software Vulkan device (lavapipe), so the wgpu backend is tested without a GPU.
ensure_apt mesa-vulkan-drivers

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
step "cargo clippy" cargo clippy --workspace --all-targets --locked -- -D warnings

log "cargo test --workspace"
test_log=$(mktemp)
cargo test --workspace --locked 2>&1 | tee "$test_log"
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
grep -h '^SKIP:' "$test_log" | sort -u >&2 || true
rm -f "$test_log"

step "wasm32 build of the model crate" \
    cargo build -p transduce --target wasm32-unknown-unknown --release --locked

if [ ${#failures[@]} -gt 0 ]; then
    printf 'failed: %s\n' "${failures[@]}" >&2
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
