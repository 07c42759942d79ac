#!/usr/bin/env bash
# The WebGPU build of the wasm module, next to the CPU build trunk makes: run by trunk as a
# post_build hook (Trunk.toml), so `trunk build` and `scripts/demo.sh` produce both.
#
# The two builds share one API. The page and the npm package load the CPU build
# (transduce-web.js) unless WebGPU may run, and only then fetch this one
# (transduce-web-webgpu.js): the CPU build plus the GPU decoder (crates/transduce-gpu,
# hand-written WGSL on the browser's WebGPU through wgpu's thin WebGPU bindings; no naga,
# no burn GPU backend). Same size-first profile as the CPU build (`web`), which also lets
# the two builds share every dependency's compiled code.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/common.sh
out=${TRUNK_STAGING_DIR:?run by trunk as a post_build hook (see Trunk.toml)}

log "building the WebGPU wasm module (cargo --features webgpu)"
wasm_cargo_webgpu
wasm-bindgen --target web --typescript --out-name transduce-web-webgpu --out-dir "$out" \
    "$CARGO_TARGET_DIR/wasm32-unknown-unknown/web/transduce_web.wasm"
log "wasm-opt -Os on the WebGPU module"
wasm-opt -Os --enable-simd --enable-bulk-memory --enable-nontrapping-float-to-int \
    --enable-sign-ext --enable-mutable-globals \
    -o "$out/transduce-web-webgpu_bg.wasm" "$out/transduce-web-webgpu_bg.wasm"
