#!/usr/bin/env bash
# The threaded CPU module (transduce-web with `threads`: src/threads.rs) and its relaxed-SIMD
# kernel over a shared memory, next to the modules trunk makes: run by trunk as a post_build
# hook (Trunk.toml). The worker loads them only where the page is cross-origin isolated, and
# decodes there on navigator.hardwareConcurrency threads (Web Workers over one memory).
#
# Wasm threads need every object compiled with atomics, std included, so std is rebuilt
# (`-Z build-std`) by the nightly toolchain's rust-src. Where this machine has no such
# toolchain, nothing is built and the page decodes on one thread (it says so).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/common.sh
out=${TRUNK_STAGING_DIR:-${1:?usage: scripts/build/threads-wasm.sh OUT_DIR (trunk passes TRUNK_STAGING_DIR)}}

nightly=$NIGHTLY
if ! has_nightly_src; then
    log "SKIP: no $nightly toolchain with rust-src here: the page decodes on one thread"
    exit 0
fi

log "building the threaded wasm module (cargo +$nightly -Z build-std, --features threads)"
wasm_cargo_threads
wasm-bindgen --target web --typescript --out-name transduce-web-threads --out-dir "$out" \
    "$CARGO_TARGET_DIR/threads/wasm32-unknown-unknown/web/transduce_web.wasm"
log "wasm-opt -Os on the threaded module"
wasm-opt -Os --enable-simd --enable-bulk-memory --enable-nontrapping-float-to-int \
    --enable-sign-ext --enable-mutable-globals --enable-threads \
    -o "$out/transduce-web-threads_bg.wasm" "$out/transduce-web-threads_bg.wasm"

# The relaxed kernel importing that shared memory (a memory import must match the memory's
# kind): the same code, with atomics, so the linker declares the import shared.
log "building the relaxed-SIMD kernel module over a shared memory"
wasm_cargo_relaxed_threads
cp "$CARGO_TARGET_DIR/relaxed-threads/wasm32-unknown-unknown/release/transduce_relaxed.wasm" \
    "$out/transduce-relaxed-threads.wasm"
