#!/usr/bin/env bash
# The adaptation module (crates/transduce-adapt-web: the model crate's training step, burn
# autodiff and Adam on the CPU), next to the page's modules: run by trunk as a post_build
# hook (Trunk.toml). The worker fetches it only when the visitor adapts a translator, so a
# visit that only translates downloads none of it. Same size-first profile as the CPU module,
# and wasm-opt -Os like it: -O1 takes 16 s instead of 61 and gzips smaller (1.21 MB against
# 1.30), but Chromium's worker then ran the 30 steps in 29 s instead of 17 (measured
# 2026-11-28; on the page's main thread both took 16).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/common.sh
out=${TRUNK_STAGING_DIR:?run by trunk as a post_build hook (see Trunk.toml)}

log "building the adaptation wasm module (transduce-adapt-web)"
wasm_cargo_adapt
wasm-bindgen --target web --typescript --out-name transduce-adapt --out-dir "$out" \
    "$CARGO_TARGET_DIR/wasm32-unknown-unknown/web/transduce_adapt_web.wasm"
log "wasm-opt -Os on the adaptation module"
wasm-opt -Os --enable-simd --enable-bulk-memory --enable-nontrapping-float-to-int \
    --enable-sign-ext --enable-mutable-globals \
    -o "$out/transduce-adapt_bg.wasm" "$out/transduce-adapt_bg.wasm"
